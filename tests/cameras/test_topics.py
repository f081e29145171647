"""Camera topic layouts per driver (robopin, realsense-ros, zed-ros2-wrapper) and the system file's ``cameras:``."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from robopin.cameras.images import decode_depth_m
from robopin.cameras.topics import CameraTopicsError, camera_topic_patterns, prefix_topics, view_topics
from robopin.system import SystemFileError, system_from_dict
from tests.system.test_schema import SIM


def test_the_default_is_camera_nodes_names_exactly():
    topics = view_topics("wrist")
    assert topics.names() == {"color": "cameras/wrist/color/image_raw", "info": "cameras/wrist/color/camera_info",
                              "depth": "cameras/wrist/aligned_depth_to_color/image_raw"}
    assert topics.names(unaligned=True)["depth"] == "cameras/wrist/depth/image_rect_raw"
    assert topics.names(unaligned=True)["depth_info"] == "cameras/wrist/depth/camera_info"
    assert topics.qos == "reliable"


def test_realsense_names_follow_camera_name_or_a_prefix():
    assert view_topics("static", "realsense").color == "/camera/static/color/image_raw"
    own = view_topics("static", "realsense", "/camera/camera", "sensor_data")
    assert own.depth == "/camera/camera/aligned_depth_to_color/image_raw"
    assert own.info == "/camera/camera/color/camera_info"
    assert own.qos == "sensor_data"


def test_zed_names_and_no_unaligned_depth():
    zed = view_topics("zed", "zed")
    assert zed.color == "/zed/zed_node/rgb/color/rect/image"
    assert zed.info == "/zed/zed_node/rgb/color/rect/camera_info"
    assert zed.depth == "/zed/zed_node/depth/depth_registered"
    # Before wrapper v5.1 the color topic was rgb/image_rect_color: one name replaced, the rest kept.
    assert view_topics("zed", "zed", color="rgb/image_rect_color").color == "/zed/zed_node/rgb/image_rect_color"
    with pytest.raises(CameraTopicsError, match="no unaligned depth"):
        zed.names(unaligned=True)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"driver": "kinect"}, "unknown camera driver 'kinect'"),
    ({"qos": "best"}, "unknown camera qos 'best'"),
    ({"prefix": "/camera//x"}, "is not a ROS name"),
    ({"prefix": "/9cam"}, "is not a ROS name"),
])
def test_bad_settings_are_named(kwargs, match):
    with pytest.raises(CameraTopicsError, match=match):
        view_topics("static", **kwargs)


def test_both_depth_encodings_the_drivers_publish_decode_to_metres():
    # realsense-ros: Z16 as 16UC1 millimetres; zed-ros2-wrapper default: 32FC1 metres.
    mm = np.array([[800, 0]], dtype=np.uint16)
    metres = np.array([[0.8, np.nan]], dtype=np.float32)
    np.testing.assert_allclose(decode_depth_m("16UC1", mm), decode_depth_m("32FC1", metres))


def _system(cameras):
    data = copy.deepcopy(SIM)
    data["cameras"] = cameras
    data["nodes"]["recorder_node"] = {"executable": "recorder_node", "parameters": {"output_dir": "bags"}}
    return system_from_dict(data)


def test_a_system_hands_each_view_setting_to_every_node_that_uses_the_topics():
    system = _system({"static": {"driver": "realsense", "prefix": "/camera/camera", "qos": "sensor_data"}})
    params = {name: body["ros__parameters"] for name, body in system.with_arguments({}).ros_parameters_file().items()}
    expected = {"cameras.static.driver": "realsense", "cameras.static.prefix": "/camera/camera",
                "cameras.static.qos": "sensor_data"}
    for node in ("camera_static", "task_node", "projection_node", "recorder_node"):
        assert expected.items() <= params[node].items(), node
    assert params["recorder_node"]["views"] == ["static", "wrist"]
    for node in ("camera_wrist", "arm", "motion_planner_node"):
        assert not any(key.startswith("cameras.") for key in params[node]), node
    assert system.view_topics()["static"].color == "/camera/camera/color/image_raw"
    assert system.view_topics()["wrist"].color == "cameras/wrist/color/image_raw"


def test_a_system_without_cameras_passes_exactly_the_parameters_it_did():
    data = copy.deepcopy(SIM)
    system = system_from_dict(data).with_arguments({})
    for body in system.ros_parameters_file().values():
        assert not any(key.startswith("cameras.") for key in body["ros__parameters"])


@pytest.mark.parametrize(("cameras", "match"), [
    ({"side": {"driver": "realsense"}}, "'side' is not one of the views"),
    ({"static": {"driver": "realsense", "serial": "1"}}, r"unknown key\(s\) \['serial'\]"),
    ({"static": {"driver": "realsense", "prefix": "/cam"}, "wrist": {"driver": "realsense", "prefix": "/cam"}},
     "both use topic '/cam/color/image_raw'"),
    ({"static": {"qos": "fast"}}, "unknown camera qos 'fast'"),
])
def test_bad_cameras_sections_are_refused_naming_the_view(cameras, match):
    with pytest.raises(SystemFileError, match=match):
        _system(cameras)


def test_a_view_another_driver_publishes_needs_no_camera_node():
    data = copy.deepcopy(SIM)
    del data["nodes"]["camera_static"]
    with pytest.raises(SystemFileError, match=r"no camera_node publishes view\(s\) \['static'\]"):
        system_from_dict(data)
    data["cameras"] = {"static": {"driver": "realsense"}}
    assert system_from_dict(data).view_topics()["static"].color == "/camera/static/color/image_raw"


def test_a_prefix_and_the_recorder_patterns_come_from_the_same_layout():
    assert prefix_topics("camera/camera") == {"color": "/camera/camera/color/image_raw",
                                              "info": "/camera/camera/color/camera_info",
                                              "depth": "/camera/camera/aligned_depth_to_color/image_raw"}
    assert prefix_topics("/cameras/wrist/") == view_topics("wrist", robopin_root="/cameras").names()
    assert camera_topic_patterns() == ("cameras/*/color/image_raw", "cameras/*/color/camera_info",
                                       "cameras/*/aligned_depth_to_color/image_raw", "cameras/*/depth/image_rect_raw",
                                       "cameras/*/depth/camera_info")
