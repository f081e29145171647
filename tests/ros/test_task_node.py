"""task_node over real DDS with the simulator and the ground-truth oracle as the model.

Run as a script, this file is the stack process the tests talk to: one simulated scene and, in one
executor, the real ``task_node`` (oracle backend on that scene) and the real ``projection_node``,
plus a ``sim_stand_in`` node that plays the parts this test keeps in-process: the cameras (renders both
views after every change of the world and republishes them, stamped now, on the realsense-ros
topics), the arm state (``/joint_states``, ``/robopin/arm/ee_pose``) and ``/robopin/motion/pick_place``
carried out by the simulator's scripted controller (stops mid-motion on cancel). The tests are
clients in their own process: ``Instruct``, ``ExecuteTask``, ``/robopin/reasoning``, parameters.

    python tests/ros/test_task_node.py --scenario spatial --seed 0 --ros-args --params-file p.yaml
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORLD = "planner-test"
VIEWS = ("static", "wrist")


# ---------------------------------------------------------------------------------------------------
# The stack process
# ---------------------------------------------------------------------------------------------------


def _stand_in_node(scene):
    """Cameras, arm state and PickPlace on the simulated scene (see the module docstring)."""
    from geometry_msgs.msg import PoseStamped
    from rclpy.action import ActionServer, CancelResponse, GoalResponse
    from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
    from rclpy.node import Node
    from robopin_interfaces.action import PickPlace
    from robopin_ros import conversions
    from sensor_msgs.msg import CameraInfo, Image, JointState
    from std_srvs.srv import SetBool, Trigger

    from robopin.sim.tasks import check_success
    from tests.reasoning.sim_stages import SimScriptedPickPlace, frame_of

    class SimStandIn(Node):
        def __init__(self) -> None:
            super().__init__("sim_stand_in")
            self.world = scene.world
            self.arm = SimScriptedPickPlace(scene)
            self.lock = threading.Lock()
            self.depth_hole = False
            self.frames: dict[str, tuple] = {}
            self.pick_place_goals = 0
            self.pubs = {
                v: (
                    self.create_publisher(Image, f"/cameras/{v}/color/image_raw", 2),
                    self.create_publisher(Image, f"/cameras/{v}/aligned_depth_to_color/image_raw", 2),
                    self.create_publisher(CameraInfo, f"/cameras/{v}/color/camera_info", 2),
                )
                for v in VIEWS
            }
            self.render()
            # 2 Hz is plenty for a scene that only changes inside PickPlace (and spares a 2-core CI).
            self.create_timer(0.5, self.publish_frames, callback_group=MutuallyExclusiveCallbackGroup())
            self.pose_pub = self.create_publisher(PoseStamped, "/robopin/arm/ee_pose", 20)
            self.joints_pub = self.create_publisher(JointState, "/joint_states", 20)
            self.create_timer(0.05, self.publish_state, callback_group=MutuallyExclusiveCallbackGroup())
            group = MutuallyExclusiveCallbackGroup()
            self.create_service(SetBool, "/sim/depth_hole", self.on_depth_hole, callback_group=group)
            self.create_service(Trigger, "/sim/check_success", self.on_check_success, callback_group=group)
            self.create_service(Trigger, "/sim/reset_arm", self.on_reset_arm, callback_group=group)
            self.server = ActionServer(
                self,
                PickPlace,
                "/robopin/motion/pick_place",
                execute_callback=self.on_pick_place,
                goal_callback=lambda _g: GoalResponse.ACCEPT,
                cancel_callback=lambda _h: CancelResponse.ACCEPT,
                callback_group=MutuallyExclusiveCallbackGroup(),
            )

        def render(self) -> None:
            """Render both views of the world as it is now (the cameras see a static scene between moves)."""
            holes = None
            if self.depth_hole:
                # As a dark or shiny object would: no depth anywhere on the task's target object.
                holes = scene.world.object(scene.task.goals[0].object).body_id
            frames = {}
            for name in VIEWS:
                view = self.world.render(name)
                mask = None if holes is None else view.segmentation == holes
                frames[name] = (frame_of(view, name, 0, 0.0, mask), view)
            with self.lock:
                self.frames = frames

        def publish_frames(self) -> None:
            """Republish the latest rendering of every view, stamped now, on the camera topics."""
            # The world only changes inside PickPlace (which re-renders before it answers), so the
            # latest rendering shows the world as it is now.
            stamp = time.time()
            with self.lock:
                frames = dict(self.frames)
            for name, (frame, _view) in frames.items():
                header = conversions.make_header(stamp, f"{name}_optical")
                color_pub, depth_pub, info_pub = self.pubs[name]
                info_pub.publish(conversions.camera_model_to_camera_info(frame.intrinsics, header))
                depth_pub.publish(conversions.depth_to_image_msg(frame.depth_m, header))
                color_pub.publish(conversions.color_to_image_msg(frame.color, header))

        def publish_state(self) -> None:
            """Publish the arm's joint positions and end-effector pose, stamped now."""
            stamp = time.time()
            q = self.world.joint_positions()
            names = list(self.world.model.arm_joints)
            self.joints_pub.publish(
                JointState(header=conversions.make_header(stamp, ""), name=names, position=[float(v) for v in q])
            )
            pose = conversions.matrix_to_pose(self.world.ee_pose())
            self.pose_pub.publish(PoseStamped(header=conversions.make_header(stamp, "base"), pose=pose))

        def on_depth_hole(self, request, response):
            """Blank (or restore) the depth of the target object in every view."""
            self.depth_hole = bool(request.data)
            self.render()
            response.success, response.message = True, f"depth hole {'on' if self.depth_hole else 'off'}"
            return response

        def on_check_success(self, _request, response):
            """Judge the world against the scenario's task."""
            report = check_success(scene)
            response.success, response.message = report.success, f"{report}; pick_place_goals={self.pick_place_goals}"
            return response

        def on_reset_arm(self, _request, response):
            """Put the arm back at the observation pose (an operator homing the arm)."""
            self.world.reset_arm(scene.observe_q)
            self.world.settle(0.5)
            self.render()
            response.success = True
            return response

        def on_pick_place(self, goal_handle):
            """Carry out the pick-and-place with the scripted controller; re-render before answering."""
            self.pick_place_goals += 1
            goal = goal_handle.request
            goal_handle.publish_feedback(PickPlace.Feedback(stage="planning", progress=0.0))
            if not goal.dry_run:
                goal_handle.publish_feedback(PickPlace.Feedback(stage="approaching", progress=0.0))
            outcome = self.arm.run(
                conversions.point_to_vector(goal.pick.point),
                conversions.point_to_vector(goal.place.point),
                dry_run=goal.dry_run,
                should_stop=lambda: goal_handle.is_cancel_requested,
            )
            if outcome.executed:
                self.render()  # the next observation must show the world after this motion
            result = PickPlace.Result(success=outcome.success, status=outcome.status, message=outcome.message)
            if outcome.success:
                goal_handle.succeed()
            elif outcome.status == "canceled" and goal_handle.is_cancel_requested:
                goal_handle.canceled()
            else:
                goal_handle.abort()
            return result

    return SimStandIn()


def stack_main(argv: list[str]) -> int:
    """Build the scene and run task_node, projection_node and the stand-ins in one process."""
    import argparse
    import signal

    sys.path.insert(0, str(ROOT))
    import rclpy
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.signals import SignalHandlerOptions
    from robopin_ros.projection_node import ProjectionNode
    from robopin_ros.task_node import TaskNode

    from robopin.env import apply_ros_environment
    from robopin.sim.tasks import build_scene
    from robopin.vlm import register_backend

    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", default="spatial")
    parser.add_argument("--seed", type=int, default=0)
    args, ros_args = parser.parse_known_args(argv)
    apply_ros_environment()
    # A scripted model (a real VLMBackend answering from a list) for outputs the oracle never writes.
    register_backend("scripted", "tests.reasoning.stages")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    scene = build_scene(args.scenario, args.seed, world_name=WORLD)
    rclpy.init(args=["stack", *ros_args], signal_handler_options=SignalHandlerOptions.NO)
    executor = MultiThreadedExecutor(num_threads=8)
    nodes = [_stand_in_node(scene), ProjectionNode(), TaskNode()]
    for node in nodes:
        executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    print("stack ready", flush=True)
    while not stop.wait(0.2):
        pass
    nodes[2].stop_tasks()  # a running task ends, so the executor's threads can finish
    executor.shutdown(timeout_sec=10.0)
    for node in nodes:
        node.destroy_node()
    rclpy.try_shutdown()
    scene.close()
    return 0


# ---------------------------------------------------------------------------------------------------
# The tests (client side)
# ---------------------------------------------------------------------------------------------------

pytestmark = [pytest.mark.ros, pytest.mark.slow]


def stack_parameters(scene_spec: str, seed: int) -> dict:
    """Parameters of the real nodes: true camera mounts of the scene, the oracle as the model."""
    from robopin.sim.tasks import build_scene
    from tests.reasoning.sim_stages import camera_mounts

    # Same (scenario, seed) → same world, so the mounts match the stack's (computed without rendering).
    with build_scene(scene_spec, seed, world_name=f"{WORLD}-mounts", register=False) as scene:
        mounts = camera_mounts(scene)
        instruction = scene.spec.instruction
        goals = [goal.object for goal in scene.task.goals]
    calibrations = {
        name: {"parent_frame": mount.parent_frame, "matrix": mount.T_parent_cam.tolist()}
        for name, mount in mounts.items()
    }
    oracle = {"type": "oracle", "world": WORLD, "views": list(VIEWS)}
    return {
        "instruction": instruction,
        "goals": goals,
        "oracle": yaml.safe_dump(oracle),
        "params": {
            "projection_node": {
                "ros__parameters": {
                    "views": list(VIEWS),
                    "calibrations": yaml.safe_dump(calibrations),
                    "workspace": yaml.safe_dump({"min_xyz": [0.1, -0.6, -0.05], "max_xyz": [0.95, 0.6, 0.6]}),
                    "max_frame_age_s": 5.0,  # generous: timing must never decide a test on a loaded CI
                    "pose_tolerance_s": 1.0,  # the arm stands still whenever the planner projects
                }
            },
            "task_node": {
                "ros__parameters": {
                    "views": list(VIEWS),
                    "vlm": yaml.safe_dump(oracle),
                    "reasoning": yaml.safe_dump({"view_roles": {"static": "static camera", "wrist": "wrist camera"}}),
                    "max_frame_age_s": 5.0,
                    "snapshot_wait_s": 10.0,
                    "service_timeout_s": 30.0,
                }
            },
        },
    }


def start_stack(folder: Path, scenario: str, seed: int = 0):
    from tests.ros.rostest_utils import start_process

    setup = stack_parameters(scenario, seed)
    params = folder / "params.yaml"
    params.write_text(yaml.safe_dump(setup["params"]))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    stack_args = ["--scenario", scenario, "--seed", str(seed)]
    process = start_process([str(Path(__file__)), *stack_args, "--ros-args", "--params-file", str(params)], env=env)
    return process, setup


class Client:
    """The test's ROS side: Instruct, ExecuteTask, parameters, the reasoning topic and the arm state."""

    def __init__(self, ros_context) -> None:
        from rcl_interfaces.srv import SetParameters
        from robopin_interfaces.action import ExecuteTask
        from robopin_interfaces.msg import PinnedReasoning
        from robopin_interfaces.srv import Instruct
        from robopin_ros.actions import ActionClient
        from sensor_msgs.msg import JointState
        from std_srvs.srv import SetBool, Trigger

        from tests.ros.rostest_utils import SpunNode

        self.spun = SpunNode("planner_test_client", ros_context)
        node = self.spun.node
        self.reasoning: list = []
        self.images: list = []
        self.joints: list[tuple[float, np.ndarray]] = []
        node.create_subscription(PinnedReasoning, "/robopin/reasoning", self.reasoning.append, 10)
        from sensor_msgs.msg import Image

        self.image_times: list[float] = []  # arrival (monotonic) of each annotated image

        def on_image(message) -> None:
            self.images.append(message)
            self.image_times.append(time.monotonic())

        node.create_subscription(Image, f"/robopin/reasoning/{VIEWS[0]}/image", on_image, 2)
        node.create_subscription(
            JointState, "/joint_states", lambda m: self.joints.append((time.monotonic(), np.array(m.position))), 50
        )
        self.instruct = node.create_client(Instruct, "/robopin/instruct")
        self.action = ActionClient(node, ExecuteTask, "/robopin/execute_task")
        self.set_parameters = node.create_client(SetParameters, "/task_node/set_parameters")
        self.depth_hole = node.create_client(SetBool, "/sim/depth_hole")
        self.check_success = node.create_client(Trigger, "/sim/check_success")
        self.reset_arm = node.create_client(Trigger, "/sim/reset_arm")
        for client in (self.instruct, self.set_parameters, self.depth_hole, self.check_success, self.reset_arm):
            assert client.wait_for_service(timeout_sec=90), f"{client.srv_name} not discovered"
        assert self.action.wait_for_server(timeout_sec=30), "ExecuteTask server not discovered"
        from sensor_msgs.msg import CameraInfo

        from tests.ros.rostest_utils import wait_for

        infos: list = []
        node.create_subscription(CameraInfo, f"/cameras/{VIEWS[-1]}/color/camera_info", infos.append, 5)
        wait_for(lambda: bool(infos), 240, "camera frames from the stack")
        self.infos = infos

    def wait_for_frames_after(self, stamp_s: float) -> None:
        """Wait until frames stamped more than one publishing period after ``stamp_s`` reach this client.

        The stand-in republishes its latest rendering every 0.5 s, stamped when sent. This says what the
        topics carry now, not what the planner's own subscription has taken in yet.
        """
        from robopin_ros import conversions

        from tests.ros.rostest_utils import wait_for

        wait_for(lambda: conversions.stamp_to_seconds(self.infos[-1].header.stamp) > stamp_s + 0.6, 30,
                 "camera frames rendered after the change")

    def call(self, client, request, timeout_s: float = 60.0):
        from tests.ros.rostest_utils import wait_future

        return wait_future(client.call_async(request), timeout_s, client.srv_name)

    def trigger(self, client):
        from std_srvs.srv import Trigger

        return self.call(client, Trigger.Request())

    def set_parameter(self, name: str, value: str) -> None:
        from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
        from rcl_interfaces.srv import SetParameters

        value_msg = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=value)
        request = SetParameters.Request(parameters=[Parameter(name=name, value=value_msg)])
        reply = self.call(self.set_parameters, request)
        assert reply.results[0].successful, reply.results[0].reason

    def run_task(self, instruction: str, *, mode: str = "", max_steps: int = 0, feedback=None, timeout_s=240.0):
        """Send an ExecuteTask goal and wait for its result; returns (result, feedback list)."""
        from robopin_interfaces.action import ExecuteTask

        from tests.ros.rostest_utils import wait_future, wait_result

        feedback = [] if feedback is None else feedback
        goal = ExecuteTask.Goal(instruction=instruction, mode=mode, max_steps=max_steps)
        handle = wait_future(
            self.action.send_goal_async(goal, lambda fb: feedback.append(fb.feedback)), 30, "goal response"
        )
        assert handle.accepted
        return wait_result(handle, timeout_s, "task result").result, feedback, handle

    def joint_motion_since(self, start: float) -> float:
        """Largest joint change (rad) from the last joint state before ``start`` to one received after now."""
        from tests.ros.rostest_utils import wait_for

        now = time.monotonic()
        wait_for(lambda: self.joints and self.joints[-1][0] > now, 10, "a joint state after the task")
        samples = list(self.joints)
        before = [q for t, q in samples if t < start][-1:]
        stacked = np.stack(before + [q for t, q in samples if t >= start])
        return float(np.max(stacked.max(axis=0) - stacked.min(axis=0)))

    def close(self) -> None:
        self.spun.close()


@pytest.fixture(scope="module")
def spatial_stack(tmp_path_factory):
    from tests.ros.rostest_utils import stop_process

    process, setup = start_stack(tmp_path_factory.mktemp("planner_spatial"), "spatial")
    yield setup
    code, output = stop_process(process, timeout_s=30)
    print(output[-20000:])  # the stack's log, shown by pytest when a test of this module failed
    assert code == 0, f"stack did not shut down cleanly (exit {code}):\n{output[-6000:]}"


@pytest.fixture
def spatial(ros_context, spatial_stack):
    client = Client(ros_context)
    yield client, spatial_stack
    client.close()


ID_CONFLICT_TEXT = (
    '<think>The <obj name="duck" id="obj_01" img_idx="0" point="[500, 600]"> sits by the '
    '<obj name="teddy bear" id="obj_01" img_idx="0" point="[520, 610]">.</think>'
    '<answer>[{"point_2d": [500, 600], "label": "pick", "id": "obj_01", "img_idx": 0}, '
    '{"point_2d": [300, 700], "label": "place", "img_idx": 0}]</answer>'
)


@pytest.mark.parametrize("failure", ["invalid_reasoning", "id_conflict", "no_depth", "outside_workspace"])
def test_named_failures_end_the_task_before_any_arm_motion(spatial, failure):
    from std_srvs.srv import SetBool

    client, setup = spatial
    restore = []
    if failure == "invalid_reasoning":
        malformed = yaml.safe_load(setup["oracle"]) | {"errors": {"malformed_tag_probability": 1.0}}
        client.set_parameter("vlm", yaml.safe_dump(malformed))
        restore.append(("vlm", setup["oracle"]))
    elif failure == "id_conflict":
        client.set_parameter("vlm", yaml.safe_dump({"type": "scripted", "texts": [ID_CONFLICT_TEXT]}))
        restore.append(("vlm", setup["oracle"]))
    elif failure == "no_depth":
        assert client.call(client.depth_hole, SetBool.Request(data=True)).success
        # The planner projects on the frames the model saw: give the task once those can only show the
        # hole. The planner's own subscription may trail this client's by seconds on a loaded machine,
        # holding a frame from before the hole; but it refuses frames older than its max_frame_age_s and
        # waits for fresh ones, so once that much time has passed since the hole, every snapshot it
        # accepts shows it.
        max_age_s = setup["params"]["task_node"]["ros__parameters"]["max_frame_age_s"]
        client.wait_for_frames_after(time.time() + max_age_s)
    else:
        client.set_parameter("workspace", yaml.safe_dump({"min_xyz": [0.0, 0.9, 0.0], "max_xyz": [0.1, 1.0, 0.1]}))
        restore.append(("workspace", ""))
    try:
        started = time.monotonic()
        client.reasoning.clear()
        result, feedback, _ = client.run_task(setup["instruction"])
        assert (result.success, result.reason) == (False, failure), result.message
        if failure == "no_depth":  # the projection node's words, carried in Target3D.detail
            assert "valid depth samples" in result.message, result.message
        assert result.steps_executed == 0
        stages = [f.stage for f in feedback]
        assert "observing" in stages and "reasoning" in stages
        assert "planning" not in stages and "executing" not in stages
        assert client.joint_motion_since(started) < 1e-3
        assert "pick_place_goals=0" in client.trigger(client.check_success).message
        assert len(result.reasoning_steps) == 1
        step = result.reasoning_steps[0]
        if failure in ("invalid_reasoning", "id_conflict"):
            assert not step.valid and step.errors
        else:
            assert step.valid and step.anchors and step.answer_points
    finally:
        for name, value in restore:
            client.set_parameter(name, value)
        if failure == "no_depth":
            client.call(client.depth_hole, SetBool.Request(data=False))


def test_spatial_task_completes_through_instruct_and_a_second_instruction_is_rejected(spatial):
    from robopin_interfaces.srv import Instruct

    from tests.ros.rostest_utils import wait_for

    client, setup = spatial
    client.reasoning.clear()
    reply = client.call(client.instruct, Instruct.Request(instruction=setup["instruction"]))
    assert reply.accepted and len(reply.task_id) == 8, reply.message
    second = client.call(client.instruct, Instruct.Request(instruction="put the other duck on the plate"))
    assert not second.accepted and reply.task_id in second.message
    # A goal sent straight to the action while the task runs is aborted with reason "busy".
    busy, _, _ = client.run_task("interleaved task", timeout_s=30)
    assert (busy.success, busy.reason) == (False, "busy")
    wait_for(lambda: client.trigger(client.check_success).success, 240, "the spatial task to succeed in the sim")
    assert [m.task_id for m in client.reasoning] == [reply.task_id]
    message = client.reasoning[0]
    assert message.valid and message.view_names == list(VIEWS)
    assert message.anchors and {a.img_idx for a in message.anchors} <= {0, 1}
    # The PinCoT drawn on the static view, for RViz / Foxglove.
    assert client.images and (client.images[-1].width, client.images[-1].height) == (640, 480)
    assert client.images[-1].header.frame_id == f"{VIEWS[0]}_optical"
    assert all(0 <= a.u <= 640 and 0 <= a.v <= 480 for a in message.anchors)

    # The task ends and releases the planner: a new (dry-run) instruction is accepted; the model now
    # sees the duck on the plate and reports the task done, so nothing moves.
    def accepted() -> bool:
        time.sleep(0.5)
        return client.call(client.instruct, Instruct.Request(instruction=setup["instruction"], dry_run=True)).accepted

    wait_for(accepted, 60, "the planner to accept a new instruction")


if __name__ == "__main__":
    sys.exit(stack_main(sys.argv[1:]))
