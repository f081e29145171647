"""camera_node over real DDS: two views (a bag and a RealSense recording) → snapshot, unaligned depth, and
reconnect after a failure."""

from __future__ import annotations

import subprocess
import threading

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from robopin_ros.camera_snapshot import CameraViewsSubscriber, view_topics
from sensor_msgs.msg import Image

from robopin.cameras import Frame, SnapshotConfig, SnapshotError
from robopin.cameras.bag import write_camera_bag
from robopin.cameras.synthetic import SyntheticScene, write_realsense_recording
from robopin.geometry.camera_model import CameraModel
from tests.ros.rostest_utils import SpunNode, start_process, stop_process, wait_for

pytestmark = [pytest.mark.ros, pytest.mark.slow]
pytest.importorskip("pyrealsense2", reason="pyrealsense2 (and Debian libusb-1.0-0) not installed")

STATIC = CameraModel(64, 48, 50.0, 50.0, 31.5, 23.5)
WRIST = CameraModel(80, 60, 60.0, 60.0, 39.5, 29.5)
STATIC_SCENE = SyntheticScene(1.0, 0.1)
WRIST_SCENE = SyntheticScene(0.5, 0.0)


def _camera_node(name: str, backend: str, model: CameraModel, **params) -> list[str]:
    args = ["-m", "robopin_ros.camera_node", "--ros-args", "-r", f"__node:=camera_{name}",
            "-p", f"name:={name}", "-p", f"backend:={backend}", "-p", f"width:={model.width}",
            "-p", f"height:={model.height}"]
    for key, value in params.items():
        args += ["-p", f"{key}:={value}"]
    return args


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    root = tmp_path_factory.mktemp("camera_node")
    frames = [Frame(STATIC_SCENE.color(STATIC, i), STATIC_SCENE.depth_m(STATIC), STATIC, 1000 + i / 30, "", i,
                    "static") for i in range(30)]
    bag = write_camera_bag(root / "static_bag", frames, topic_prefix="/cameras/static")
    wrist = write_realsense_recording(root / "wrist.db3", WRIST, 30, scene=WRIST_SCENE, paced=True, serial="SW77")
    short = write_realsense_recording(root / "short.db3", WRIST, 15, scene=WRIST_SCENE, paced=True, serial="SW78")
    return {"bag": bag, "wrist": wrist, "short": short}


@pytest.fixture(scope="module")
def two_views(recordings):
    processes = {
        "static": start_process(_camera_node("static", "bag", STATIC, bag_path=str(recordings["bag"]),
                                             options="'{loop: true}'")),
        "wrist": start_process(_camera_node("wrist", "realsense", WRIST, playback_file=str(recordings["wrist"]),
                                            options="'{repeat_playback: true}'")),
    }
    yield processes
    for name, process in processes.items():
        code, output = stop_process(process)
        assert code == 0, f"camera_node {name} did not stop cleanly (exit {code}):\n{output}"


@pytest.fixture
def subscriber(ros_context, two_views):
    spun = SpunNode("camera_test_client", ros_context)
    views = CameraViewsSubscriber(spun.node, SnapshotConfig(views=("static", "wrist"), sync_tolerance_s=0.02,
                                                            max_age_s=0.5))
    yield views
    views.close()
    spun.close()


def _snapshot_when_ready(views: CameraViewsSubscriber, timeout_s: float = 30.0,
                         what: str = "a synchronised snapshot of static + wrist"):
    result = []

    def ready() -> bool:
        try:
            result.append(views.snapshot())
        except SnapshotError:
            return False
        return True

    wait_for(ready, timeout_s, what)
    return result[-1]


def test_two_views_reach_a_snapshot_with_aligned_depth_and_intrinsics(subscriber, two_views):
    snap = _snapshot_when_ready(subscriber)
    static, wrist = snap.ordered_frames()
    assert snap.spread_s <= 0.02
    assert static.intrinsics == STATIC and wrist.intrinsics == WRIST
    assert static.camera_name == "static" and wrist.camera_name == "wrist"
    for frame, scene, model in ((static, STATIC_SCENE, STATIC), (wrist, WRIST_SCENE, WRIST)):
        truth = scene.depth_m(model)
        # 16UC1 millimetres on the wire: within half a millimetre of the truth everywhere.
        assert np.isfinite(frame.depth_m).all()
        assert np.abs(frame.depth_m - truth).max() <= 0.0005 + 1e-6
    np.testing.assert_array_equal(static.color[1:], STATIC_SCENE.color(STATIC, int(static.color[0, 0, 0]))[1:])


def test_topics_follow_realsense_ros_names_and_share_the_optical_frame(subscriber, ros_context):
    spun = SpunNode("camera_topic_probe", ros_context)
    seen: dict[str, Image] = {}
    got = threading.Event()

    def keep(kind: str, msg: Image) -> None:
        seen[kind] = msg
        if len(seen) == 2:
            got.set()

    topics = view_topics("wrist")
    spun.node.create_subscription(Image, topics["color"], lambda m: keep("color", m), 5)
    depth = spun.node.create_subscription(Image, topics["depth"], lambda m: keep("depth", m), 5)
    depth_topic = depth.topic_name  # resolved: the names are relative, here in the root namespace
    try:
        assert got.wait(20), f"no images on {topics['color']} and {topics['depth']}"
    finally:
        spun.close()
    assert seen["color"].encoding == "rgb8" and seen["depth"].encoding == "16UC1"
    assert seen["color"].header.frame_id == seen["depth"].header.frame_id == "wrist_optical"
    assert depth_topic == "/cameras/wrist/aligned_depth_to_color/image_raw"


def test_own_executor_delivers_frames_without_the_callers_node_spinning(ros_context, two_views):
    # The caller's node is never spun: frames can only arrive through the subscriber's own thread.
    node = Node("camera_own_executor_client", context=ros_context)
    views = CameraViewsSubscriber(node, SnapshotConfig(views=("static", "wrist"), sync_tolerance_s=0.02,
                                                       max_age_s=0.5), own_executor=True)
    try:
        snap = _snapshot_when_ready(views)
        assert snap.spread_s <= 0.02
        assert [f.camera_name for f in snap.ordered_frames()] == ["static", "wrist"]
        assert views.node is not node and views.node.get_name() == "camera_own_executor_client_cameras"
    finally:
        views.close()
        node.destroy_node()


def test_snapshot_refuses_stale_view_when_its_camera_node_stops(subscriber, two_views):
    _snapshot_when_ready(subscriber)
    code, output = stop_process(two_views["static"])
    assert code == 0, output

    def refused_stale() -> bool:
        try:
            subscriber.snapshot()
        except SnapshotError as error:
            return error.reason == "stale_frame" and error.views == ("static",)
        return False

    wait_for(refused_stale, 5.0, "a stale_frame refusal naming the stopped 'static' view")


def test_unaligned_depth_goes_out_on_the_depth_topics_and_aligns_on_demand(recordings, ros_context, tmp_path):
    # align_depth:=false: a D435-like recording (depth imager 15 mm beside color, its own intrinsics)
    # is published on depth/image_rect_raw + depth/camera_info in <name>_depth_optical; nothing is
    # registered per frame. The subscriber keeps it unaligned and aligned_depth_m() gives the plane's
    # depth as the color camera sees it.
    depth_model = CameraModel(64, 48, 56.0, 56.0, 31.5, 23.5)
    T_color_depth = np.eye(4)
    T_color_depth[0, 3] = 0.015
    recording = write_realsense_recording(tmp_path / "d435.db3", WRIST, 30, scene=WRIST_SCENE, paced=True,
                                          serial="SW79", depth_model=depth_model, T_color_depth=T_color_depth)
    process = start_process(_camera_node("d435", "realsense", WRIST, playback_file=str(recording),
                                         align_depth="false", options="'{repeat_playback: true}'"))
    spun = SpunNode("camera_unaligned_client", ros_context)
    aligned_seen: list[Image] = []
    spun.node.create_subscription(Image, view_topics("d435")["depth"], aligned_seen.append, 5)
    views = CameraViewsSubscriber(spun.node, SnapshotConfig(views=("d435",), max_age_s=0.5),
                                  unaligned_depth={"d435": T_color_depth})
    try:
        frame = _snapshot_when_ready(views, what="a snapshot of the unaligned view").frames["d435"]
    finally:
        views.close()
        spun.close()
        code, output = stop_process(process)
    assert code == 0, output
    assert "unaligned_depth: {d435: {matrix: [[1.000000, 0.000000, 0.000000, 0.015000]" in output, output
    assert not aligned_seen, "nothing may go out on aligned_depth_to_color with align_depth:=false"
    assert not frame.depth_aligned and frame.depth_intrinsics == depth_model
    assert frame.depth_m.shape == (48, 64)
    np.testing.assert_allclose(frame.T_color_depth, T_color_depth, atol=1e-6)
    aligned = frame.aligned_depth_m()
    truth = WRIST_SCENE.depth_m(WRIST, T_color_depth)
    both = np.isfinite(aligned) & np.isfinite(truth)
    assert both.mean() > 0.5
    assert np.abs(aligned[both] - truth[both]).max() < 0.005  # 16UC1 millimetres on the wire


def test_camera_node_refuses_align_depth_false_for_a_backend_without_it(recordings):
    process = start_process(_camera_node("static2", "bag", STATIC, bag_path=str(recordings["bag"]),
                                         align_depth="false"))
    try:
        output, _ = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        stop_process(process)
        pytest.fail("camera_node kept running with align_depth:=false on the bag backend")
    assert process.returncode != 0 and "align_depth" in output, output


def test_reconnects_after_the_recording_ends_without_taking_the_node_down(recordings, ros_context):
    # End of a non-repeating recording is a real read failure from librealsense; the node must report
    # it, release the camera, reconnect and stream again from the start.
    process = start_process(_camera_node("flaky", "realsense", WRIST, playback_file=str(recordings["short"]),
                                         reconnect_period_s=0.2, diagnostics_period_s=0.2))
    spun = SpunNode("camera_reconnect_probe", ros_context)
    reds: list[int] = []
    diagnostics: list[dict[str, str]] = []
    spun.node.create_subscription(Image, view_topics("flaky")["color"],
                                  lambda m: reds.append(int(np.frombuffer(m.data, np.uint8)[0])), 20)
    spun.node.create_subscription(
        DiagnosticArray, "/diagnostics",
        lambda m: diagnostics.extend({kv.key: kv.value for kv in s.values} | {"name": s.name} for s in m.status), 20)

    def restarted() -> bool:
        # a run that reached the end (red >= 10) followed by frames from the start again (red <= 2)
        peak = next((i for i, r in enumerate(reds) if r >= 10), None)
        return peak is not None and any(r <= 2 for r in reds[peak:])

    try:
        wait_for(restarted, 30.0, "frames from a restarted recording after its end")
        wait_for(lambda: any(d.get("name") == "camera_node: flaky" and int(d["reconnects"]) >= 1
                             and int(d["failures"]) >= 1 for d in diagnostics), 10.0,
                 "diagnostics reporting the failure and the reconnect")
        assert process.poll() is None, "camera_node exited instead of reconnecting"
        failing = [d for d in diagnostics if d.get("name") == "camera_node: flaky" and int(d["failures"]) >= 1]
        assert any("end of recording" in d["last_error"] for d in failing)
        latency_ms = float(failing[-1]["capture_to_publish_p50_ms"])
        assert 0.0 <= latency_ms < 10_000.0
        # Where that time goes: each stage of capture → published is reported, and none exceeds the whole
        # by more than rounding (p95 of a part can exceed the whole's p50, so compare like with like).
        for quantile in ("p50", "p95"):
            whole_ms = float(failing[-1][f"capture_to_publish_{quantile}_ms"])
            for stage in ("capture_to_read", "read_to_messages", "messages_to_published"):
                stage_ms = float(failing[-1][f"{stage}_{quantile}_ms"])
                assert -1.0 <= stage_ms <= whole_ms + 0.01, (stage, quantile, stage_ms, whole_ms)
    finally:
        spun.close()
        code, output = stop_process(process)
    assert code == 0, output
