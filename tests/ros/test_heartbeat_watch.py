"""The deadman's judgement of a peer's silence (robopin_ros.actions.HeartbeatWatch), on a real node.

Heartbeats are fed to the watch's own callbacks and the monotonic clock is stepped by hand: what is judged is
how silence is counted, not DDS. The whole deadman over DDS (a killed client's task canceled, the arm stopped)
is tests/integration/test_stop_means_stop.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
from robopin_interfaces.msg import TaskHeartbeat
from unique_identifier_msgs.msg import UUID

pytestmark = pytest.mark.ros

GOAL = bytes(range(16))


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def watch(ros_context, monkeypatch):
    import rclpy
    from robopin_ros import actions

    clock = _Clock()
    monkeypatch.setattr(actions.time, "monotonic", clock)
    node = rclpy.create_node("heartbeat_watch_test", context=ros_context)
    try:
        yield actions.HeartbeatWatch(node, "client_beat", reference="own_beat"), clock
    finally:
        node.destroy_node()


def _beat(pid: int | None = None, pid_space: str | None = None) -> TaskHeartbeat:
    from robopin_ros.actions import pid_space as own_space

    return TaskHeartbeat(goal_id=UUID(uuid=list(GOAL)), pid=os.getpid() if pid is None else pid,
                         pid_space=own_space() if pid_space is None else pid_space)


def test_a_silent_peer_is_counted_to_now_while_the_own_heartbeat_comes_through(watch):
    heartbeats, clock = watch
    heartbeats._on_heartbeat(_beat())
    for _ in range(6):  # the peer stops; this side keeps hearing itself every 0.1 s
        clock.now += 0.1
        heartbeats._on_reference(_beat())
    assert heartbeats.silent_for(GOAL) == pytest.approx(0.6)


def test_silence_is_not_counted_while_this_side_hears_nothing_at_all(watch):
    heartbeats, clock = watch
    heartbeats._on_reference(_beat())
    clock.now += 0.05
    heartbeats._on_heartbeat(_beat())
    clock.now += 0.05
    heartbeats._on_reference(_beat())  # the last thing heard: 0.05 s after the peer's last beat
    clock.now += 3.0  # a starved executor: neither the peer's nor this side's own beats come through
    assert heartbeats.silent_for(GOAL) == pytest.approx(0.05)
    heartbeats._on_reference(_beat())  # heard again, and still nothing from the peer: it is silent since
    assert heartbeats.silent_for(GOAL) == pytest.approx(3.05)


def test_without_a_reference_heard_silence_is_counted_to_now(watch):
    heartbeats, clock = watch
    assert heartbeats.silent_for(GOAL) is None
    heartbeats._on_heartbeat(_beat())
    clock.now += 0.7
    assert heartbeats.silent_for(GOAL) == pytest.approx(0.7)


def _settles(check, expected: bool) -> bool | None:
    """``check()`` once it gives ``expected`` (/proc shows a signal's effect a moment later), within 10 s; the
    monotonic clock is the fixture's, so the wait counts sleeps."""
    for _ in range(1000):
        if check() is expected:
            break
        time.sleep(0.01)
    return check()


def test_the_sender_runs_while_its_process_lives_and_not_once_it_is_gone_or_suspended(watch):
    heartbeats, _ = watch
    runs = lambda: heartbeats.sender_runs(GOAL)  # noqa: E731
    assert runs() is None  # nothing heard: nothing to look at
    heartbeats._on_heartbeat(_beat())
    assert runs() is True  # this process: alive
    client = subprocess.Popen(["sleep", "60"])
    try:
        heartbeats._on_heartbeat(_beat(pid=client.pid))
        assert runs() is True  # a living process (sleeping: as a starved one looks)
        client.send_signal(signal.SIGSTOP)  # Ctrl-Z: it lives, but nobody follows the task
        assert _settles(runs, False) is False
        client.send_signal(signal.SIGCONT)
        assert _settles(runs, True) is True
        client.kill()
        assert _settles(runs, False) is False  # killed and not yet reaped: a zombie is gone
    finally:
        client.kill()
        client.wait()
    assert runs() is False  # reaped: no such process


def test_a_sender_of_another_pid_space_cannot_be_looked_at(watch):
    heartbeats, _ = watch
    heartbeats._on_heartbeat(_beat(pid_space="another-boot/4026531836"))
    assert heartbeats.sender_runs(GOAL) is None
    heartbeats._on_heartbeat(_beat(pid_space=""))  # a sender that could not tell
    assert heartbeats.sender_runs(GOAL) is None
