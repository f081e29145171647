"""Camera views read under a driver's own topics and QoS, over real DDS.

Our camera_node (the real producer, a bag backend) publishes the view ``static`` the way realsense-ros does
with ``camera_name:=camera`` and ``color_qos:=SENSOR_DATA``/``depth_qos:=SENSOR_DATA``
(``/camera/camera/color/image_raw``, ``/camera/camera/aligned_depth_to_color/image_raw``, best effort);
the planner's snapshot subscriber and projection_node, configured with the same ``cameras.static.*``
settings, take a snapshot and project a point. A consumer left at reliable QoS gets no frame, and the
refusal says so by name (``camera_qos_mismatch``) on both sides instead of a silent wait.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
import yaml
from rcl_interfaces.msg import Log
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import ReliabilityPolicy
from robopin_interfaces.msg import Anchor
from robopin_interfaces.srv import ProjectPoints
from robopin_ros.actions import ask
from robopin_ros.camera_snapshot import CameraViewsSubscriber, declare_view_topics
from robopin_ros.runtime import destroy_when_stopped

from robopin.bags import TrialBag
from robopin.cameras import Frame, SnapshotConfig, SnapshotError
from robopin.cameras.bag import write_camera_bag
from robopin.cameras.synthetic import SyntheticScene
from robopin.cameras.topics import view_topics
from robopin.env import REPO_ROOT
from robopin.geometry.camera_model import CameraModel
from tests.ros.rostest_utils import SpunNode, start_process, stop_process, wait_for

pytestmark = [pytest.mark.ros, pytest.mark.slow]
pytest.importorskip("rosbags")

MODEL = CameraModel(64, 48, 50.0, 50.0, 31.5, 23.5)
PLANE = SyntheticScene(0.8, 0.0)  # a wall 0.8 m in front of the camera
REALSENSE = {"driver": "realsense", "prefix": "/camera/camera", "qos": "sensor_data"}


def _settings_args(view: str, settings: dict[str, str]) -> list[str]:
    return [arg for key, value in settings.items() for arg in ("-p", f"cameras.{view}.{key}:={value}")]


def _overrides(view: str, settings: dict[str, str]) -> list[Parameter]:
    return [Parameter(f"cameras.{view}.{key}", value=value) for key, value in settings.items()]


@pytest.fixture(scope="module")
def realsense_named_camera(tmp_path_factory):
    """camera_node publishing a bag's frames under realsense-ros names with SENSOR_DATA QoS."""
    frames = [Frame(PLANE.color(MODEL, i), PLANE.depth_m(MODEL), MODEL, 1000 + i / 30, "", i, "static")
              for i in range(30)]
    bag = write_camera_bag(tmp_path_factory.mktemp("driver_topics") / "static", frames, topic_prefix="/cameras/static")
    process = start_process(["-m", "robopin_ros.camera_node", "--ros-args", "-r", "__node:=camera_static",
                             "-p", "name:=static", "-p", "backend:=bag", "-p", f"bag_path:={bag}",
                             "-p", f"width:={MODEL.width}", "-p", f"height:={MODEL.height}",
                             "-p", "options:='{loop: true}'", *_settings_args("static", REALSENSE)])
    yield process
    code, output = stop_process(process)
    assert code == 0, f"camera_node did not stop cleanly (exit {code}):\n{output}"


def test_snapshot_and_projection_read_realsense_names_with_sensor_data_qos(ros_context, realsense_named_camera):
    spun = SpunNode("driver_topics_client", ros_context)
    host = Node("planner_like", context=ros_context, parameter_overrides=_overrides("static", REALSENSE))
    topics = declare_view_topics(host, ["static"])
    assert topics["static"].color == "/camera/camera/color/image_raw"
    assert topics["static"].depth == "/camera/camera/aligned_depth_to_color/image_raw"
    # own_executor, as the planner runs it: close() stops its spinning before the subscriptions go.
    views = CameraViewsSubscriber(spun.node, SnapshotConfig(views=("static",), max_age_s=0.5), topics=topics,
                                  own_executor=True)

    from robopin_ros.projection_node import ProjectionNode

    calibrations = yaml.safe_dump({"static": {"parent_frame": "base", "matrix": np.eye(4).tolist()}})
    projection = ProjectionNode(context=ros_context, parameter_overrides=[
        Parameter("views", value=["static"]), Parameter("calibrations", value=calibrations),
        Parameter("cross_view_rule", value="distance"), *_overrides("static", REALSENSE)])
    executor = MultiThreadedExecutor(num_threads=2, context=ros_context)
    executor.add_node(projection)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        # The publisher really is best effort (what SENSOR_DATA is), so a reliable reader would get nothing.
        wait_for(lambda: bool(spun.node.get_publishers_info_by_topic(topics["static"].color)), 30,
                 "camera_node's publisher under the realsense-ros name")
        offered = {p.qos_profile.reliability for p in spun.node.get_publishers_info_by_topic(topics["static"].color)}
        assert offered == {ReliabilityPolicy.BEST_EFFORT}

        snapshot = []

        def taken() -> bool:
            try:
                snapshot.append(views.snapshot())
            except SnapshotError:
                return False
            return True

        wait_for(taken, 30, "a snapshot of the realsense-named view")
        frame = snapshot[0].frames["static"]
        assert frame.depth_m is not None
        np.testing.assert_allclose(np.nanmedian(frame.depth_m), 0.8, atol=1e-3)

        client = spun.node.create_client(ProjectPoints, "/robopin/project_points")
        assert client.wait_for_service(timeout_sec=30)
        u, v = 40.5, 20.5  # the centre of pixel (40, 20): robopin's pixel centres lie at i + 0.5
        request = ProjectPoints.Request(anchors=[Anchor(kind="obj", name="wall", id="1", img_idx=0, x=math.nan,
                                                        y=math.nan, u=u, v=v, char_offset=-1)])

        def projected():
            reply = ask(client, request, 10)  # asked again: a reply Fast DDS dropped never comes (actions.ask)
            assert reply is not None, "no ProjectPoints reply within 10 s"
            return reply if reply.success and reply.targets[0].valid else None

        reply = None
        for _ in range(100):
            reply = projected()
            if reply is not None:
                break
        assert reply is not None, "projection_node never projected the point from the realsense-named view"
        point = reply.targets[0].point
        # Pinhole truth of the wall: z = 0.8 m along the pixel's ray, camera frame = base (identity mount);
        # CameraInfo's cx is the SDK's (centre of the top-left pixel at 0), hence u - 0.5.
        expected = 0.8 * np.array([(u - 0.5 - MODEL.cx) / MODEL.fx, (v - 0.5 - MODEL.cy) / MODEL.fy, 1.0])
        np.testing.assert_allclose([point.x, point.y, point.z], expected, atol=2e-3)
        assert not projection.qos_watch.mismatches and not views.qos_watch.mismatches
    finally:
        destroy_when_stopped(executor, spinner, [projection])
        views.close()
        host.destroy_node()
        spun.close()


def test_a_reliable_reader_of_a_sensor_data_camera_is_refused_as_camera_qos_mismatch(ros_context,
                                                                                       realsense_named_camera):
    spun = SpunNode("driver_topics_mismatch", ros_context)
    logged = []
    spun.node.create_subscription(Log, "/rosout", logged.append, 100)
    wrong = view_topics("static", "realsense", "/camera/camera", "reliable")  # the driver publishes best effort
    views = CameraViewsSubscriber(spun.node, SnapshotConfig(views=("static",), max_age_s=0.5),
                                  topics={"static": wrong}, own_executor=True)
    try:
        wait_for(lambda: "static" in views.qos_watch.mismatches, 30, "the incompatible-QoS event of the view")
        # The publisher's side names it too, in camera_node's log.
        wait_for(lambda: any(m.name == "camera_static" and "camera_qos_mismatch" in m.msg for m in logged), 30,
                 "camera_node's camera_qos_mismatch error on /rosout")
        with pytest.raises(SnapshotError) as refused:
            views.snapshot()
        assert refused.value.reason == "camera_qos_mismatch"
        assert "/camera/camera/" in str(refused.value) and "cameras.static.qos" in str(refused.value)
    finally:
        views.close()
        spun.close()


def test_a_sim_task_runs_with_every_view_under_realsense_names_and_sensor_data_qos(tmp_path):
    """The whole stack (``robopin up --demo``, every node over DDS) on sim_panda with a ``cameras:`` section:
    the camera nodes publish as realsense-ros would, the planner, projection, recorder and task client read
    those topics, the task succeeds and the bag holds the views under their realsense-ros names."""
    system = yaml.safe_load((REPO_ROOT / "config" / "sim_panda.yaml").read_text(encoding="utf-8"))
    system["name"] = "sim_panda_realsense"
    # realsense-ros launched with camera_name:=static / wrist (the preset's /camera/<view>): /camera/camera is
    # this module's camera_node, which may still be running.
    system["cameras"] = {view: {"driver": "realsense", "qos": "sensor_data"} for view in ("static", "wrist")}
    path = tmp_path / "sim_panda_realsense.yaml"
    path.write_text(yaml.safe_dump(system, sort_keys=False), encoding="utf-8")
    command = [sys.executable, "-m", "robopin.cli", "up", str(path), "--demo", "--out", str(tmp_path / "demo")]
    result = subprocess.run(command, cwd=tmp_path, env=dict(os.environ), capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0 and "SUCCESS" in result.stdout, result.stdout[-4000:] + result.stderr[-4000:]
    assert "camera_qos_mismatch" not in result.stdout + result.stderr
    (bag,) = {p.parent for p in (tmp_path / "demo").rglob("metadata.yaml")}
    topics = TrialBag(bag).topics
    for prefix in ("/camera/static", "/camera/wrist"):
        assert {f"{prefix}/color/image_raw", f"{prefix}/color/camera_info",
                f"{prefix}/aligned_depth_to_color/image_raw"} <= set(topics), sorted(topics)
    assert not any(t.startswith("/cameras/") and t.endswith("/image_raw") for t in topics), sorted(topics)
