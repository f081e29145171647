"""docs/runbook.md's first-trial steps, followed in the simulator with the real nodes that exist today.

One process, one executor, talking over DDS: ``arm_driver_node`` (sim backend, the runbook's reduced
``speed_scale``), ``motion_planner_node`` (CPU planner, the runbook's small workspace box),
``recorder_node`` (every step recorded) and, at the end, ``replay_node``. The steps, in order:
dry run → a target outside the small workspace refused → pick-and-place at reduced speed →
software stop mid-motion → emergency stop (a controller fault, injected: the physical button is the one
part that cannot run here) refuses motion → recover → motion again → stop recording → replay the bag
of the failures. The language front (``task_node`` + cameras + projection) brought up by ``robopin up``
is followed end to end by tests/integration/test_main_job.py.
"""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from robopin_interfaces.action import MoveToPose, PickPlace
from robopin_interfaces.msg import Target3D
from robopin_ros import conversions
from robopin_ros.actions import ActionClient, GoalResult
from robopin_ros.arm_driver_node import ArmDriverNode
from robopin_ros.bringup import SimClockPublisher
from robopin_ros.motion_planner_node import MotionPlannerNode
from robopin_ros.recorder_node import RecorderNode
from robopin_ros.replay_node import ReplayNode
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from robopin.bags import TrialBag
from robopin.robots.errors import ArmFault
from robopin.sim.world import SimWorld

pytestmark = [pytest.mark.ros, pytest.mark.slow]

SPEED_SCALE = 0.5  # the runbook's first-motion speed (docs/runbook.md, step 6)
SMALL_WORKSPACE = "{min_xyz: [0.2, -0.35, -0.02], max_xyz: [0.6, 0.35, 0.45]}"
PICK = (0.45, 0.10, 0.05)  # top of a 5 cm cube standing at (0.45, 0.10)
PLACE = (0.35, -0.20, 0.0)
ARM_JOINTS = [f"panda_joint{i}" for i in range(1, 8)]


class Cell:
    """The simulated workcell and the nodes of the runbook's first trial, on the simulator's clock (/clock and
    use_sim_time, as robopin up runs a simulated system)."""

    def __init__(self, output_dir: Path) -> None:
        import rclpy

        self.world = SimWorld("runbook-cell", robot="panda")
        self.world.add_object("cube", "cube", PICK[:2])
        self.world.settle()
        safety = f"{{speed_scale: {SPEED_SCALE}, state_max_age_s: 3.0, command_timeout_s: 3.0}}"
        options = f"{{robot: panda, world: runbook-cell, safety: {safety}}}"
        rclpy.init(args=["--ros-args", "-p", "backend:=sim", "-p", f"options:='{options}'", "-p",
                         "use_sim_time:=true"])
        self.client = Node("runbook_operator")
        self.clock = SimClockPublisher(self.world, self.client)
        self.driver = ArmDriverNode()
        self.planner = MotionPlannerNode(
            parameter_overrides=[
                Parameter("robot", value="panda"),
                Parameter("planner", value="{type: roboplan, timeout_s: 3.0}"),
                Parameter("table_height_m", value=0.0),
                Parameter("workspace", value=SMALL_WORKSPACE),
                Parameter("max_joint_state_age_s", value=3.0),
            ]
        )
        self.recorder = RecorderNode(
            parameter_overrides=[
                Parameter("output_dir", value=str(output_dir)),
                Parameter("topics", value=["/joint_states", "*/_action/feedback", "*/_action/status"]),
            ]
        )
        self.joint_log: list[tuple[float, dict[str, float]]] = []
        self._log_lock = threading.Lock()
        self.client.create_subscription(JointState, "/joint_states", self._on_joint_state, 50)
        self.executor = MultiThreadedExecutor(num_threads=8)
        for node in (self.driver, self.planner, self.recorder, self.client):
            self.executor.add_node(node)
        self.spinner = threading.Thread(target=self.executor.spin, daemon=True)
        self.spinner.start()
        wait(lambda: self.driver.arm.is_enabled, 30.0, f"the sim arm to connect ({self.driver.last_error})")
        wait(lambda: bool(self.planner._joint_history), 15.0, "a joint state at the motion planner")

    def _on_joint_state(self, message: JointState) -> None:
        with self._log_lock:
            self.joint_log.append((time.monotonic(), dict(zip(message.name, message.velocity, strict=False))))

    def peak_arm_speed(self, since: float) -> float:
        with self._log_lock:
            rows = [v for t, v in self.joint_log if t >= since]
        return max((abs(v.get(j, 0.0)) for v in rows for j in ARM_JOINTS), default=0.0)

    def call(self, service: str) -> Trigger.Response:
        client = self.client.create_client(Trigger, service)
        assert client.wait_for_service(timeout_sec=10.0), f"{service} is not served"
        return wait_future(client.call_async(Trigger.Request()), 30.0, service)

    def send(self, action_type, name: str, goal, feedback=None):
        client = ActionClient(self.client, action_type, name)
        assert client.wait_for_server(timeout_sec=10.0), f"{name} is not served"
        handle = wait_future(client.send_goal_async(goal, feedback_callback=feedback), 10.0, f"{name} goal")
        assert handle.accepted
        return handle

    def run(self, action_type, name: str, goal, timeout_s: float = 180.0):
        handle = self.send(action_type, name, goal)
        return wait_result(handle, timeout_s, f"{name} result").result

    def close(self) -> None:
        import rclpy
        from robopin_ros.runtime import destroy_when_stopped

        # rclpy's own executor.shutdown() destroys its guard condition under a spin thread still building its wait
        # set ("'NoneType' object has no attribute 'handle'"); the stack's teardown ends the spin loop first.
        destroy_when_stopped(self.executor, self.spinner, [self.recorder, self.planner, self.driver])
        self.clock.close()
        self.client.destroy_node()
        self.driver.arm.disconnect()
        self.world.close()
        rclpy.shutdown()


def wait(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def wait_future(future, timeout_s: float, what: str):
    wait(future.done, timeout_s, what)
    return future.result()


def wait_result(goal_handle, timeout_s: float, what: str):
    answer = GoalResult(goal_handle).answer(timeout_s)
    assert answer is not None, f"timed out waiting for {what}"
    return answer


def target(xyz) -> Target3D:
    message = Target3D(valid=True)
    message.header.frame_id = "base"
    message.point = conversions.vector_to_point(xyz)
    return message


def pose_goal(xyz, *, dry_run: bool = False, velocity_scale: float = 0.0) -> MoveToPose.Goal:
    goal = MoveToPose.Goal(dry_run=dry_run, velocity_scale=velocity_scale)
    goal.target.header.frame_id = "base"
    T = np.eye(4)
    T[:3, :3] = np.diag([1.0, -1.0, -1.0])  # gripper pointing down
    T[:3, 3] = xyz
    goal.target.pose = conversions.matrix_to_pose(T)
    return goal


def planned_peak_speed(trajectories) -> float:
    """Largest arm joint speed the plans ask for (finite differences of the planned waypoints)."""
    peak = 0.0
    for trajectory in trajectories:
        columns = [list(trajectory.joint_names).index(j) for j in ARM_JOINTS if j in trajectory.joint_names]
        times = np.array([p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in trajectory.points])
        positions = np.array([[p.positions[c] for c in columns] for p in trajectory.points])
        if len(times) > 1:
            speeds = np.abs(np.diff(positions, axis=0)) / np.maximum(np.diff(times), 1e-6)[:, None]
            peak = max(peak, float(speeds.max()))
    return peak


@pytest.fixture(scope="module")
def cell(tmp_path_factory):
    cell = Cell(tmp_path_factory.mktemp("runbook-bags"))
    try:
        yield cell
    finally:
        cell.close()


def test_the_first_trial_runbook_in_the_simulator(cell):
    # Step 5 (record every trial): the recorder runs before anything moves.
    started = cell.call("/recorder_node/start")
    assert started.success, started.message
    time.sleep(1.0)  # the recorder subscribes to topics it discovers every 0.5 s

    # Step 5: dry run. A complete pick-and-place is planned and verified; nothing moves.
    q_before = cell.driver.arm.joint_state().positions.copy()
    cube_before = cell.world.object_center("cube")
    dry_goal = PickPlace.Goal(pick=target(PICK), place=target(PLACE), grasp_yaw=math.nan, dry_run=True)
    dry = cell.run(PickPlace, "/robopin/motion/pick_place", dry_goal)
    assert dry.success, f"{dry.status}: {dry.message}"
    assert len(dry.trajectories) == 6
    assert np.allclose(cell.driver.arm.joint_state().positions, q_before, atol=0.02)
    assert np.allclose(cell.world.object_center("cube"), cube_before, atol=0.005)

    # Step 6: the small workspace box. A target the arm could reach but outside the box is refused.
    outside = cell.run(MoveToPose, "/robopin/motion/move_to_pose", pose_goal((0.75, 0.0, 0.2)))
    assert not outside.success and outside.status == "outside_workspace", outside.message

    # Step 6: first motion at reduced speed. The driver slows every trajectory by speed_scale.
    began = time.monotonic()
    moved = cell.run(PickPlace, "/robopin/motion/pick_place",
                     PickPlace.Goal(pick=target(PICK), place=target(PLACE), grasp_yaw=math.nan))  # fmt: skip
    assert moved.success, f"{moved.status}: {moved.message}"
    cell.world.settle()
    assert np.linalg.norm(cell.world.object_center("cube")[:2] - np.array(PLACE[:2])) < 0.03
    planned, measured = planned_peak_speed(moved.trajectories), cell.peak_arm_speed(began)
    assert planned > 0.05, "the plan moves the arm"
    print(f"reduced speed: measured {measured:.3f} rad/s, planned {planned:.3f} rad/s")
    assert measured < 0.8 * planned, f"measured {measured:.3f} rad/s, planned {planned:.3f} rad/s at full speed"

    # Step 7: software stop mid-motion. The motion goal fails with a reason and the arm comes to rest.
    executing = threading.Event()
    goal_xyz = (0.45, 0.3, 0.15)
    handle = cell.send(MoveToPose, "/robopin/motion/move_to_pose", pose_goal(goal_xyz, velocity_scale=0.3),
                       feedback=lambda m: m.feedback.stage == "executing" and executing.set())  # fmt: skip
    assert executing.wait(60.0), "execution never started"
    # At once: the simulator runs the arm faster than real time (a 3 s trajectory can end within 0.3 s).
    stop = cell.call("/robopin/arm/stop")
    assert stop.success, stop.message
    stopped = wait_result(handle, 60.0, "the stopped goal").result
    assert not stopped.success and stopped.message, stopped.status
    assert np.linalg.norm(cell.driver.arm.ee_pose()[:3, 3] - np.array(goal_xyz)) > 0.03
    cell.world.advance(0.5)
    assert np.max(np.abs(cell.driver.arm.joint_state().velocities)) < 0.05

    # Step 7: emergency stop. The controller reports the fault; no motion is accepted until recovery.
    cell.driver.arm.inject_fault(ArmFault("emergency_stop", "emergency stop pressed (simulated)", code=2))
    refused = cell.run(MoveToPose, "/robopin/motion/move_to_pose", pose_goal((0.4, -0.1, 0.3)))
    assert not refused.success
    assert "emergency_stop" in refused.message, refused.message
    q_refused = cell.driver.arm.joint_state().positions.copy()
    cell.world.advance(0.2)
    assert np.allclose(cell.driver.arm.joint_state().positions, q_refused, atol=0.01)

    # Step 8: recover, then the arm moves again.
    recovered = cell.call("/robopin/arm/recover")
    assert recovered.success, recovered.message
    again = cell.run(MoveToPose, "/robopin/motion/move_to_pose", pose_goal((0.4, -0.1, 0.3)))
    assert again.success, f"{again.status}: {again.message}"
    assert np.linalg.norm(cell.driver.arm.ee_pose()[:3, 3] - np.array((0.4, -0.1, 0.3))) < 0.02

    # Step 9: stop recording; the bag holds the arm's states and the failed executions.
    finished = cell.call("/recorder_node/stop")
    assert finished.success, finished.message
    bag_path = finished.message.split(":")[0]
    with TrialBag(bag_path) as bag:
        assert "/joint_states" in bag.topics
        status_topic = "/robopin/arm/follow_joint_trajectory/_action/status"
        assert status_topic in bag.topics
        final = {}
        for _, status_array in bag.decoded([status_topic]):
            for status in status_array.status_list:
                final[bytes(status.goal_info.goal_id.uuid)] = status.status
        assert 4 in final.values(), "a trajectory that succeeded"
        assert {5, 6} & set(final.values()), "the stopped and the refused executions, recorded as failures"
        recorded = [list(m.position) for _, m in bag.decoded(["/joint_states"])]
    assert len(recorded) > 10

    # Step 10: replay the failure. The bag's joint states come back on the graph, in recorded order.
    received: list[list[float]] = []
    cell.client.create_subscription(
        JointState, "/replay/joint_states", lambda m: received.append(list(m.position)), 1000
    )
    replay = ReplayNode(
        parameter_overrides=[Parameter("bag", value=bag_path), Parameter("rate", value=0.0),
                             Parameter("topics", value=["/joint_states"])],
        cli_args=["--ros-args", "-r", "/joint_states:=/replay/joint_states"],
    )  # fmt: skip
    cell.executor.add_node(replay)
    try:
        wait(replay.done.is_set, 60.0, "the replay to finish")
        wait(lambda: len(received) >= 0.9 * len(recorded), 15.0, "the replayed joint states")
    finally:
        cell.executor.remove_node(replay)
        replay.destroy_node()
    assert replay.stats.total == len(recorded)
    assert received[0] == pytest.approx(recorded[0])
    assert received[-1] == pytest.approx(recorded[-1]) or len(received) < len(recorded)
