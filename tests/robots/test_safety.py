"""The safety checker refuses every unsafe trajectory with its named reason; the watchdog trips on silence."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from robopin.robots.description import load_description
from robopin.robots.errors import ArmConfigError, Reason, SafetyViolationError
from robopin.robots.safety import SafetyChecker, SafetyConfig, Watchdog
from robopin.robots.state import JointState
from robopin.robots.trajectory import JointTrajectory, min_jerk_move

PANDA = load_description("panda")


def checker(**overrides) -> SafetyChecker:
    return SafetyChecker(SafetyConfig(**overrides), PANDA)


def state_at(q: np.ndarray, age_s: float = 0.0) -> JointState:
    return JointState(PANDA.joint_names, q, np.zeros(PANDA.dof), None, time.monotonic() - age_s)


def move(goal: np.ndarray, start: np.ndarray | None = None, **limits) -> JointTrajectory:
    start = PANDA.home_rad if start is None else start
    return min_jerk_move(
        PANDA.joint_names,
        start,
        goal,
        limits.get("vmax", PANDA.velocity_rad_s * 0.5),
        limits.get("amax", PANDA.acceleration_rad_s2 * 0.5),
    )


def refusal(check: SafetyChecker, trajectory: JointTrajectory, state: JointState | None = None) -> Reason:
    with pytest.raises(SafetyViolationError) as caught:
        check.validate(trajectory, state or state_at(PANDA.home_rad))
    return caught.value.reason


def test_a_planned_move_inside_all_limits_passes_unchanged():
    trajectory = move(PANDA.home_rad + np.array([0.3, 0.1, 0.0, 0.2, 0.0, 0.1, 0.0]))
    validated = checker().validate(trajectory, state_at(PANDA.home_rad))
    np.testing.assert_allclose(validated.positions, trajectory.positions)
    assert validated.duration_s == pytest.approx(trajectory.duration_s)


def test_speed_scaling_slows_the_trajectory():
    trajectory = move(PANDA.home_rad + 0.2)
    validated = checker(speed_scale=0.25).validate(trajectory, state_at(PANDA.home_rad))
    assert validated.duration_s == pytest.approx(4 * trajectory.duration_s)


def test_tcp_leaving_the_workspace_box_is_refused_along_the_path():
    # Joint 1 swings from -1.2 to +1.2 rad: both ends lie inside a box with x <= 0.2 m, but the
    # middle of the swing reaches x = 0.31 m in front of the base.
    start, goal = PANDA.home_rad.copy(), PANDA.home_rad.copy()
    start[0], goal[0] = -1.2, 1.2
    trajectory = move(goal, start=start)
    box = checker(workspace_max_m=(0.2, 0.9, 1.2))
    for q in (start, goal):
        assert box.config.contains(PANDA.forward_kinematics(q)[:3, 3])
    middle, _ = trajectory.sample(trajectory.duration_s / 2)
    assert not box.config.contains(PANDA.forward_kinematics(middle)[:3, 3])
    with pytest.raises(SafetyViolationError) as caught:
        box.validate(trajectory, state_at(start))
    assert caught.value.reason is Reason.WORKSPACE
    assert 0 < caught.value.waypoint < trajectory.num_waypoints - 1


def test_joint_limit_violation_is_refused():
    goal = PANDA.home_rad.copy()
    goal[3] = PANDA.upper_rad[3] + 0.05
    assert refusal(checker(max_joint_jump_rad=3.0), move(goal)) is Reason.JOINT_LIMIT


def test_velocity_limit_violation_is_refused():
    goal = PANDA.home_rad + np.array([0.4, 0, 0, 0, 0, 0, 0])
    fast = move(goal, vmax=PANDA.velocity_rad_s * 3.0, amax=PANDA.acceleration_rad_s2 * 50)
    assert refusal(checker(), fast) is Reason.VELOCITY_LIMIT


def test_acceleration_limit_violation_is_refused():
    # Linear waypoints: 0 → 1 rad/s within 0.01 s is 100 rad/s².
    times = [0.0, 0.01, 0.41]
    q0 = PANDA.home_rad
    positions = [q0, q0 + np.r_[0.01, np.zeros(6)], q0 + np.r_[0.41, np.zeros(6)]]
    trajectory = JointTrajectory(PANDA.joint_names, times, positions)
    assert refusal(checker(), trajectory) is Reason.ACCELERATION_LIMIT


def test_jump_between_waypoints_is_refused():
    goal = PANDA.home_rad + np.r_[0.6, np.zeros(6)]
    sparse = JointTrajectory(PANDA.joint_names, [0.0, 5.0], [PANDA.home_rad, goal])
    assert refusal(checker(max_joint_jump_rad=0.5), sparse) is Reason.JUMP


def test_first_waypoint_far_from_the_measured_state_is_refused():
    trajectory = move(PANDA.home_rad + 0.1, start=PANDA.home_rad + 0.2)
    assert refusal(checker(), trajectory) is Reason.START_MISMATCH


def test_trajectory_starting_later_begins_at_the_measured_state():
    goal = PANDA.home_rad + 0.05
    trajectory = JointTrajectory(PANDA.joint_names, [1.0], [goal])
    validated = checker().validate(trajectory, state_at(PANDA.home_rad))
    np.testing.assert_allclose(validated.positions[0], PANDA.home_rad)


def test_stale_state_is_refused():
    trajectory = move(PANDA.home_rad + 0.1)
    assert refusal(checker(state_max_age_s=0.1), trajectory, state_at(PANDA.home_rad, age_s=0.5)) is (
        Reason.STALE_STATE
    )


def test_wrong_joint_names_are_refused():
    trajectory = JointTrajectory(tuple(f"j{i}" for i in range(7)), [0.0], [PANDA.home_rad])
    assert refusal(checker(), trajectory) is Reason.JOINT_NAMES


def test_duration_and_tcp_speed_limits():
    slow = move(PANDA.home_rad + 0.1).scaled(0.01)
    assert refusal(checker(max_duration_s=10.0), slow) is Reason.DURATION
    fast = move(PANDA.home_rad + np.r_[0.6, 0.3, 0, 0, 0, 0, 0])
    assert refusal(checker(max_tcp_speed_m_s=0.05), fast) is Reason.TCP_SPEED


def test_config_validation_names_the_bad_value():
    with pytest.raises(ArmConfigError, match="speed_scale"):
        SafetyConfig(speed_scale=1.5)
    with pytest.raises(ArmConfigError, match="workspace_min_m"):
        SafetyConfig(workspace_min_m=(0.0, 0.0, 2.0))
    with pytest.raises(ArmConfigError, match="collision_sensitivity"):
        SafetyConfig(collision_sensitivity=9)


@pytest.mark.parametrize(("feed_state", "expected"), [(False, Reason.STALE_STATE), (True, Reason.STALE_COMMAND)])
def test_watchdog_trips_on_stale_state_and_on_stale_commands(feed_state, expected):
    tripped = threading.Event()
    reasons: list[Reason] = []

    def on_trip(reason: Reason, _message: str) -> None:
        reasons.append(reason)
        tripped.set()

    watchdog = Watchdog(state_max_age_s=0.05, command_timeout_s=0.1, on_trip=on_trip)
    watchdog.start(time.monotonic())
    deadline = time.monotonic() + 5.0
    while not tripped.is_set() and time.monotonic() < deadline:
        if feed_state:
            watchdog.feed_state(time.monotonic())
        time.sleep(0.005)
    watchdog.stop()
    assert reasons == [expected]


def test_watchdog_stays_quiet_while_fed():
    reasons: list[Reason] = []
    watchdog = Watchdog(state_max_age_s=0.2, command_timeout_s=0.2, on_trip=lambda r, _m: reasons.append(r))
    watchdog.start(time.monotonic())
    end = time.monotonic() + 0.3
    while time.monotonic() < end:
        watchdog.feed_state(time.monotonic())
        watchdog.feed_command()
        time.sleep(0.01)
    watchdog.stop()
    assert reasons == []


def test_a_trip_after_the_watchdog_itself_woke_late_says_so():
    """A stale state seen after the watchdog's own thread went unscheduled (a starved machine) is named as such."""
    messages: list[str] = []
    tripped = threading.Event()

    def on_trip(_reason: Reason, message: str) -> None:
        messages.append(message)
        tripped.set()

    watchdog = Watchdog(state_max_age_s=0.1, command_timeout_s=10.0, on_trip=on_trip)
    wait, waits = watchdog._stop.wait, []

    def unscheduled_once(timeout: float) -> bool:
        waits.append(timeout)
        if len(waits) == 2:
            time.sleep(0.3)  # the thread is not scheduled for 0.3 s, as beside CPU-bound processes
        return wait(timeout)

    watchdog._stop.wait = unscheduled_once
    watchdog.start(time.monotonic())
    assert tripped.wait(5.0)
    watchdog.stop()
    assert "no joint state for" in messages[0] and "the watchdog itself woke 0." in messages[0], messages
