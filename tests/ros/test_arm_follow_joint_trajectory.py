"""The arm driver as a ros2_control user meets it: a sim arm (its own process, as on a robot PC) driven by
an rclpy ActionClient sending control_msgs/FollowJointTrajectory and GripperCommand goals, written
the way one drives joint_trajectory_controller; invalid goals come back with the standard error codes
and the arm does not move."""

from __future__ import annotations

import time

import numpy as np
import pytest
from builtin_interfaces.msg import Duration
from control_msgs.action import FollowJointTrajectory, GripperCommand
from control_msgs.msg import JointTolerance
from robopin_ros.actions import ActionClient
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectoryPoint

from robopin.robots.description import load_description
from tests.ros.rostest_utils import SpunNode, start_process, stop_process, wait_for, wait_future, wait_result

ACTION = "/robopin/arm/follow_joint_trajectory"
PANDA = load_description("panda")
codes = FollowJointTrajectory.Result


class UserClient:
    """What a ros2_control user writes: an ActionClient on <controller>/follow_joint_trajectory.

    rclpy's ActionClient with ros2/rclpy#1123 closed (``robopin_ros.actions.ActionClient``, the same protocol):
    the plain one, sending from this thread while an executor spins the node in another, drops a goal answer
    taken before its request is recorded ("Ignoring unexpected goal response"), which a loaded machine makes happen.
    """

    def __init__(self, context, prefix: str = "") -> None:
        self.spun = SpunNode(f"fjt_user_client{prefix.replace('/', '_')}", context)
        self.follow = ActionClient(self.spun.node, FollowJointTrajectory, prefix + ACTION)
        self.gripper = ActionClient(self.spun.node, GripperCommand, f"{prefix}/robopin/arm/gripper_cmd")
        self.states: list[JointState] = []
        self.spun.node.create_subscription(JointState, f"{prefix}/joint_states", self.states.append, 50)

    def positions(self) -> np.ndarray:
        index = {name: i for i, name in enumerate(self.states[-1].name)}
        return np.array([self.states[-1].position[index[name]] for name in PANDA.joint_names])

    def wait_still(self, timeout_s: float = 30.0) -> np.ndarray:
        """The positions once the arm is at rest (unchanged over 0.3 s of /joint_states)."""
        def still() -> bool:
            before = self.positions()
            time.sleep(0.3)
            return float(np.max(np.abs(self.positions() - before))) < 1e-4

        wait_for(still, timeout_s, "the arm at rest (/joint_states)")
        return self.positions()

    def run(self, goal: FollowJointTrajectory.Goal, feedback: list | None = None):
        callback = feedback.append if feedback is not None else None
        handle = wait_future(self.follow.send_goal_async(goal, feedback_callback=callback), 30.0, "goal response")
        assert handle.accepted
        response = wait_result(handle, 120.0, "result")
        return response.status, response.result


def goal_through(names, waypoints, times_s) -> FollowJointTrajectory.Goal:
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = list(names)
    for q, t in zip(waypoints, times_s, strict=True):
        goal.trajectory.points.append(JointTrajectoryPoint(
            positions=[float(v) for v in q], time_from_start=Duration(sec=int(t), nanosec=int(t % 1 * 1e9))))
    return goal


@pytest.fixture(scope="module")
def user():
    import rclpy

    process = start_process(["-m", "tests.deploy.sim_robot_process", "panda"])
    context = rclpy.Context()
    rclpy.init(context=context)
    client = UserClient(context)
    try:
        def ready() -> bool:
            assert process.poll() is None, f"the sim arm process ended: {stop_process(process)[1][-3000:]}"
            return client.follow.server_is_ready() and client.gripper.server_is_ready()

        wait_for(ready, 60.0, ACTION)
        wait_for(lambda: len(client.states) > 0, 30.0, "/joint_states")
        yield client
    finally:
        client.spun.close()
        rclpy.shutdown(context=context)
        stop_process(process)


def test_a_follow_joint_trajectory_goal_moves_the_sim_arm(user):
    start = user.positions()
    target = start.copy()
    target[0] += 0.3
    target[3] += 0.2
    goal = goal_through(PANDA.joint_names, [(start + target) / 2, target], [1.0, 2.0])
    feedback: list = []
    status, result = user.run(goal, feedback)
    assert result.error_code == codes.SUCCESSFUL, result.error_string
    assert status == 4  # action_msgs/GoalStatus.STATUS_SUCCEEDED
    wait_for(lambda: np.max(np.abs(user.positions() - target)) < 0.02, 10.0, "the arm at the goal (/joint_states)")
    assert feedback and list(feedback[-1].feedback.joint_names) == list(PANDA.joint_names)
    assert len(feedback[-1].feedback.actual.positions) == PANDA.dof

    # The gripper through control_msgs/GripperCommand, as gripper_action_controller serves it.
    grip = GripperCommand.Goal()
    grip.command.position, grip.command.max_effort = 0.03, 0.0
    handle = wait_future(user.gripper.send_goal_async(grip), 30.0, "gripper goal")
    gripped = wait_result(handle, 60.0, "gripper result").result
    assert gripped.reached_goal and gripped.position == pytest.approx(0.03, abs=0.003)


def test_invalid_goals_get_the_standard_error_codes_and_nothing_moves(user):
    # From rest: the goal before may have ended within its tolerance while the arm still converges.
    start = user.wait_still()
    names = list(PANDA.joint_names)
    beyond = start.copy()
    beyond[0] = PANDA.upper_rad[0] + 0.3
    shifted = start + 0.1
    cases = {
        "wrong joint names": (goal_through(["joint_a", *names[1:]], [shifted], [1.0]), codes.INVALID_JOINTS),
        "a partial set of joints": (goal_through(names[:3], [shifted[:3]], [1.0]), codes.INVALID_JOINTS),
        "times not increasing": (goal_through(names, [shifted, start], [1.0, 1.0]), codes.INVALID_GOAL),
        "outside the joint limits": (goal_through(names, [beyond], [2.0]), codes.INVALID_GOAL),
    }
    illegal = goal_through(names, [shifted], [1.0])
    illegal.goal_tolerance.append(JointTolerance(name=names[0], position=-2.0))  # only > 0, 0 or -1 mean anything
    cases["an illegal goal tolerance"] = (illegal, codes.INVALID_GOAL)
    for what, (goal, code) in cases.items():
        status, result = user.run(goal)
        assert result.error_code == code, f"{what}: {result.error_code} {result.error_string}"
        assert status == 6 and result.error_string, what  # STATUS_ABORTED, with the reason
        assert np.max(np.abs(user.positions() - start)) < 0.005, f"{what}: the arm moved"
    assert "joint_limit" in user.run(cases["outside the joint limits"][0])[1].error_string


def test_a_cancelled_goal_ends_canceled_and_the_arm_stops_short(user):
    # joint_trajectory_controller.cpp goal_cancelled_callback: accept, mark the goal canceled, hold position.
    start = user.positions()
    target = start.copy()
    target[0] += 0.6
    # Slow (a minute of motion), in steps below the driver's 0.5 rad jump limit between waypoints.
    goal = goal_through(PANDA.joint_names, [(start + target) / 2, target], [30.0, 60.0])
    handle = wait_future(user.follow.send_goal_async(goal), 30.0, "goal response")
    assert handle.accepted
    wait_for(lambda: abs(user.positions()[0] - start[0]) > 0.002, 30.0, "the arm moving")
    wait_future(handle.cancel_goal_async(), 30.0, "cancel response")
    response = wait_result(handle, 60.0, "result")
    assert response.status == 5, response.result.error_string  # action_msgs/GoalStatus.STATUS_CANCELED
    assert response.result.error_code == codes.SUCCESSFUL
    stopped = user.positions()
    assert abs(stopped[0] - target[0]) > 0.1, "the cancel stopped the arm before the goal"


def test_leaving_the_path_tolerance_aborts_and_stops(user):
    start = user.positions()
    target = start.copy()
    target[0] -= 0.3
    goal = goal_through(PANDA.joint_names, [target], [3.0])
    # Far tighter than any arm tracks, the simulated one included (it follows joint1 to about 1e-7 rad).
    goal.path_tolerance.append(JointTolerance(name=PANDA.joint_names[0], position=1e-9))
    status, result = user.run(goal)
    assert status == 6 and result.error_code == codes.PATH_TOLERANCE_VIOLATED, result.error_string
    assert result.error_string.startswith("path_tolerance: panda_joint1")
    assert abs(user.positions()[0] - target[0]) > 0.1, "stopped on the violation, not at the goal"


def test_a_dry_run_driver_validates_the_goal_succeeds_and_nothing_moves():
    """A real system's first start (dry_run:=true): goals are checked and answered, the arm stays."""
    import rclpy

    options = "{robot: panda, world: panda-cell, dry_run: true, safety: {state_max_age_s: 3.0}}"
    process = start_process(["-m", "tests.deploy.sim_robot_process", "panda", "-p", "prefix:=/dry/robopin/arm",
                             "-p", "joint_states_topic:=/dry/joint_states", "-p", f"options:='{options}'"])
    context = rclpy.Context()
    rclpy.init(context=context)
    dry = UserClient(context, prefix="/dry")
    try:
        wait_for(lambda: dry.follow.server_is_ready() and len(dry.states) > 0, 60.0, "the dry-run driver")
        start = dry.positions()
        status, result = dry.run(goal_through(PANDA.joint_names, [start + 0.2], [2.0]))
        assert status == 4 and result.error_code == codes.SUCCESSFUL, result.error_string
        assert result.error_string.startswith("dry_run:")
        assert np.max(np.abs(dry.positions() - start)) < 0.005
    finally:
        dry.spun.close()
        rclpy.shutdown(context=context)
        stop_process(process)
