"""camera_node parameters: options reach the camera config, bad ones fail naming the value, fixed ones stay fixed."""

from __future__ import annotations

import pytest
from rclpy.parameter import Parameter

from robopin.cameras import Frame, UnknownCameraTypeError
from robopin.cameras.bag import write_camera_bag
from robopin.cameras.synthetic import SyntheticScene
from robopin.geometry.camera_model import CameraModel

pytestmark = pytest.mark.ros

MODEL = CameraModel(32, 24, 30.0, 30.0, 15.5, 11.5)


@pytest.fixture(scope="module")
def bag(tmp_path_factory):
    scene = SyntheticScene()
    frames = [Frame(scene.color(MODEL, i), scene.depth_m(MODEL), MODEL, 10.0 + i / 30, "", i, "top") for i in range(3)]
    return write_camera_bag(tmp_path_factory.mktemp("params") / "top", frames, topic_prefix="/cameras/top")


def _node(ros_context, **params):
    from robopin_ros.camera_node import CameraNode

    overrides = [Parameter(k, value=v) for k, v in params.items()]
    return CameraNode(context=ros_context, parameter_overrides=overrides)


def test_parameters_and_options_build_the_backend_config(ros_context, bag):
    node = _node(ros_context, name="top", backend="bag", bag_path=str(bag), width=32, height=24,
                 options="{loop: true, max_depth_offset_s: 0.004}", serial=1234)
    try:
        config = node.camera.config
        assert (config.type, config.name, config.width, config.height) == ("bag", "top", 32, 24)
        assert config.loop is True and config.max_depth_offset_s == 0.004
        assert config.serial == "1234"  # an all-digit serial given as an int still becomes a string
    finally:
        node.destroy_node()


def test_fixed_parameters_are_refused_and_timing_is_accepted(ros_context, bag):
    node = _node(ros_context, name="top", backend="bag", bag_path=str(bag), width=32, height=24)
    try:
        refused = node.set_parameters([Parameter("width", value=64)])[0]
        assert not refused.successful and "width" in refused.reason
        accepted = node.set_parameters([Parameter("reconnect_period_s", value=0.5)])[0]
        assert accepted.successful and node.reconnect_period_s == 0.5
    finally:
        node.destroy_node()


def test_unknown_backend_fails_naming_it(ros_context):
    with pytest.raises(UnknownCameraTypeError, match="kinect"):
        _node(ros_context, backend="kinect")


def test_option_the_backend_lacks_fails_naming_it(ros_context, bag):
    with pytest.raises(ValueError, match="exposure"):
        _node(ros_context, backend="bag", bag_path=str(bag), options="{exposure: 3}")
