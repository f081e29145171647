"""motion_planner_node over real DDS with the simulated arm: pick-and-place, refusals, dry run, cancel.

The arm side is the real ``arm_driver_node`` with its ``sim`` backend (``SimArm`` on a pybullet
workcell), so trajectories and gripper commands go through the driver's own safety checks.
"""

from __future__ import annotations

import itertools
import math
import threading
import time

import numpy as np
import pytest
from action_msgs.msg import GoalStatus, GoalStatusArray
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from robopin_interfaces.action import MoveToPose, PickPlace
from robopin_interfaces.msg import Target3D
from robopin_ros import conversions
from robopin_ros.actions import ActionClient
from robopin_ros.arm_driver_node import ArmDriverNode
from robopin_ros.bringup import SimClockPublisher
from robopin_ros.motion_planner_node import MotionPlannerNode

from robopin.interfaces import ARM
from robopin.sim.world import SimWorld

pytestmark = [pytest.mark.ros, pytest.mark.slow]

_names = itertools.count()
PICK = (0.45, 0.10, 0.05)  # top of a 5 cm cube standing at (0.45, 0.10)
PLACE = (0.35, -0.20, 0.0)  # on the table


@pytest.fixture(scope="module")
def cell():
    """Sim world with a cube, the real arm_driver_node (sim backend), the motion planner node and a
    client, all in this process on one ROS context and talking over DDS.

    Module-scoped (building it takes seconds); the tests run in file order: pick-and-place first.
    ArmDriverNode builds on the default context and reads its parameters from the context's
    arguments, so the context is the default one, initialised with those arguments. As ``robopin up`` runs a
    simulated system: every node on the simulator's clock (use_sim_time), which the world publishes on /clock.
    """
    import rclpy

    name = f"motion-node-{next(_names)}"
    world = SimWorld(name, robot="panda")
    world.add_object("cube", "cube", PICK[:2])
    world.settle()
    # Generous staleness limits: on a loaded CI machine the simulator can pause for a few hundred ms,
    # and timing must never decide a test (the watchdog itself is tested in the arms area).
    options = f"{{robot: panda, world: {name}, safety: {{state_max_age_s: 3.0, command_timeout_s: 3.0}}}}"
    # Quoted so rcl reads the mapping as one YAML string, which the driver parses itself.
    rclpy.init(args=["--ros-args", "-p", "backend:=sim", "-p", f"options:='{options}'", "-p", "use_sim_time:=true"])
    client = Node("motion_test_client")
    clock = SimClockPublisher(world, client)
    driver = ArmDriverNode()
    planner = MotionPlannerNode(
        parameter_overrides=[
            Parameter("robot", value="panda"),
            Parameter("planner", value="{type: roboplan, timeout_s: 3.0}"),
            Parameter("table_height_m", value=0.0),
            Parameter("cloud_wait_s", value=2.0),
        ],
    )
    executor = MultiThreadedExecutor(num_threads=6)
    for node in (driver, planner, client):
        executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        deadline = time.monotonic() + 20.0
        while not driver.arm.is_enabled:
            assert time.monotonic() < deadline, f"the sim arm never connected: {driver.last_error}"
            time.sleep(0.05)
        yield world, driver.arm, driver, planner, client
    finally:
        executor.shutdown()
        spinner.join(timeout=5)
        clock.close()
        for node in (client, planner, driver):
            node.destroy_node()
        driver.arm.disconnect()
        world.close()
        rclpy.shutdown()


def _wait(future, timeout_s: float):
    deadline = time.monotonic() + timeout_s
    while not future.done():
        assert time.monotonic() < deadline, "timed out waiting for an action future"
        time.sleep(0.01)
    return future.result()


def _send(client_node, action_type, name, goal, *, feedback=None, timeout_s: float = 120.0):
    client = ActionClient(client_node, action_type, name)
    assert client.wait_for_server(timeout_sec=10.0)
    handle = _wait(client.send_goal_async(goal, feedback_callback=feedback), 10.0)
    assert handle.accepted
    return handle, _wait(handle.get_result_async(), timeout_s).result


def _target(xyz, valid: bool = True) -> Target3D:
    target = Target3D(valid=valid)
    target.header.frame_id = "base"
    target.point = conversions.vector_to_point(xyz)
    return target


def _pose_goal(xyz, dry_run: bool = False) -> MoveToPose.Goal:
    goal = MoveToPose.Goal(dry_run=dry_run)
    goal.target.header.frame_id = "base"
    T = np.eye(4)
    T[:3, :3] = np.diag([1.0, -1.0, -1.0])  # pointing down
    T[:3, 3] = xyz
    goal.target.pose = conversions.matrix_to_pose(T)
    return goal


def _wait_for_joint_state(planner) -> None:
    deadline = time.monotonic() + 10.0
    while not planner._joint_history:
        assert time.monotonic() < deadline, "no joint state reached the planner"
        time.sleep(0.05)


def test_pick_and_place_through_the_node_moves_the_cube(cell):
    world, _, _, planner, client = cell
    _wait_for_joint_state(planner)
    # The planner executes through the standard ros2_control actions, served by the arm driver (over DDS).
    # Relative names: /robopin/arm/... here in the root namespace, /left/robopin/arm/... in namespace left.
    assert planner.execute_action == ARM.follow_joint_trajectory
    assert planner.gripper_action == ARM.gripper_cmd
    finished: dict[bytes, int] = {}
    for action in (planner.execute_action, planner.gripper_action):
        client.create_subscription(GoalStatusArray, f"{action}/_action/status", lambda m, a=action: finished.update(
            {(a, bytes(s.goal_info.goal_id.uuid)): s.status for s in m.status_list}), 50)
    stages: list[str] = []
    goal = PickPlace.Goal(pick=_target(PICK), place=_target(PLACE), grasp_yaw=math.nan)
    _, result = _send(
        client, PickPlace, "/robopin/motion/pick_place", goal, feedback=lambda msg: stages.append(msg.feedback.stage)
    )
    assert result.success, f"{result.status}: {result.message}"
    assert result.status == "success" and result.planning_time_s > 0.0
    assert len(result.trajectories) == 6
    ordered = [s for i, s in enumerate(stages) if i == 0 or s != stages[i - 1]]
    assert ordered == ["planning", "approaching", "grasping", "lifting", "placing", "retreating"]
    world.settle()
    cube = world.object_center("cube")
    assert np.linalg.norm(cube[:2] - np.array(PLACE[:2])) < 0.03, cube
    assert cube[2] < 0.05  # resting on the table, not still in the hand
    succeeded = [action for (action, _), status in finished.items() if status == GoalStatus.STATUS_SUCCEEDED]
    assert succeeded.count(planner.execute_action) == 6 and succeeded.count(planner.gripper_action) >= 2, finished


def test_refusals_dry_run_and_cancel(cell):
    world, arm, _, planner, client = cell
    _wait_for_joint_state(planner)
    q_before = arm.joint_state().positions.copy()

    # Outside the workspace: refused before planning, nothing moves.
    _, outside = _send(client, MoveToPose, "/robopin/motion/move_to_pose", _pose_goal((2.0, 0.0, 0.3)))
    assert not outside.success and outside.status == "outside_workspace"
    _, invalid = _send(
        client,
        PickPlace,
        "/robopin/motion/pick_place",
        PickPlace.Goal(pick=_target(PICK, valid=False), place=_target(PLACE), grasp_yaw=math.nan),
    )
    assert not invalid.success and invalid.status == "invalid_target"

    # Dry run: a verified plan comes back, the arm stays where it was.
    _, dry = _send(client, MoveToPose, "/robopin/motion/move_to_pose", _pose_goal((0.4, -0.3, 0.3), dry_run=True))
    assert dry.success and len(dry.trajectory.points) > 1 and dry.planning_time_s > 0.0
    assert np.allclose(arm.joint_state().positions, q_before, atol=0.02)

    # Cancel while executing: the driver's goal is cancelled and the arm stops short of the goal.
    executing = threading.Event()
    action = ActionClient(client, MoveToPose, "/robopin/motion/move_to_pose")
    assert action.wait_for_server(timeout_sec=10.0)
    goal = _pose_goal((0.4, 0.35, 0.15))
    # Slow enough that the busy refusal and the cancel (two round trips) land mid-motion on a flat-out simulator.
    goal.velocity_scale = 0.05
    handle = _wait(
        action.send_goal_async(
            goal, feedback_callback=lambda msg: msg.feedback.stage == "executing" and executing.set()
        ),
        10.0,
    )
    assert executing.wait(30.0), "execution never started"
    # Single-goal policy: a second goal while one runs is refused with reason 'busy', never interleaved.
    _, second = _send(
        client,
        PickPlace,
        "/robopin/motion/pick_place",
        PickPlace.Goal(pick=_target(PICK), place=_target(PLACE), grasp_yaw=math.nan, dry_run=True),
    )
    assert not second.success and second.status == "busy"
    _wait(handle.cancel_goal_async(), 10.0)
    result = _wait(handle.get_result_async(), 30.0)
    assert result.result.status == "canceled"
    tcp = arm.ee_pose()[:3, 3]
    assert np.linalg.norm(tcp - np.array([0.4, 0.35, 0.15])) > 0.05
    # The world steps only while the arm is commanded: let simulated time pass, then the arm must rest.
    world.advance(0.5)
    assert np.max(np.abs(arm.joint_state().velocities)) < 0.05


def test_workspace_cloud_keeps_the_world_fresh(cell):
    """A wall seen only in the published cloud: poses inside it are refused, plans go around it."""
    from sensor_msgs.msg import PointCloud2

    from robopin.geometry.pointcloud import PointCloud
    from robopin.motion.problems import box_surface_points
    from robopin.motion.robot import RobotModel, robot_spec
    from robopin.motion.verify import sampled_check
    from robopin.motion.world import CollisionWorld

    _, _, _, planner, client = cell
    assert planner.scene.config.cloud_wait_s == 2.0, "the node's cloud_wait_s parameter reaches its scene"
    _wait_for_joint_state(planner)
    # Start from a known pose on the near side of where the wall will appear (earlier tests moved the arm).
    _, moved = _send(client, MoveToPose, "/robopin/motion/move_to_pose", _pose_goal((0.45, -0.3, 0.2)))
    assert moved.success, f"{moved.status}: {moved.message}"
    center, size = np.array([0.45, 0.15, 0.2]), (0.3, 0.04, 0.4)
    points = box_surface_points(center, size, 3000, np.random.default_rng(0)).astype(np.float32)
    publisher = client.create_publisher(PointCloud2, "/robopin/workspace_cloud", 2)
    stop = threading.Event()

    def publish() -> None:
        while not stop.wait(0.1):
            header = conversions.make_header(client.get_clock().now().nanoseconds * 1e-9, "base")
            publisher.publish(conversions.point_cloud_to_msg(PointCloud(points, None, "base"), header))

    thread = threading.Thread(target=publish, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10.0
        while planner.scene.cloud_age_s(planner.get_clock().now().nanoseconds * 1e-9) is None:
            assert time.monotonic() < deadline, "the cloud never reached the planner"
            time.sleep(0.05)
        _, inside = _send(client, MoveToPose, "/robopin/motion/move_to_pose", _pose_goal((0.45, 0.15, 0.2), True))
        assert not inside.success and inside.status in {"goal_in_collision", "ik_fail"}
        _, around = _send(client, MoveToPose, "/robopin/motion/move_to_pose", _pose_goal((0.45, 0.35, 0.12), True))
        assert around.success, f"{around.status}: {around.message}"
    finally:
        stop.set()
        thread.join(timeout=2)
    truth = CollisionWorld()
    T = np.eye(4)
    T[:3, 3] = center
    truth.add_box("wall", size, T)
    judge = RobotModel(robot_spec("panda"))
    judge.set_world(truth, padding_m=0.0)
    trajectory = conversions.msg_to_motion_trajectory(around.trajectory)
    assert sampled_check(judge, trajectory.positions)


def test_a_simulated_cell_ages_joint_states_and_clouds_on_the_simulators_clock(cell):
    """On the simulator's clock (use_sim_time, /clock from the world, as robopin up runs a sim system) a motion
    planner's cloud of a still cell stays as young as when it came however long the machine takes, and a motion ages
    it by the motion's simulated duration."""
    from sensor_msgs.msg import PointCloud2

    from robopin.geometry.pointcloud import PointCloud

    world, _, _, planner, client = cell
    publisher = client.create_publisher(PointCloud2, "/robopin/workspace_cloud", 2)
    deadline = time.monotonic() + 10.0
    while not planner._joint_history:
        assert time.monotonic() < deadline, "no joint state reached the planner"
        time.sleep(0.05)
    points = np.array([[0.6, -0.3, 0.2]], dtype=np.float32)
    stamp_s = world.sim_time_s  # the cell stands still: its clock too
    header = conversions.make_header(stamp_s, "base")
    while planner.scene.cloud_age_s(stamp_s) is None:
        assert time.monotonic() < deadline, "the cloud never reached the planner"
        publisher.publish(conversions.point_cloud_to_msg(PointCloud(points, None, "base"), header))
        time.sleep(0.1)
    time.sleep(1.5)  # the arm stands: the simulator's time too
    assert planner._now_s() == pytest.approx(stamp_s, abs=1e-6)
    assert planner.scene.cloud_age_s(planner._now_s()) == pytest.approx(0.0, abs=1e-6)
    assert planner._joint_history[-1][0] == pytest.approx(stamp_s, abs=1e-6)
    sim_before = world.sim_time_s
    _, moved = _send(client, MoveToPose, "/robopin/motion/move_to_pose", _pose_goal((0.45, -0.2, 0.25)))
    assert moved.success, f"{moved.status}: {moved.message}"
    moved_s = world.sim_time_s - sim_before
    deadline = time.monotonic() + 10.0
    while planner._now_s() < world.sim_time_s - 1e-6:
        assert time.monotonic() < deadline, "the node's clock never caught up with the simulator's"
        time.sleep(0.05)
    age = planner.scene.cloud_age_s(planner._now_s())
    print(f"\nsimulated motion {moved_s:.2f} s; the cloud's age on the simulator's clock {age:.2f} s")
    assert moved_s > 0.5 and age == pytest.approx(moved_s, abs=1e-6)
