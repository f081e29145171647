"""Multi-view snapshot: newest synchronised set, and its refusals (stale_frame, views_out_of_sync, stale_arm_pose)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from robopin.cameras import Frame
from robopin.cameras.snapshot import SnapshotConfig, SnapshotError, SnapshotSynchronizer
from robopin.cameras.synthetic import SyntheticScene
from robopin.geometry import PoseBuffer
from robopin.geometry.camera_model import CameraModel

MODEL = CameraModel(8, 6, 10.0, 10.0, 3.5, 2.5)
T0 = 1000.0


def frame(view: str, t: float, index: int = 0) -> Frame:
    return Frame(SyntheticScene().color(MODEL, index), None, MODEL, t, "S", index, view)


def sync(**kwargs) -> SnapshotSynchronizer:
    return SnapshotSynchronizer(SnapshotConfig(views=("static", "wrist"), **kwargs))


def test_picks_the_newest_pair_within_tolerance():
    s = sync(sync_tolerance_s=0.01)
    for i in range(5):
        s.add("static", frame("static", T0 + i / 30, i))
        s.add("wrist", frame("wrist", T0 + i / 30 + 0.004, i))
    snap = s.snapshot(now_s=T0 + 0.2)
    assert [f.index for f in snap.ordered_frames()] == [4, 4]
    assert snap.spread_s == pytest.approx(0.004)
    assert snap.views == ("static", "wrist")


def test_falls_back_to_an_older_pair_when_the_newest_do_not_match():
    s = sync(sync_tolerance_s=0.01)
    s.add("static", frame("static", T0, 0))
    s.add("wrist", frame("wrist", T0 + 0.003, 0))
    s.add("static", frame("static", T0 + 0.1, 1))  # wrist's next frame has not arrived yet
    snap = s.snapshot(now_s=T0 + 0.15)
    assert [f.index for f in snap.ordered_frames()] == [0, 0]


def test_refuses_views_out_of_sync_naming_the_spread():
    s = sync(sync_tolerance_s=0.01)
    s.add("static", frame("static", T0))
    s.add("wrist", frame("wrist", T0 + 0.025))
    with pytest.raises(SnapshotError, match="25 ms") as info:
        s.snapshot(now_s=T0 + 0.05)
    assert info.value.reason == "views_out_of_sync"


def test_refuses_stale_frame_naming_the_view():
    s = sync(max_age_s=0.2)
    s.add("static", frame("static", T0))
    s.add("wrist", frame("wrist", T0 - 0.5))
    with pytest.raises(SnapshotError) as info:
        s.snapshot(now_s=T0 + 0.01)
    assert info.value.reason == "stale_frame" and info.value.views == ("wrist",)


def test_frames_age_on_the_clock_it_is_given():
    """A simulated system's frames and nodes run on the simulator's clock, which stands still between motions
    (robopin_ros.bringup.SimClockPublisher): a still cell's frames are its scene now however long a loaded machine's
    model call took; after 12 s of simulated motion they are stale (the shipped sim systems' max_frame_age_s 10 s)."""
    now = [40.0]
    s = SnapshotSynchronizer(SnapshotConfig(views=("static", "wrist"), max_age_s=10.0, sync_tolerance_s=1.5),
                             clock=lambda: now[0])
    s.add("static", frame("static", 40.0))
    s.add("wrist", frame("wrist", 40.0))
    assert s.snapshot().age_s == 0.0
    now[0] = 52.0
    with pytest.raises(SnapshotError, match=r"static 12\.000 s, wrist 12\.000 s old") as info:
        s.snapshot()
    assert info.value.reason == "stale_frame"


def test_refuses_when_a_view_has_no_frame():
    s = sync()
    s.add("static", frame("static", T0))
    with pytest.raises(SnapshotError, match="wrist") as info:
        s.snapshot(now_s=T0)
    assert info.value.reason == "stale_frame"


def test_only_fresh_frames_form_a_set():
    s = sync(sync_tolerance_s=0.01, max_age_s=0.3)
    s.add("static", frame("static", T0))
    s.add("wrist", frame("wrist", T0 + 0.002))
    s.add("static", frame("static", T0 + 0.4))  # fresh, but wrist has nothing near it
    s.add("wrist", frame("wrist", T0 + 0.35))
    with pytest.raises(SnapshotError) as info:
        s.snapshot(now_s=T0 + 0.45)
    # The pair at T0 matched but is too old; the fresh frames are 50 ms apart: out of sync now.
    assert info.value.reason == "views_out_of_sync"


def test_arm_pose_is_interpolated_at_each_frame_time():
    poses = PoseBuffer()
    for k in range(3):
        T = np.eye(4)
        T[0, 3] = 0.05 * k
        poses.add(T0 + 0.05 * k, T)
    s = SnapshotSynchronizer(SnapshotConfig(views=("static", "wrist")), poses=poses)
    s.add("static", frame("static", T0 + 0.05))
    s.add("wrist", frame("wrist", T0 + 0.06))
    snap = s.snapshot(now_s=T0 + 0.1)
    assert snap.T_base_ee["static"][0, 3] == pytest.approx(0.05)
    assert snap.T_base_ee["wrist"][0, 3] == pytest.approx(0.06)


def test_refuses_when_the_arm_pose_at_frame_time_is_unknown():
    poses = PoseBuffer()
    poses.add(T0 - 1.0, np.eye(4))
    s = SnapshotSynchronizer(SnapshotConfig(views=("static", "wrist"), arm_pose_tolerance_s=0.05), poses=poses)
    s.add("static", frame("static", T0))
    s.add("wrist", frame("wrist", T0))
    with pytest.raises(SnapshotError) as info:
        s.snapshot(now_s=T0)
    assert info.value.reason == "stale_arm_pose"


def test_out_of_order_arrivals_are_kept_sorted():
    s = sync(sync_tolerance_s=0.005)
    s.add("static", frame("static", T0 + 0.1, 2))
    s.add("static", frame("static", T0, 1))
    s.add("wrist", frame("wrist", T0 + 0.001, 1))
    assert s.latest("static").index == 2
    assert s.snapshot(now_s=T0 + 0.2).frames["static"].index == 1


def test_unknown_view_is_refused():
    with pytest.raises(KeyError, match="front"):
        sync().add("front", frame("front", T0))


def test_concurrent_producers_and_consumer():
    s = sync(sync_tolerance_s=0.02, history=10)

    def produce(view: str) -> None:
        for i in range(200):
            s.add(view, frame(view, T0 + i * 0.01, i))

    threads = [threading.Thread(target=produce, args=(v,)) for v in ("static", "wrist")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    snap = s.snapshot(now_s=T0 + 2.0)
    assert snap.frames["static"].index == snap.frames["wrist"].index == 199
