"""Camera message conversions: Frame ⇄ sensor_msgs Image (rgb8, 16UC1 mm) + CameraInfo, as realsense-ros sends them."""

from __future__ import annotations

import numpy as np
import pytest
from robopin_ros import conversions

from robopin.cameras import Frame
from robopin.cameras.synthetic import SyntheticScene
from robopin.geometry.camera_model import CameraModel

MODEL = CameraModel(40, 30, 35.0, 36.0, 19.2, 14.7, "plumb_bob", (0.1, -0.05, 0.001, 0.002, 0.0))


def _frame() -> Frame:
    scene = SyntheticScene(1.2, 0.1)
    depth = scene.depth_m(MODEL)
    depth[3:5, 3:5] = np.nan
    return Frame(scene.color(MODEL, 7), depth, MODEL, 1_750_000_000.123456789, "SN", 7, "wrist")


def test_frame_round_trips_through_messages():
    frame = _frame()
    color, depth, info = conversions.frame_to_msgs(frame)
    assert (color.encoding, depth.encoding) == ("rgb8", "16UC1")
    assert color.header.frame_id == depth.header.frame_id == info.header.frame_id == "wrist_optical"
    assert color.header.stamp == depth.header.stamp == info.header.stamp
    back = conversions.msgs_to_frame(color, depth, info, index=7)
    np.testing.assert_array_equal(back.color, frame.color)
    assert back.intrinsics == frame.intrinsics
    assert back.camera_name == "wrist"
    assert back.timestamp_s == pytest.approx(frame.timestamp_s, abs=1e-6)
    np.testing.assert_array_equal(np.isnan(back.depth_m), np.isnan(frame.depth_m))
    assert np.nanmax(np.abs(back.depth_m - frame.depth_m)) <= 0.0005 + 1e-6


def test_depth_message_holds_millimetres_with_zero_for_no_data():
    frame = _frame()
    _, depth, _ = conversions.frame_to_msgs(frame)
    raw = np.frombuffer(depth.data, dtype=np.uint16).reshape(depth.height, depth.width)
    assert raw[3, 3] == 0
    assert raw[10, 10] == round(float(frame.depth_m[10, 10]) * 1000)


def test_color_conversion_rejects_float_images():
    with pytest.raises(ValueError, match="float32"):
        conversions.color_to_image_msg(np.zeros((2, 2, 3), np.float32), conversions.make_header(0.0, "x"))
