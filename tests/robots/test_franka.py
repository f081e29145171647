"""The Franka backend with the real franky (libfranka) against franky-sim's MuJoCo robot server.

Only the robot is simulated; the libfranka network protocol, franky's motion generators and the
gripper protocol are the real ones. The simulator starts once per session (about 5-15 s).
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from robopin.robots.base import make_arm
from robopin.robots.errors import ArmConnectionError, ArmFaultError, Reason, SafetyViolationError
from robopin.robots.franka_arm import FrankaArmConfig, PathProgress, fault_from_errors
from robopin.robots.trajectory import JointTrajectory, min_jerk_move

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_joint_motion_reaches_the_goal(franka):
    start = franka.joint_state().positions
    goal = start + np.array([0.3, 0.1, 0.0, 0.2, 0.0, 0.1, 0.2])
    progress = []
    result = franka.move_to_joints(goal, on_progress=progress.append)
    assert result.success, result
    assert result.final_error_rad <= franka.config.goal_tolerance_rad
    np.testing.assert_allclose(franka.joint_state().positions, goal, atol=0.02)
    assert progress and progress[-1].progress == pytest.approx(1.0)


def test_wrist_joints_move_0_8_rad_at_the_default_dynamics_factor(franka):
    """franky plans with its own FR3 limits times the factor; the backend must time wrist moves within them."""
    assert (
        franka.config.relative_dynamics_factor
        == FrankaArmConfig.__dataclass_fields__["relative_dynamics_factor"].default
    )
    start = franka.joint_state().positions
    goal = start + np.array([0.0, 0.0, 0.0, 0.0, 0.8, 0.0, 0.8])  # joints 5 and 7
    trajectory = franka.plan_move(goal)
    velocity_limit, _ = franka.franky_limits()
    # Timed at robopin's limits, the plan is faster than franky allows: the backend slows it, not franky.
    assert np.max(np.abs(trajectory.velocities[:, [4, 6]])) > velocity_limit[[4, 6]].max()
    result = franka.execute(trajectory)
    assert result.success, result
    np.testing.assert_allclose(franka.joint_state().positions, goal, atol=0.02)


def test_random_reachable_goals_at_the_fastest_safe_timing_all_execute(franka):
    rng = np.random.default_rng(21)
    d = franka.description
    start = franka.joint_state().positions
    executed = 0
    while executed < 3:
        goal = np.clip(start + rng.uniform(-0.5, 0.5, d.dof), d.lower_rad + 0.1, d.upper_rad - 0.1)
        trajectory = franka.plan_move(goal)  # the fastest timing the safety layer allows
        try:
            franka.validate(trajectory)
        except SafetyViolationError:
            continue  # not reachable inside the workspace box: not a goal robopin would send
        result = franka.execute(trajectory)
        assert result.success, (goal, result)
        executed += 1


def test_waypoint_motion_stays_on_the_planned_path(franka):
    """franky solves each waypoint segment time-optimally on its own; measure how far that leaves the path.

    A planner-shaped path (straight joint-space segments meeting at corners, TOPP-RA timed at the safety
    layer's limits) at the default dynamics factor; the figure is printed (run with -s). It must stay
    inside the motion planner's obstacle padding, the clearance the path was planned with.
    """
    from robopin.motion.planner import PlannerConfig
    from robopin.motion.timing import time_parameterize

    start = franka.joint_state().positions
    corners = np.array(
        [
            start,
            start + np.array([0.3, 0, 0, 0.25, 0, 0, 0]),
            start + np.array([0.3, 0.25, -0.25, 0.25, 0.3, 0, 0]),
            start + np.array([0, 0.25, -0.25, 0, 0.3, 0.25, 0.45]),
        ]
    )
    timed = time_parameterize(
        corners,
        franka.joint_names,
        franka.safety.max_velocity_rad_s,
        franka.safety.max_acceleration_rad_s2,
        velocity_scale=0.95,
        acceleration_scale=0.5,
    )
    trajectory = timed  # the planner's trajectory is the arm's: no conversion
    seen = []
    result = franka.execute(trajectory, on_progress=lambda _p: seen.append(franka.joint_state().positions))
    assert result.success, result
    path, _ = trajectory.sample(trajectory.dense_times(0.002))
    d = franka.description
    tcp_path = d.forward_kinematics_batch(path)[:, :3, 3]
    tcp_seen = d.forward_kinematics_batch(np.array(seen))[:, :3, 3]
    joint_deviation = max(float(np.min(np.max(np.abs(path - q), axis=1))) for q in seen)
    tcp_deviation = max(float(np.min(np.linalg.norm(tcp_path - p, axis=1))) for p in tcp_seen)
    print(f"waypoint motion deviation: {joint_deviation:.4f} rad (joints), {tcp_deviation * 1000:.1f} mm (TCP)")
    assert tcp_deviation < PlannerConfig().padding_m



def _execute_until_moving(franka, trajectory, start):
    """Run ``trajectory`` on a thread; return once joint 1 has moved 0.05 rad (the thread and its result box)."""
    box: dict = {}
    thread = threading.Thread(target=lambda: box.update(result=franka.execute(trajectory)), daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while abs(franka.joint_state().positions[0] - start[0]) < 0.05:
        assert time.monotonic() < deadline, "the arm never started moving"
        time.sleep(0.01)
    return thread, box

def test_a_reflex_is_a_fault_until_recovered(franka, franka_sim):
    start = franka.joint_state().positions
    trajectory = franka.plan_move(start + np.array([0.6, 0, 0, 0, 0, 0, 0]))
    thread, box = _execute_until_moving(franka, trajectory, start)
    franka_sim.inject_reflex()
    thread.join(60)
    result = box["result"]
    assert not result.success and result.reason is Reason.FAULT and result.fault.name == "collision", result
    with pytest.raises(ArmFaultError):
        franka.move_to_joints(start)
    franka.recover()
    assert franka.fault() is None
    assert franka.move_to_joints(start).success
    # A reflex outside a motion: the robot stays in mode Reflex after current_errors clear (braking done).
    franka_sim.inject_reflex()
    time.sleep(0.5)
    fault = franka.fault()
    assert fault is not None and fault.name == "collision" and "Reflex" in fault.message
    franka.recover()
    assert franka.fault() is None


def test_a_user_stop_is_a_fault_recovery_waits_for_its_release(franka, franka_sim):
    franka_sim.user_stop()
    try:
        deadline = time.monotonic() + 10
        while franka.fault() is None:
            assert time.monotonic() < deadline, "the user stop was never reported"
            time.sleep(0.01)
        fault = franka.fault()
        assert fault.name == "user_stopped" and not fault.recoverable
        with pytest.raises(ArmFaultError):
            franka.recover()
        with pytest.raises(ArmFaultError):
            franka.move_to_joints(franka.joint_state().positions + 0.05)
    finally:
        franka_sim.user_stop(pressed=False)
    deadline = time.monotonic() + 10
    while franka.fault() is not None:
        assert time.monotonic() < deadline, "the release was never seen"
        time.sleep(0.01)
    franka.recover()
    assert franka.move_to_joints(franka.joint_state().positions + np.array([0.05, 0, 0, 0, 0, 0, 0])).success


def test_connect_leaves_the_callers_scheduling_policy_alone(franka_sim):
    """franky.Robot() raises its caller to SCHED_FIFO 99; children of that thread would inherit it."""
    import os

    from robopin.robots.scheduling import thread_scheduling

    before = thread_scheduling()
    arm = make_arm(FrankaArmConfig(ip=franka_sim.hostname))
    arm.connect()
    try:
        # Both views: the kernel's, and glibc's record that threads created later inherit.
        assert thread_scheduling() == before
        assert os.sched_getscheduler(0) == before[0]
        # A thread that re-applies "its current policy" (as Fast DDS does for its threads) stays as it was.
        seen = []
        worker = threading.Thread(target=lambda: seen.append(thread_scheduling()))
        worker.start()
        worker.join()
        assert seen == [before]
    finally:
        arm.disconnect()


def test_waypoint_trajectory_passes_its_waypoints(franka):
    names = franka.joint_names
    start = franka.joint_state().positions
    via = start + np.array([0.25, 0.0, 0.0, 0.15, 0.0, 0.0, 0.0])
    goal = start + np.array([0.25, 0.15, 0.0, 0.15, 0.0, 0.2, 0.0])
    vmax, amax = franka.safety.max_velocity_rad_s * 0.3, franka.safety.max_acceleration_rad_s2 * 0.3
    first = min_jerk_move(names, start, via, vmax, amax)
    second = min_jerk_move(names, via, goal, vmax, amax)
    trajectory = JointTrajectory(
        names,
        np.concatenate([first.times_s, first.duration_s + second.times_s[1:]]),
        np.vstack([first.positions, second.positions[1:]]),
        np.vstack([first.velocities, second.velocities[1:]]),
    )
    seen = []
    result = franka.execute(trajectory, on_progress=lambda _p: seen.append(franka.joint_state().positions))
    assert result.success, result
    distance_to_via = min(float(np.max(np.abs(q - via))) for q in seen)
    assert distance_to_via < 0.05
    np.testing.assert_allclose(franka.joint_state().positions, goal, atol=0.02)


def test_cancel_mid_motion_stops_the_arm(franka):
    start = franka.joint_state().positions
    goal = start + np.array([1.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    # Slowed down so the cancel surely lands mid-motion (waypoints carry the slower velocities).
    trajectory = franka.plan_move(goal).scaled(0.3)
    thread, box = _execute_until_moving(franka, trajectory, start)
    assert franka.cancel()
    thread.join(60)
    result = box["result"]
    assert result.reason is Reason.CANCELED and not result.success
    # At rest: judged from positions (franky-sim reports velocity chatter on the wrist joint).
    before = franka.joint_state().positions
    time.sleep(0.3)
    after = franka.joint_state().positions
    assert np.max(np.abs(after - before)) < 0.01
    assert abs(after[0] - goal[0]) > 0.3
    assert franka.fault() is None
    assert franka.move_to_joints(start).success  # no manual clearing needed


def test_refused_trajectory_leaves_the_arm_where_it_is(franka):
    here = franka.joint_state().positions
    too_far = here.copy()
    too_far[3] = franka.description.upper_rad[3] + 0.1
    with pytest.raises(SafetyViolationError) as caught:
        franka.execute(JointTrajectory(franka.joint_names, [0.0, 4.0], [here, too_far]))
    assert caught.value.reason is Reason.JOINT_LIMIT
    time.sleep(0.2)
    now = franka.joint_state().positions
    assert abs(now[3] - here[3]) < 1e-3  # the joint the trajectory would have driven did not move
    # franky-sim's wrist joint drifts by ~1 mrad at rest (velocity chatter, as above): a looser bound for all
    np.testing.assert_allclose(now, here, atol=5e-3)


def test_gripper_moves_closes_and_opens(franka):
    moved = franka.gripper_move(0.04)
    assert moved.reached_goal and moved.width_m == pytest.approx(0.04, abs=0.003)
    closed = franka.gripper_close(force_n=20.0)
    assert closed.width_m < 0.005 and not closed.stalled  # nothing between the fingers
    opened = franka.gripper_open()
    assert opened.width_m > 0.07
    assert franka.gripper_state().max_width_m > 0.07


def test_unreachable_robot_is_reported():
    arm = make_arm(FrankaArmConfig(ip="127.0.0.4"))  # nothing listens there
    with pytest.raises(ArmConnectionError, match="unreachable"):
        arm.connect()


def test_libfranka_errors_are_named():
    import franky

    assert fault_from_errors(franky.Errors()).name == "control_exception"


def test_path_progress_follows_the_path_forward():
    names = tuple("abc")
    trajectory = min_jerk_move(names, np.zeros(3), np.ones(3), np.full(3, 1.0), np.full(3, 5.0))
    tracker = PathProgress(trajectory)
    t_mid, error = tracker.update(trajectory.sample(trajectory.duration_s / 2)[0] + 0.001)
    assert t_mid == pytest.approx(trajectory.duration_s / 2, abs=0.02) and error < 0.01
    t_end, _ = tracker.update(np.ones(3))
    assert t_end == pytest.approx(trajectory.duration_s, abs=0.02)
