"""Bags: types match the ROS build, a sim trial reads back intact, replay keeps the schedule.

Planner replay is tested on bags the live recorder node wrote from a running stack
(tests/ros/test_bags_live_stack.py), never on a bag written through the replay's own stages.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from robopin.bags import ReplayError, ReplayOptions, StaticTransform, TrialBag, TrialRecorder, frames, replay
from robopin.bags.recorder import RecorderError, record_messages
from robopin.bags.typestore import connection_definition, interface_directory, message_definition, robopin_typestore


def test_registered_type_hashes_equal_the_ros_build():
    typestore = robopin_typestore()
    checked = 0
    for path in sorted(interface_directory().glob("*/*.json")):
        for entry in json.loads(path.read_text())["type_hashes"]:
            name = entry["type_name"]
            # the JSON also lists the action/service wrappers, which never travel on a topic
            if name.startswith("robopin_interfaces/") and name in typestore.fielddefs:
                assert typestore.hash_rihs01(name) == entry["hash_string"], name
                checked += 1
    if checked == 0:
        pytest.skip("robopin_interfaces is not built into this environment (no type description JSON)")


@pytest.mark.parametrize("type_name", ["sensor_msgs/msg/JointState", "robopin_interfaces/msg/PinnedReasoning",
                                       "robopin_interfaces/action/ExecuteTask_FeedbackMessage"])
def test_a_connection_definition_is_what_the_writer_would_generate_and_is_made_once(type_name):
    typestore = robopin_typestore()
    text, digest = connection_definition(typestore, type_name)
    # rosbags' Writer.add_connection generates pkg/msg types itself; action parts carry ours.
    expected = (typestore.generate_msgdef(type_name, ros_version=2)[0] if "/msg/" in type_name
                else message_definition(typestore, type_name))
    assert (text, digest) == (expected, typestore.hash_rihs01(type_name))
    assert connection_definition(typestore, type_name)[0] is text


def _joint_state(typestore, k):
    types = typestore.types
    return types["sensor_msgs/msg/JointState"](
        header=types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](sec=k, nanosec=0), frame_id=""),
        name=["j1"], position=np.array([0.1 * k]), velocity=np.zeros(0), effort=np.zeros(0))


def test_recorder_writes_one_bag_per_task_with_static_transforms_first(tmp_path):
    T = np.eye(4)
    T[:3, 3] = [0.5, 0.0, 0.8]
    recorder = TrialRecorder(tmp_path, static_transforms=[StaticTransform("base", "static_optical", T)])
    ts = recorder.typestore

    def payload(k):
        return bytes(ts.serialize_cdr(_joint_state(ts, k), "sensor_msgs/msg/JointState"))

    # no task yet: kept as pre-roll (1 s) and written at the start of the next bag only
    assert not recorder.record("/joint_states", "sensor_msgs/msg/JointState", payload(5), 1)
    for task in ("task-a", "task-b"):
        recorder.start(task, stamp_ns=10)
        with pytest.raises(RecorderError, match="already recording"):
            recorder.start("task-c")
        for k in range(3):
            assert recorder.record("/joint_states", "sensor_msgs/msg/JointState", payload(k), 20 + k)
        recorder.stop()
    with pytest.raises(RecorderError, match="names a folder"):
        recorder.start("../escape")
    for task, preroll in (("task-a", [0.5]), ("task-b", [])):
        with TrialBag(tmp_path / task) as bag:
            messages = list(bag.messages())
            assert messages[0].topic == "/tf_static"
            (transform,) = bag.decode(messages[0]).transforms
            assert (transform.header.frame_id, transform.child_frame_id) == ("base", "static_optical")
            assert transform.transform.translation.z == pytest.approx(0.8)
            positions = [bag.decode(m).position[0] for m in messages[1:]]
            assert positions == pytest.approx([*preroll, 0.0, 0.1, 0.2])


def test_sim_trial_bag_holds_every_topic_with_its_messages_intact(sim_trial):
    scene, _, _, folder = sim_trial
    with TrialBag(folder / "bag") as bag:
        topics = bag.topics
        for view in scene.camera_names:
            for suffix in ("color/image_raw", "color/camera_info", "aligned_depth_to_color/image_raw"):
                assert topics[f"/cameras/{view}/{suffix}"].count == 3
            assert topics[f"/cameras/{view}/color/pinned_annotations"].count == 1
        # One step's targets: pick and place, then the other views' pins of their IDs (the cross-view check).
        assert topics["/robopin/reasoning"].count == 1 and topics["/robopin/targets"].count >= 2
        assert topics["/tf_static"].count == 1
        color = next(bag.decoded(["/cameras/static/color/image_raw"]))[1]
        rendered = scene.world.render("static").color
        stored = np.frombuffer(color.data, np.uint8).reshape(color.height, color.width, 3)
        np.testing.assert_array_equal(stored, rendered)  # the static camera sees a still scene
        reasoning = next(bag.decoded(["/robopin/reasoning"]))[1]
        assert reasoning.valid and reasoning.view_names == list(scene.camera_names)
        # definitions are embedded, so a reader without robopin's types can decode the bag too
        _, definition = bag.message_definition("/robopin/reasoning")
        assert "Anchor[] anchors" in definition and "MSG: robopin_interfaces/Anchor" in definition


class FakeClock:
    """A clock that sleeping advances, so the schedule is checked exactly (no wall-clock timing)."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def _timed_bag(path, typestore, stamps_ns):
    data = bytes(typestore.serialize_cdr(_joint_state(typestore, 0), "sensor_msgs/msg/JointState"))
    messages = [("/joint_states", "sensor_msgs/msg/JointState", data, s) for s in stamps_ns]
    messages.insert(0, ("/other", "sensor_msgs/msg/JointState", data, stamps_ns[0]))
    record_messages(path, messages, typestore=typestore)
    return path


def test_replay_schedule_follows_rate_offset_filters_and_loops(tmp_path):
    typestore = robopin_typestore()
    stamps = [10**9 + k * 100_000_000 for k in range(6)]  # 10 Hz for 0.5 s
    path = _timed_bag(tmp_path / "timed", typestore, stamps)
    with TrialBag(path) as bag:
        clock = FakeClock()
        sent = []
        options = ReplayOptions(rate=2.0, start_offset_s=0.2, topics=("/joint_*",))
        stats = replay(bag, lambda m: sent.append((clock(), m.stamp_ns)), options, clock=clock, sleep=clock.sleep)
        assert [s for _, s in sent] == stamps[2:]
        times = np.array([t for t, _ in sent])
        np.testing.assert_allclose(np.diff(times), 0.05, atol=1e-9)  # 100 ms recorded / rate 2
        assert stats.published == {"/joint_states": 4}
        assert max(stats.lateness_s) < 1e-9
        looped = replay(bag, lambda m: None, ReplayOptions(loop=True, max_loops=3, rate=math.inf))
        assert looped.loops == 3 and looped.total == 3 * 7
        with pytest.raises(ReplayError, match="match none"):
            replay(bag, lambda m: None, ReplayOptions(topics=("/nothing",)))
        with pytest.raises(ReplayError, match="past the end"):
            replay(bag, lambda m: None, ReplayOptions(start_offset_s=5.0))
        steps = list(frames(bag, "/joint_states"))
        assert len(steps) == 6 and [m.topic for m in steps[0][1]] == ["/other"]


def test_replay_on_the_wall_clock_measures_its_timing_error(tmp_path):
    typestore = robopin_typestore()
    stamps = [k * 20_000_000 for k in range(1, 11)]  # 50 Hz for 0.2 s
    with TrialBag(_timed_bag(tmp_path / "wall", typestore, stamps)) as bag:
        stats = replay(bag, lambda m: None, ReplayOptions(exclude=("/other",)))
    summary = stats.lateness_summary_ms()
    assert stats.total == 10 and len(stats.lateness_s) == 10
    assert all(v >= 0 for v in stats.lateness_s)  # never early
    print(f"replay lateness p50 {summary['p50']:.3f} ms, p95 {summary['p95']:.3f} ms, max {summary['max']:.3f} ms")
