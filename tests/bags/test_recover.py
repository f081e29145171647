"""``robopin bag recover``: a bag whose writer stopped without closing is rebuilt from its complete chunks.

The bags here are written by the recorder's own writer (:class:`robopin.bags.BagWriter`), and the
"crash" is the file as it lies on disk while the writer is still open: exactly what a SIGKILL leaves
(tests/ros/test_bags_crash_recovery.py kills a real ``robopin up``).
"""

from __future__ import annotations

import shutil
import time

import numpy as np
import pytest

from robopin.bags import BagNotFoundError, BagWriter, TrialBag, TrialRecorder
from robopin.bags.recorder import RecorderError
from robopin.bags.recover import BagRecoveryError, recover_bag, scan_mcap
from robopin.bags.typestore import robopin_typestore


def _joint_state(k: int) -> bytes:
    typestore = robopin_typestore()
    types = typestore.types
    message = types["sensor_msgs/msg/JointState"](
        header=types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](sec=k, nanosec=0), frame_id=""),
        name=["j1"], position=np.array([0.1 * k]), velocity=np.zeros(0), effort=np.zeros(0))
    return bytes(typestore.serialize_cdr(message, "sensor_msgs/msg/JointState"))


def _snapshot_while_open(tmp_path, *, flush_interval_s: float, count: int):
    """Write ``count`` messages, wait for one flush, copy the open bag as a kill would leave it."""
    writer = BagWriter(tmp_path / "live", flush_interval_s=flush_interval_s)
    try:
        for k in range(count):
            assert writer.write("/joint_states", "sensor_msgs/msg/JointState", _joint_state(k), 10**9 * (k + 1))
        mcap = tmp_path / "live" / "live.mcap"
        size = mcap.stat().st_size
        deadline = time.monotonic() + 30
        while mcap.stat().st_size == size:  # the writer thread closes its chunk within flush_interval_s
            assert time.monotonic() < deadline, "the writer never flushed its chunk"
            time.sleep(0.01)
        time.sleep(0.05)
        shutil.copytree(tmp_path / "live", tmp_path / "killed")
    finally:
        writer.close()
    return tmp_path / "killed"


def test_an_unclosed_bag_is_refused_by_name_then_recovered_with_every_flushed_message(tmp_path):
    killed = _snapshot_while_open(tmp_path, flush_interval_s=0.2, count=50)
    assert not (killed / "metadata.yaml").exists()
    with pytest.raises(BagNotFoundError, match="bag recover"):
        TrialBag(killed)
    report = recover_bag(killed)
    assert not report.was_complete and report.messages == 50 and report.topics == {"/joint_states": 50}
    assert report.damaged_path == tmp_path / "killed.damaged" and report.damaged_path.is_dir()
    with TrialBag(killed) as bag:
        positions = [m.position[0] for _, m in bag.decoded()]
        _, definition = bag.message_definition("/joint_states")
    assert positions == pytest.approx([0.1 * k for k in range(50)])
    assert "float64[] position" in definition
    assert recover_bag(killed).was_complete  # a second run finds nothing to do


def test_a_file_cut_inside_a_record_recovers_up_to_the_last_complete_chunk(tmp_path):
    killed = _snapshot_while_open(tmp_path, flush_interval_s=0.2, count=20)
    mcap = killed / "killed.mcap" if (killed / "killed.mcap").exists() else next(killed.glob("*.mcap"))
    complete = scan_mcap(mcap)
    with mcap.open("ab") as stream:  # a chunk record whose body never reached the disk
        stream.write(b"\x06" + (10**6).to_bytes(8, "little") + b"\x00" * 100)
    cut = scan_mcap(mcap)
    assert not cut.complete and cut.truncated_at is not None
    assert len(cut.messages) == len(complete.messages) == 20
    assert recover_bag(killed).messages == 20


def test_recover_names_what_it_cannot_use(tmp_path):
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "text.mcap").write_bytes(b"not an mcap file")
    with pytest.raises(BagRecoveryError, match="not an MCAP file"):
        recover_bag(tmp_path / "text")
    with pytest.raises(BagRecoveryError, match="does not exist"):
        recover_bag(tmp_path / "nothing")
    with pytest.raises(RecorderError, match="flush_interval_s"):
        BagWriter(tmp_path / "bad", flush_interval_s=0)


def test_every_bag_starts_with_the_latched_topics_and_the_state_before_the_task(tmp_path):
    """/tf_static, /robot_description and recorded parameters first; the newest camera frame however old."""
    from robopin.bags.recorder import TF_STATIC_TOPIC

    typestore = robopin_typestore()
    types = typestore.types
    text = bytes(typestore.serialize_cdr(types["std_msgs/msg/String"](data="<robot name='r'/>"), "std_msgs/msg/String"))
    edge = types["geometry_msgs/msg/TransformStamped"](
        header=types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](sec=0, nanosec=0),
                                            frame_id="base"), child_frame_id="static_optical",
        transform=types["geometry_msgs/msg/Transform"](translation=types["geometry_msgs/msg/Vector3"](x=0, y=0, z=1),
                                                       rotation=types["geometry_msgs/msg/Quaternion"](x=0, y=0, z=0,
                                                                                                      w=1)))
    tf = bytes(typestore.serialize_cdr(types["tf2_msgs/msg/TFMessage"](transforms=[edge]), "tf2_msgs/msg/TFMessage"))
    recorder = TrialRecorder(tmp_path, preroll_s=1.0, state_preroll_s=3.0)
    s = 10**9
    recorder.record("/robot_description", "std_msgs/msg/String", text, 1 * s)
    recorder.record("/robopin/parameters/projection_node", "std_msgs/msg/String", text, 2 * s)
    recorder.record(TF_STATIC_TOPIC, "tf2_msgs/msg/TFMessage", tf, 2 * s)
    recorder.record("/cameras/static/color/camera_info", "sensor_msgs/msg/CameraInfo", _camera_info(typestore), 10 * s)
    recorder.record("/joint_states", "sensor_msgs/msg/JointState", _joint_state(1), 18 * s)
    recorder.record("/robopin/reasoning/markers", "visualization_msgs/msg/MarkerArray", _markers(typestore), 18 * s)
    recorder.record("/joint_states", "sensor_msgs/msg/JointState", _joint_state(2), int(19.5 * s))
    for task in ("task-a", "task-b"):
        recorder.start(task, stamp_ns=20 * s)
        recorder.stop()
    with TrialBag(tmp_path / "task-a") as bag:
        topics = [m.topic for m in bag.messages()]
    # latched first; the camera info 10 s old (newest of a state topic); joint states of the last 3 s;
    # a non-state message older than preroll_s stays out.
    assert topics[:3] == [TF_STATIC_TOPIC, "/robot_description", "/robopin/parameters/projection_node"]
    assert sorted(topics[3:]) == ["/cameras/static/color/camera_info", "/joint_states", "/joint_states"]
    with TrialBag(tmp_path / "task-b") as bag:  # latched topics are in every bag
        assert [m.topic for m in bag.messages()] == topics[:3]


def _camera_info(typestore) -> bytes:
    types = typestore.types
    info = types["sensor_msgs/msg/CameraInfo"](
        header=types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](sec=0, nanosec=0), frame_id="c"),
        height=2, width=2, distortion_model="plumb_bob", d=np.zeros(5), k=np.eye(3).ravel(), r=np.eye(3).ravel(),
        p=np.zeros(12), binning_x=0, binning_y=0,
        roi=types["sensor_msgs/msg/RegionOfInterest"](x_offset=0, y_offset=0, height=0, width=0, do_rectify=False))
    return bytes(typestore.serialize_cdr(info, "sensor_msgs/msg/CameraInfo"))


def _markers(typestore) -> bytes:
    return bytes(typestore.serialize_cdr(typestore.types["visualization_msgs/msg/MarkerArray"](markers=[]),
                                         "visualization_msgs/msg/MarkerArray"))
