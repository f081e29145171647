"""Raw image buffers ⇄ numpy: encodings, row padding, depth millimetres ⇄ metres with NaN as no data."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robopin.cameras.images import (
    ImageEncodingError,
    camera_info_message,
    color_image_fields,
    decode_color,
    decode_depth_m,
    decode_image,
    depth_image_fields,
    depth_m_to_16uc1,
    image_message,
    image_message_to_color,
    image_message_to_depth_m,
)
from robopin.geometry.camera_model import CameraModel


def test_bgr8_with_row_padding_decodes_to_rgb():
    rgb = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    step = 3 * 3 + 7  # padded rows, as some drivers send
    buffer = np.zeros((2, step), np.uint8)
    buffer[:, :9] = rgb[..., ::-1].reshape(2, 9)
    out = decode_color("bgr8", decode_image("bgr8", 2, 3, step, buffer.tobytes()))
    np.testing.assert_array_equal(out, rgb)


def test_big_endian_16uc1_is_read_in_the_right_byte_order():
    values = np.array([[1, 1000, 65535]], dtype=">u2")
    out = decode_image("16UC1", 1, 3, 6, values.tobytes(), is_bigendian=True)
    assert out.tolist() == [[1, 1000, 65535]]


def test_short_buffer_names_sizes():
    with pytest.raises(ImageEncodingError, match="needs 24 bytes, got 10"):
        decode_image("rgb8", 2, 4, 12, b"\0" * 10)


def test_unknown_encoding_is_refused():
    with pytest.raises(ImageEncodingError, match="yuv422"):
        decode_image("yuv422", 1, 1, 2, b"\0\0")


def test_depth_zero_and_out_of_range_become_no_data():
    depth = np.array([[0.5, np.nan, -1.0, 70.0, 0.0004, np.inf, -np.inf, 65.5356]], np.float32)
    assert depth_m_to_16uc1(depth).tolist() == [[500, 0, 0, 0, 0, 0, 0, 0]]
    back = decode_depth_m("16UC1", depth_m_to_16uc1(depth))
    assert back[0, 0] == pytest.approx(0.5) and np.isnan(back[0, 1:]).all()
    # the largest 16-bit value is still a depth; the input is not modified
    edge = np.array([[65.5349, 0.0006]], np.float32)
    assert depth_m_to_16uc1(edge).tolist() == [[65535, 1]]
    assert edge[0, 0] == np.float32(65.5349)


def test_32fc1_invalid_values_become_nan():
    depth = np.array([[1.5, np.inf, -np.inf, 0.0]], np.float32)
    out = decode_depth_m("32FC1", depth)
    assert out[0, 0] == 1.5 and np.isnan(out[0, 1:]).all()


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0.5, 65.0, width=32), min_size=1, max_size=20))
def test_depth_mm_round_trip_within_half_a_millimetre(values):
    depth = np.array([values], np.float32)
    back = decode_depth_m("16UC1", depth_m_to_16uc1(depth))
    # Half a millimetre of quantisation plus float32 rounding at the value (ulp is ~2e-6 m at 17 m).
    assert np.all(np.abs(back - depth) <= 0.0005 + 4 * np.spacing(depth))


def test_image_and_camera_info_fields_survive_a_bag_round_trip():
    typesys = pytest.importorskip("rosbags.typesys")
    typestore = typesys.get_typestore(typesys.Stores.ROS2_JAZZY)
    types = typestore.types
    header = types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](sec=1, nanosec=2), frame_id="c")

    def round_trip(message):
        return typestore.deserialize_cdr(typestore.serialize_cdr(message, message.__msgtype__), message.__msgtype__)

    rgb = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)
    depth_m = np.full((4, 5), 0.5, np.float32)
    depth_m[0, 0] = np.nan
    np.testing.assert_array_equal(image_message_to_color(round_trip(image_message(types, header,
                                                                                  color_image_fields(rgb)))), rgb)
    depth = image_message_to_depth_m(round_trip(image_message(types, header, depth_image_fields(depth_m))))
    np.testing.assert_array_equal(np.isnan(depth), np.isnan(depth_m))
    np.testing.assert_allclose(depth[1:], depth_m[1:])
    model = CameraModel(5, 4, 100.0, 101.0, 2.5, 2.0)
    assert CameraModel.from_camera_info(round_trip(camera_info_message(types, header, model))) == model
    with pytest.raises(ValueError, match="uint8"):
        color_image_fields(rgb.astype(np.float32))
