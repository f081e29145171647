"""calibration_node over real DDS: a sim camera_node streams the wrist camera of a workcell with a textured
ChArUco board; the calibration node drives the sim arm through generated poses (planner, dry run, safety
layer), captures views from the camera topics, solves, stores and verifies. Ground truth: the sim mount."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import yaml
from geometry_msgs.msg import PoseStamped
from rclpy.executors import MultiThreadedExecutor
from rclpy.parameter import Parameter
from std_srvs.srv import SetBool, Trigger

from robopin.calibration import load_calibration
from robopin.calibration.simulation import SimCalibrationRig, mount_error
from tests.ros.rostest_utils import SpunNode, wait_for, wait_future

pytest.importorskip("pybullet")
pytestmark = [pytest.mark.ros, pytest.mark.slow]

WORLD = "calibration-node-test"


def _overrides(**params) -> list[Parameter]:
    # A simulated cell's nodes run on the simulator's clock (/clock), as robopin up runs them.
    return [Parameter(k, value=v) for k, v in {**params, "use_sim_time": True}.items()]


@pytest.fixture
def nodes(ros_context, tmp_path):
    """A sim world with a board, its wrist camera_node and a calibration_node, spun in this process, on the
    simulator's clock (robopin_ros.bringup.SimClockPublisher)."""
    from robopin_ros.bringup import SimClockPublisher
    from robopin_ros.calibration_node import CalibrationNode
    from robopin_ros.camera_node import CameraNode

    # Quarter-size views: every render holds the simulator (and Python) for a while, and the sim arm
    # and the planner share both with it; the accuracy bound below still holds at this size.
    rig = SimCalibrationRig.build("eye_in_hand", world_name=WORLD, image_size=(320, 240))
    executor = MultiThreadedExecutor(num_threads=4, context=ros_context)
    created = []
    clock = None
    try:
        camera = CameraNode(
            context=ros_context,
            parameter_overrides=_overrides(
                # 1 fps: every render holds the simulator's lock, and the sim arm needs it to move.
                name="wrist",
                backend="sim",
                fps=1,
                width=320,
                height=240,
                options=yaml.safe_dump({"world": WORLD, "sim_camera": "wrist"}),
            ),
        )
        created.append(camera)
        clock = SimClockPublisher(rig.world, camera)

        def calibration_node(**params):
            node = CalibrationNode(context=ros_context, parameter_overrides=_overrides(**params))
            created.append(node)
            executor.add_node(node)
            return node

        executor.add_node(camera)
        thread = threading.Thread(target=executor.spin, daemon=True)
        thread.start()
        yield {"rig": rig, "make": calibration_node, "out": tmp_path}
        executor.shutdown(timeout_sec=5)
        thread.join(timeout=5)
    finally:
        if clock is not None:
            clock.close()
        for node in created:
            node.destroy_node()
        rig.close()


def call(client: SpunNode, service_type, name: str, request, timeout_s: float):
    cli = client.node.create_client(service_type, name)
    wait_for(lambda: cli.wait_for_service(timeout_sec=0.1), 20, f"service {name}")
    return wait_future(cli.call_async(request), timeout_s, name)


def test_guided_capture_through_the_nodes_recovers_the_wrist_mount(nodes, ros_context):
    rig = nodes["rig"]
    nodes["make"](
        name="wrist",
        kind="eye_in_hand",
        output_dir=str(nodes["out"]),
        arm=yaml.safe_dump(
            {
                "type": "sim",
                "robot": "panda",
                "world": WORLD,
                "safety": {"state_max_age_s": 2.0, "command_timeout_s": 2.0},
            }
        ),
        board_pose=yaml.safe_dump({"parent_frame": "base", "matrix": rig.sim_board.T_parent_board.tolist()}),
        nominal_mount=yaml.safe_dump({"parent_frame": "ee", "matrix": rig.world.model.T_ee_wrist_camera.tolist()}),
        pose_count=6,
        seed=1,
        frame_timeout_s=60.0,
    )
    client = SpunNode("calibration_test_client", ros_context)
    try:
        before = rig.world.joint_positions()
        dry = call(client, SetBool, "/calibration_node/run_guided", SetBool.Request(data=True), 240)
        assert dry.success, dry.message
        assert "0 views accepted" in dry.message
        assert np.allclose(rig.world.joint_positions(), before, atol=1e-6)  # the dry run moved nothing

        guided = call(client, SetBool, "/calibration_node/run_guided", SetBool.Request(data=False), 450)
        assert guided.success, guided.message
        assert "6 views accepted" in guided.message

        solved = call(client, Trigger, "/calibration_node/solve", Trigger.Request(), 120)
        assert solved.success, solved.message
        path = nodes["out"] / "wrist.yaml"
        record = load_calibration(path)
        assert (record.parent_frame, record.child_frame, record.sample_count) == ("ee", "wrist_optical", 6)
        translation_mm, rotation_deg = mount_error(record.camera_mount().T_parent_cam, rig.T_truth)
        assert translation_mm < 2.0 and rotation_deg < 0.2, (translation_mm, rotation_deg, record.method)
        assert (nodes["out"] / "wrist.samples.yaml").exists()

        verified = call(client, Trigger, "/calibration_node/verify", Trigger.Request(), 200)
        assert verified.success, verified.message
        assert "OK" in verified.message
    finally:
        client.close()


def test_manual_capture_uses_the_arm_drivers_pose_topic(nodes, ros_context):
    """No arm backend in the node: the pose comes from /robopin/arm/ee_pose (as arm_driver_node publishes)."""
    from robopin_ros import conversions

    rig = nodes["rig"]
    rig.world.reset_arm(rig.world.inverse_kinematics(rig.capture_poses(rig.pose_config(1))[0]))
    nodes["make"](name="wrist", kind="eye_in_hand", output_dir=str(nodes["out"]), frame_timeout_s=60.0)
    client = SpunNode("calibration_manual_client", ros_context)
    publisher = client.node.create_publisher(PoseStamped, "/robopin/arm/ee_pose", 10)
    stop = threading.Event()

    def publish_pose():
        while not stop.is_set():
            msg = PoseStamped()
            msg.header.frame_id = "base"
            msg.pose = conversions.matrix_to_pose(rig.world.ee_pose())
            publisher.publish(msg)
            stop.wait(0.05)

    thread = threading.Thread(target=publish_pose, daemon=True)
    thread.start()
    try:
        captured = call(client, Trigger, "/calibration_node/capture", Trigger.Request(), 120)
        assert captured.success, captured.message
        assert "view 0 accepted" in captured.message
        too_few = call(client, Trigger, "/calibration_node/solve", Trigger.Request(), 60)
        assert not too_few.success and "1 usable sample(s)" in too_few.message
        guided = call(client, SetBool, "/calibration_node/run_guided", SetBool.Request(data=True), 30)
        assert not guided.success and "needs the arm parameter" in guided.message
    finally:
        stop.set()
        thread.join(timeout=2)
        client.close()
