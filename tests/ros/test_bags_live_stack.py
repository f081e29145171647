"""Replay for debugging on bags the live recorder node wrote from a running sim stack.

Two recordings, each made by the real command line in its own process with every node over DDS
(cameras, projection, motion planner, arm driver, planner with the oracle, state publisher, recorder):
``robopin up config/sim_panda.yaml --demo`` (the README's ``make demo``) and a long-horizon task on the
simulated xArm 6 (``robopin trial long_horizon@0 --system sim_xarm6``). Nothing here writes the bags it
reads; the replay is checked against what the stack recorded live.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from robopin.bags import TrialBag

pytestmark = [pytest.mark.ros, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def _robopin(*args: str, cwd: Path, timeout_s: float = 900) -> subprocess.CompletedProcess:
    # The recorder writes to trials/bags under the working directory: run where the test may write.
    return subprocess.run([sys.executable, "-m", "robopin.cli", *args], cwd=cwd, env=dict(os.environ),
                          capture_output=True, text=True, timeout=timeout_s)


def _bag_of(folder: Path) -> Path:
    bags = sorted(p.parent for p in folder.rglob("metadata.yaml"))
    assert len(bags) == 1, f"expected one recorder bag under {folder}, found {bags}"
    return bags[0]


@pytest.fixture(scope="module")
def demo_bag(tmp_path_factory) -> Path:
    """The bag ``make demo`` records (spatial task, simulated Panda)."""
    work = tmp_path_factory.mktemp("demo")
    result = _robopin("up", str(ROOT / "config" / "sim_panda.yaml"), "--demo", "--out", str(work / "demo"), cwd=work)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return _bag_of(work / "demo")


@pytest.fixture(scope="module")
def long_horizon_bag(tmp_path_factory) -> Path:
    """A multi-step long-horizon task on the simulated xArm 6, recorded by recorder_node."""
    work = tmp_path_factory.mktemp("long_horizon")
    result = _robopin("trial", "long_horizon@0", "--system", "sim_xarm6", "--out", str(work / "trial"), cwd=work)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return _bag_of(work / "trial")


def _rclpy_class(msgtype: str):
    from robopin_ros.recorder_node import message_class

    try:
        return message_class(msgtype)
    except ImportError:
        # foxglove_msgs (the recorder's image annotations) has no wheel on the package index; the
        # ros:jazzy image has ros-jazzy-foxglove-msgs. Every other type must be there.
        assert msgtype.startswith("foxglove_msgs/"), f"no rclpy class for {msgtype}"
        return None


def test_every_message_of_the_demo_bag_decodes_with_rosbags_and_rclpy(demo_bag, capsys):
    from rclpy.serialization import deserialize_message

    from robopin.cli import main

    assert main(["bag", "step", str(demo_bag), "--topic", "/cameras/static/color/image_raw", "--all"]) == 0
    with TrialBag(demo_bag) as bag:
        frames = bag.topics["/cameras/static/color/image_raw"].count
    assert capsys.readouterr().out.count("frame ") == frames
    assert main(["bag", "info", str(demo_bag)]) == 0
    info = capsys.readouterr().out
    for line in ("/tf_static  [tf2_msgs/msg/TFMessage]", "/tf  [tf2_msgs/msg/TFMessage]",
                 "/robot_description  [std_msgs/msg/String]", "/robopin/targets  [robopin_interfaces/msg/Target3D]",
                 "/robopin/planned_trajectory  [trajectory_msgs/msg/JointTrajectory]",
                 "/robopin/motion/pick_place/_action/result  [robopin_interfaces/action/PickPlace_GetResult_Response]",
                 "/robopin/workspace_cloud  [sensor_msgs/msg/PointCloud2]"):
        assert line in info, info
    decoded = 0
    with TrialBag(demo_bag) as bag:
        for message in bag.messages():
            ours = bag.decode(message)  # rosbags: raises on any size or type mismatch
            cls = _rclpy_class(message.msgtype)
            if cls is not None:
                theirs = deserialize_message(message.data, cls)
                assert type(theirs).__name__ == type(ours).__name__.split("__")[-1]
            decoded += 1
        assert decoded == sum(t.count for t in bag.topics.values())
        (first, *_) = bag.messages()
        assert first.topic == "/tf_static"  # replays and late readers can place the cameras before anything else
        (result,) = (r for _, r in bag.decoded(["/robopin/motion/pick_place/_action/result"]))
        phases = [t for _, t in bag.decoded(["/robopin/planned_trajectory"])]
    assert result.result.success and len(result.result.trajectories) == len(phases) > 0


def _matrix(transform) -> np.ndarray:
    from robopin.geometry.transforms import quaternion_to_matrix

    T = np.eye(4)
    q, t = transform.transform.rotation, transform.transform.translation
    T[:3, :3] = quaternion_to_matrix([q.x, q.y, q.z, q.w])
    T[:3, 3] = [t.x, t.y, t.z]
    return T


def test_tf_of_the_demo_bag_places_the_tool_where_the_arm_driver_says_it_is(demo_bag):
    """/tf_static + /tf (URDF and joint states, our state publisher) against the sim arm's own ee pose."""
    with TrialBag(demo_bag) as bag:
        static = {t.child_frame_id: t for _, m in bag.decoded(["/tf_static"]) for t in m.transforms}
        moving = [d for _, d in bag.decoded(["/tf"])]
        poses = {(p.header.stamp.sec, p.header.stamp.nanosec): p.pose for _, p in bag.decoded(["/robopin/arm/ee_pose"])}
    # REP-105-style tree: the URDF's links, robopin's base/ee and the cameras on one root.
    assert static["base"].header.frame_id == "panda_link0"
    assert static["ee"].header.frame_id == "panda_grasptarget"
    assert static["static_optical"].header.frame_id == "base"
    assert static["wrist_optical"].header.frame_id == "ee"
    checked = 0
    for message in moving:
        stamp = (message.transforms[0].header.stamp.sec, message.transforms[0].header.stamp.nanosec)
        if stamp not in poses:
            continue
        edges = {t.child_frame_id: t for t in message.transforms} | static
        T, frame = np.eye(4), "ee"
        while frame != "panda_link0":  # walk up to the URDF root
            edge = edges[frame]
            T = _matrix(edge) @ T
            frame = edge.header.frame_id
        pose = poses[stamp]
        np.testing.assert_allclose(T[:3, 3], [pose.position.x, pose.position.y, pose.position.z], atol=1e-6)
        checked += 1
    assert checked > 10


def test_demo_bag_replans_with_the_recorded_backend_to_the_recorded_targets(demo_bag, capsys):
    from robopin.cli import main

    code = main(["bag", "replan", str(demo_bag), "--backend", "recorded", "--tolerance-m", "0.002",
                 "--tolerance-px", "0.5"])
    out = capsys.readouterr().out
    assert code == 0, out
    with TrialBag(demo_bag) as bag:
        targets = [t for _, t in bag.decoded(["/robopin/targets"])]
    assert len(targets) >= 2 and all(t.valid for t in targets)  # pick, place, the other views' pins of their IDs
    for target in targets:
        assert f"{target.id}@{target.img_idx} at (" in out, out  # each reproduced target is named
    assert out.startswith("step 0: reproduced:") and "identical within tolerance" in out


def test_replan_with_another_backend_on_the_same_frames_shows_what_changed(demo_bag, tmp_path, capsys):
    """The oracle on a fresh scene of the recorded seed re-plans the same frames; noise shows up as a diff."""
    import yaml

    from robopin.cli import main
    from robopin.sim.tasks import build_scene

    scene = build_scene("spatial", 0, world_name="replan-oracle", robot="panda")
    try:
        backend = tmp_path / "oracle.yaml"
        config = {"type": "oracle", "world": "replan-oracle", "views": ["static", "wrist"]}
        backend.write_text(yaml.safe_dump(config))
        assert main(["bag", "replan", str(demo_bag), "--backend", str(backend), "--tolerance-m", "0.002",
                     "--tolerance-px", "0.5"]) == 0, capsys.readouterr().out
        backend.write_text(yaml.safe_dump({**config, "errors": {"point_jitter_px": 6.0}, "seed": 5}))
        assert main(["bag", "replan", str(demo_bag), "--backend", str(backend), "--tolerance-px", "0.5"]) == 1
        assert " moved " in capsys.readouterr().out
    finally:
        scene.close()


def test_replan_names_the_topic_a_bag_lacks(demo_bag, tmp_path, capsys):
    from robopin.bags.recorder import record_messages
    from robopin.cli import main

    with TrialBag(demo_bag) as bag:
        kept = [(m.topic, m.msgtype, m.data, m.stamp_ns) for m in bag.messages() if m.topic != "/tf_static"]
    record_messages(tmp_path / "no_tf_static", kept)
    assert main(["bag", "replan", str(tmp_path / "no_tf_static"), "--backend", "recorded"]) == 2
    assert "has no /tf_static" in capsys.readouterr().err


def test_a_sqlite3_copy_of_the_demo_bag_replans_the_same(demo_bag, tmp_path, capsys):
    """Bags of other recorders (``ros2 bag record``'s SQLite3 storage) are read the same way."""
    from robopin.bags.recorder import record_messages
    from robopin.cli import main

    with TrialBag(demo_bag) as bag:
        copied = [(m.topic, m.msgtype, m.data, m.stamp_ns) for m in bag.messages()]
    record_messages(tmp_path / "sqlite", copied, storage="sqlite3")
    assert list((tmp_path / "sqlite").glob("*.db3"))
    assert main(["bag", "replan", str(tmp_path / "sqlite"), "--backend", "recorded", "--tolerance-m", "1e-9",
                 "--tolerance-px", "1e-6"]) == 0, capsys.readouterr()


def test_long_horizon_xarm6_bag_replans_every_step_to_its_recorded_targets(long_horizon_bag, capsys):
    from robopin.cli import main

    code = main(["bag", "replan", str(long_horizon_bag), "--backend", "recorded", "--tolerance-m", "0.002",
                 "--tolerance-px", "0.5"])
    out = capsys.readouterr().out
    assert code == 0, out
    steps = [line for line in out.splitlines() if line.startswith("step ")]
    assert len(steps) >= 3 and all(": reproduced:" in line for line in steps), out
    with TrialBag(long_horizon_bag) as bag:
        targets = [t for _, t in bag.decoded(["/robopin/targets"])]
        static = {t.child_frame_id: t.header.frame_id for _, m in bag.decoded(["/tf_static"]) for t in m.transforms}
    assert static["base"] == "link_base" and static["wrist_optical"] == "ee"
    assert len(targets) >= 4 and all(f"{t.id}@{t.img_idx} at (" in out for t in targets if t.valid)
    assert any(t.source_view == "wrist" for t in targets), "no target was projected through a recorded arm pose"


def test_report_reads_recorder_bags_of_sessions(demo_bag, long_horizon_bag, tmp_path, capsys):
    import json
    import shutil

    from robopin.cli import main

    sessions = tmp_path / "sessions"
    for bag in (demo_bag, long_horizon_bag):
        shutil.copytree(bag, sessions / bag.name)
    assert main(["report", str(sessions), "-o", str(tmp_path / "r.html")]) == 0
    facts = json.loads((tmp_path / "r.json").read_text())
    trials = {t["trial_id"]: t for t in facts["trials"]}
    assert set(trials) == {demo_bag.name, long_horizon_bag.name}
    assert trials[long_horizon_bag.name]["steps"] >= 3 and all(t["success"] for t in trials.values())
    page = (tmp_path / "r.html").read_text()
    assert page.count("<img") >= 2 * 4 and "<pre>" in page


def test_bag_play_sends_tf_static_latched_before_tf_in_order(demo_bag, ros_context):
    """A subscriber that joins late gets /tf_static (transient local), first; /tf follows in stamp order."""
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from robopin_ros.replay_node import ReplayNode
    from tf2_msgs.msg import TFMessage

    from .rostest_utils import wait_for

    received: list[tuple[str, int]] = []
    lock = threading.Lock()
    listener = Node("tf_listener", context=ros_context)
    latched = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)

    def on(topic):
        def callback(message):
            stamp = message.transforms[0].header.stamp
            with lock:
                received.append((topic, stamp.sec * 10**9 + stamp.nanosec))
        return callback

    listener.create_subscription(TFMessage, "/tf_static", on("/tf_static"), latched)
    listener.create_subscription(TFMessage, "/tf", on("/tf"), QoSProfile(depth=500))
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(listener)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    replay = ReplayNode(context=ros_context, parameter_overrides=[
        Parameter("bag", value=str(demo_bag)), Parameter("rate", value=0.0), Parameter("topics", value=["/tf*"])])
    executor.add_node(replay)
    try:
        with TrialBag(demo_bag) as bag:
            count = bag.topics["/tf"].count
        wait_for(lambda: len(received) >= count + 1, 60.0, "the replayed /tf_static and /tf")
    finally:
        executor.shutdown()
        spinner.join(timeout=5)
        replay.destroy_node()
        listener.destroy_node()
    assert received[0][0] == "/tf_static"
    tf_stamps = [s for topic, s in received if topic == "/tf"]
    assert tf_stamps == sorted(tf_stamps) and len(tf_stamps) == count


def test_demo_bag_replans_with_the_recorded_backend_at_the_default_flags(demo_bag, capsys):
    """The defaults (1e-6 m, 1e-3 px) pass on float noise: a live bag's own text reproduces its targets."""
    import json

    from robopin.cli import main

    assert main(["bag", "replan", str(demo_bag), "--backend", "recorded"]) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert "identical within tolerance (largest differences " in out and "tolerance 1e-06 m, 0.001 px)" in out, out
    assert main(["bag", "replan", str(demo_bag), "--backend", "recorded", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    print(f"largest differences: {summary['max_target_error_m']:.3g} m, {summary['max_pixel_error']:.3g} px")
    assert summary["max_target_error_m"] < 1e-6 and summary["max_pixel_error"] < 1e-3
    assert all(step["target_errors_m"] for step in summary["steps"])  # targets were compared, not skipped


def test_replan_exit_code_2_when_it_cannot_replay(demo_bag, tmp_path, capsys):
    """0 reproduced, 1 differs, 2 cannot replay: a missing bag, a bad --backend or --reasoning file."""
    from robopin.cli import main

    assert main(["bag", "replan", str(tmp_path / "no_such_bag"), "--backend", "recorded"]) == 2
    assert "cannot replay: BagNotFoundError: bag " in capsys.readouterr().err
    assert main(["bag", "replan", str(demo_bag), "--backend", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot replay: FileNotFoundError" in capsys.readouterr().err
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("type: no_such_backend\n")
    assert main(["bag", "replan", str(demo_bag), "--backend", str(unknown)]) == 2
    assert "cannot replay: UnknownBackendError" in capsys.readouterr().err
    neither = tmp_path / "neither.yaml"
    neither.write_text("model: vlm\n")
    assert main(["bag", "replan", str(demo_bag), "--backend", str(neither)]) == 2
    assert "holds neither a VLM backend config" in capsys.readouterr().err
    reasoning = tmp_path / "reasoning.yaml"
    reasoning.write_text("mode: sideways\n")
    assert main(["bag", "replan", str(demo_bag), "--backend", "recorded", "--reasoning", str(reasoning)]) == 2
    assert "cannot replay: ReasoningConfigError: mode must be one of" in capsys.readouterr().err


def _closed_port() -> int:
    import socket

    with socket.socket() as probe:  # bound, then closed: nothing listens there
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_models_show_vlm_config_is_a_replan_backend(demo_bag, tmp_path):
    """`robopin models show NAME --vlm-config > FILE` then `bag replan BAG --backend FILE`, both real commands.

    The file is read (its vlm block builds the openai backend, its reasoning block the model's prompt form);
    no server listens at the URL, so the model is unreachable: exit 2, naming why.
    """
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    shown = _robopin("models", "show", "robopin-4b", "--vlm-config", "--base-url", url, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    backend = tmp_path / "robopin-4b.yaml"
    backend.write_text(shown.stdout)
    result = _robopin("bag", "replan", str(demo_bag), "--backend", str(backend), cwd=tmp_path, timeout_s=300)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "needs a 'type' key" not in result.stderr
    assert "robopin bag replan: cannot replay: ReplayModelError: step 0: the model gave no answer: vlm_unavailable: " \
           f"cannot reach the VLM server at {url}/chat/completions" in result.stderr, result.stderr


def test_models_show_vlm_config_builds_the_models_backend_and_reasoning(tmp_path):
    import yaml

    from robopin.cli.bag import _replan_backend, _replan_reasoning

    shown = _robopin("models", "show", "robopin-4b", "--vlm-config", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    path = tmp_path / "robopin-4b.yaml"
    path.write_text(shown.stdout)
    block = yaml.safe_load(shown.stdout)
    backend, settings = _replan_backend(str(path))
    assert type(backend).__name__ == "OpenAIBackend" and backend.config.model == block["vlm"]["model"]
    assert backend.config.base_url == block["vlm"]["base_url"]
    config = _replan_reasoning(settings, "")
    assert (config.prompt_template, config.answer_format) == (block["reasoning"]["prompt_template"],
                                                             block["reasoning"]["answer_format"])
    assert (config.mode, config.max_steps) == ("point", 1)


def test_bag_play_at_rate_0_exits_at_the_end_of_the_bag(demo_bag, tmp_path):
    """`robopin bag play BAG --rate 0` (as fast as possible) goes through every message and exits 0."""
    import time

    with TrialBag(demo_bag) as bag:
        playable = sum(t.count for t in bag.topics.values())  # counted as sent (foxglove types skipped, named)
    start = time.monotonic()
    result = _robopin("bag", "play", str(demo_bag), "--rate", "0", cwd=tmp_path, timeout_s=120)
    took = time.monotonic() - start
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"replayed {playable} messages" in result.stderr and "end of the bag: stopping" in result.stderr, \
        result.stderr[-3000:]
    print(f"bag play --rate 0: {playable} messages, exited after {took:.1f} s")


def test_a_folder_of_bags_replans_bag_by_bag_in_one_process_and_on_ray_workers_alike(demo_bag, long_horizon_bag,
                                                                                      tmp_path):
    """``bag replan <folder>`` replays every bag under it (a trial batch's folder), one line each, the worst exit
    code of them; ``--workers 2`` does the same on a local Ray. A bag the recorder never closed is named, not
    skipped."""
    import shutil

    folder = tmp_path / "batch"
    shutil.copytree(demo_bag, folder / "spatial" / demo_bag.name)
    shutil.copytree(long_horizon_bag, folder / "long_horizon" / long_horizon_bag.name)
    unclosed = folder / "killed" / "task-unclosed"
    shutil.copytree(demo_bag, unclosed)
    (unclosed / "metadata.yaml").unlink()  # what a recorder killed mid-task leaves: chunks, no metadata
    command = [sys.executable, "-m", "robopin.cli", "bag", "replan", str(folder), "--backend", "recorded",
               "--tolerance-m", "0.002", "--tolerance-px", "0.5"]
    lines = {}
    for extra in ((), ("--workers", "2")):
        result = subprocess.run([*command, *extra], cwd=tmp_path, env=dict(os.environ), capture_output=True,
                                text=True, timeout=600)
        log = result.stdout[-3000:] + result.stderr[-3000:]
        assert result.returncode == 2, log  # one cannot replay: the worst code
        found = sorted(line.split("] ", 1)[1] for line in result.stdout.splitlines() if line.startswith("["))
        assert len(found) == 3, log
        assert found[0].startswith("killed/task-unclosed: cannot replay:") and "bag recover" in found[0], found
        assert found[1].startswith(f"long_horizon/{long_horizon_bag.name}: reproduced, "), found
        assert found[2].startswith(f"spatial/{demo_bag.name}: reproduced, 1 step(s)"), found
        assert "2/3 reproduced, 0 differ, 1 cannot replay" in result.stdout, log
        lines[extra] = found
    assert lines[()] == lines[("--workers", "2")]
