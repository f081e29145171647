"""Every robopin node's parameters as `ros2 param describe` sees them, over real DDS.

Each node runs in this process; a client node calls the node's own ``~/list_parameters``,
``~/describe_parameters``, ``~/get_parameters`` and ``~/set_parameters`` services (the ones the ros2 param
verbs call). Every parameter the node declared carries a description; it is read-only unless the node's
set-parameters callback applies a change at run time, and a read-only one refuses a set naming why. The
ranges the descriptors carry hold every value a shipped system file (config/*.yaml) or
config/task_node.yaml sets, so no shipped config is refused at start.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.msg import ParameterType
from rcl_interfaces.srv import DescribeParameters, GetParameters, ListParameters, SetParameters
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter

from robopin.env import REPO_ROOT
from robopin.system import load_system
from tests.ros.rostest_utils import SpunNode, call_service

pytestmark = pytest.mark.ros

# rclpy declares these on every node itself (rclpy/node.py: use_sim_time; Jazzy's
# start_type_description_service); they are ROS's, not robopin's.
ROS_OWN = {"use_sim_time", "start_type_description_service"}
# What each node's set-parameters callback applies while it runs; every other parameter is read-only.
# The planner's nested settings are dotted parameters: one per key given (and vlm.type, its default), next to
# the older one-YAML-string form of each.
DYNAMIC = {"task_node": {"vlm", "reasoning", "workspace", "vlm.type", "vlm.texts", "vlm.delay_s"},
           "camera_node": {"reconnect_period_s"}}
CALL_TIMEOUT_S = 20.0


def _overrides(**params: Any) -> list[Parameter]:
    return [Parameter(k, value=v) for k, v in params.items()]


def _joint_state_bag(path: Path) -> Path:
    from robopin.bags.recorder import record_messages
    from robopin.bags.typestore import robopin_typestore

    typestore = robopin_typestore()
    types = typestore.types
    msg = types["sensor_msgs/msg/JointState"](
        header=types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](sec=1, nanosec=0),
                                            frame_id="base"),
        name=["j1"], position=np.array([0.1]), velocity=np.zeros(0), effort=np.zeros(0))
    data = bytes(typestore.serialize_cdr(msg, "sensor_msgs/msg/JointState"))
    record_messages(path, [("/joint_states", "sensor_msgs/msg/JointState", data, 10**9)], typestore=typestore)
    return path


def _camera_bag(path: Path) -> Path:
    from robopin.cameras import Frame
    from robopin.cameras.bag import write_camera_bag
    from robopin.cameras.synthetic import SyntheticScene
    from robopin.geometry.camera_model import CameraModel

    model = CameraModel(32, 24, 30.0, 30.0, 15.5, 11.5)
    scene = SyntheticScene()
    frames = [Frame(scene.color(model, i), scene.depth_m(model), model, 10.0 + i / 30, "", i, "top")
              for i in range(3)]
    return write_camera_bag(path, frames, topic_prefix="/cameras/top")


# executable -> builds the node cheaply on a context (tmp folder, cleanups to run after it is destroyed).
def _arm_driver(context, tmp: Path, cleanups: list[Callable[[], None]]):
    from robopin_ros.arm_driver_node import ArmDriverNode

    from robopin.sim.world import SimWorld

    world = SimWorld("parameter-descriptors", robot="panda")
    cleanups.append(world.close)
    return ArmDriverNode(context=context, parameter_overrides=_overrides(
        backend="sim", options=yaml.safe_dump({"robot": "panda", "world": world.name})))


def _camera(context, tmp, cleanups):
    from robopin_ros.camera_node import CameraNode

    return CameraNode(context=context, parameter_overrides=_overrides(
        name="top", backend="bag", bag_path=str(_camera_bag(tmp / "top")), width=32, height=24))


def _projection(context, tmp, cleanups):
    from robopin_ros.projection_node import ProjectionNode

    return ProjectionNode(context=context, parameter_overrides=_overrides(calibration_dir=str(tmp)))


def _motion_planner(context, tmp, cleanups):
    from robopin_ros.motion_planner_node import MotionPlannerNode

    return MotionPlannerNode(context=context, parameter_overrides=_overrides(
        robot="panda", planner="{type: roboplan, timeout_s: 3.0}"))


def _planner(context, tmp, cleanups):
    from robopin_ros.task_node import TaskNode

    from robopin.vlm import register_backend

    register_backend("scripted", "tests.reasoning.stages")
    return TaskNode(context=context, parameter_overrides=[
        Parameter("vlm.type", value="scripted"), Parameter("vlm.texts", value=["<think>x</think><answer>[]</answer>"]),
        Parameter("vlm.delay_s", value=0.0), Parameter("views", value=["static"])])


def _state_publisher(context, tmp, cleanups):
    from robopin_ros.state_publisher_node import StatePublisherNode

    return StatePublisherNode(context=context, parameter_overrides=_overrides(calibration_dir=str(tmp)))


def _recorder(context, tmp, cleanups):
    from robopin_ros.recorder_node import RecorderNode

    return RecorderNode(context=context, parameter_overrides=_overrides(output_dir=str(tmp / "bags")))


def _replay(context, tmp, cleanups):
    from robopin_ros.replay_node import ReplayNode

    return ReplayNode(context=context, parameter_overrides=_overrides(bag=str(_joint_state_bag(tmp / "bag"))))


def _calibration(context, tmp, cleanups):
    from robopin_ros.calibration_node import CalibrationNode

    return CalibrationNode(context=context, parameter_overrides=_overrides(output_dir=str(tmp)))


NODES = {
    "arm_driver_node": _arm_driver,
    "camera_node": _camera,
    "projection_node": _projection,
    "motion_planner_node": _motion_planner,
    "task_node": _planner,
    "state_publisher_node": _state_publisher,
    "recorder_node": _recorder,
    "replay_node": _replay,
    "calibration_node": _calibration,
}


def _shipped_values(executable: str) -> list[tuple[str, str, Any]]:
    """(where, parameter, value) for every value a shipped config gives a node of ``executable``."""
    values = []
    for path in sorted((REPO_ROOT / "config").glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and "nodes" in data:  # a system file, with its arguments' defaults
            for spec in load_system(path).with_arguments({}, {}).nodes_running(executable):
                values += [(f"{path.name}:{spec.name}", k, v) for k, v in spec.ros_parameters().items()]
        elif isinstance(data, dict) and executable in data:  # a ROS parameters file (config/task_node.yaml)
            values += [(path.name, k, v) for k, v in data[executable].get("ros__parameters", {}).items()]
    return values


def _call(client: SpunNode, srv_type, service: str, request):
    return call_service(client.node.create_client(srv_type, service), request, CALL_TIMEOUT_S, service)


@pytest.mark.parametrize("executable", sorted(NODES))
def test_every_parameter_is_described_and_read_only_unless_applied_at_run_time(executable, ros_context, tmp_path):
    cleanups: list[Callable[[], None]] = []
    node = NODES[executable](ros_context, tmp_path, cleanups)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    client = SpunNode("parameter_descriptor_client", ros_context)
    name = node.get_name()
    try:
        listed = _call(client, ListParameters, f"/{name}/list_parameters", ListParameters.Request()).result.names
        names = sorted(set(listed) - ROS_OWN)
        assert len(names) >= 5, f"{name} lists only {listed}"
        described = _call(client, DescribeParameters, f"/{name}/describe_parameters",
                          DescribeParameters.Request(names=names)).descriptors
        descriptors = {d.name: d for d in described}
        assert sorted(descriptors) == names
        undescribed = [n for n, d in descriptors.items() if not d.description.strip()]
        assert not undescribed, f"{name}: parameters without a description: {undescribed}"
        dynamic = {n for n, d in descriptors.items() if not d.read_only}
        assert dynamic == DYNAMIC.get(executable, set())

        # A read-only parameter refuses even its own value, and says why.
        read_only = sorted(set(names) - dynamic)
        current = _call(client, GetParameters, f"/{name}/get_parameters",
                        GetParameters.Request(names=read_only)).values
        request = SetParameters.Request(
            parameters=[ParameterMsg(name=n, value=v) for n, v in zip(read_only, current, strict=True)])
        results = _call(client, SetParameters, f"/{name}/set_parameters", request).results
        accepted = [n for n, r in zip(read_only, results, strict=True) if r.successful or "read-only" not in r.reason]
        assert not accepted, f"{name}: read-only parameters not refused as read-only: {accepted}"

        # A range is enforced on a dynamic parameter (camera_node's reconnect_period_s).
        for n in sorted(dynamic):
            ranges = descriptors[n].floating_point_range
            if ranges and math.isfinite(ranges[0].from_value):
                value = ParameterMsg(name=n).value
                value.type, value.double_value = ParameterType.PARAMETER_DOUBLE, ranges[0].from_value - 1.0
                result = _call(client, SetParameters, f"/{name}/set_parameters",
                               SetParameters.Request(parameters=[ParameterMsg(name=n, value=value)])).results[0]
                assert not result.successful and "out of range" in result.reason, result

        # Every value a shipped config sets lies inside the declared range.
        outside = []
        for where, key, value in _shipped_values(executable):
            d = descriptors.get(key)
            bounds = (d.floating_point_range or d.integer_range) if d is not None else None
            if bounds and not min(bounds[0].from_value, bounds[0].to_value) <= value <= max(
                    bounds[0].from_value, bounds[0].to_value):
                outside.append(f"{where} {key}={value!r}")
        assert not outside, f"shipped values outside {name}'s declared ranges: {outside}"
    finally:
        client.close()
        executor.shutdown()
        spinner.join(timeout=5)
        node.destroy_node()
        for cleanup in cleanups:
            cleanup()


def test_a_value_outside_its_range_stops_the_node_naming_the_bound(ros_context):
    from robopin_ros.replay_node import ReplayNode

    with pytest.raises(ValueError, match=r"^parameter rate must be >= 0.0, got -1.0$"):
        ReplayNode(context=ros_context, parameter_overrides=_overrides(rate=-1.0))


def _planner_from_parameters_file(context, tmp: Path, source: str):
    """task_node started from real_xarm6's parameters file as bringup and the launch file write it, or from
    the hand-written config/task_node.yaml (rcl flattens its nested mappings)."""
    from robopin_ros.task_node import TaskNode

    params = REPO_ROOT / "config" / "task_node.yaml"
    if source == "system_file":
        params = tmp / "real_xarm6.params.yaml"
        params.write_text(yaml.safe_dump(load_system("real_xarm6").with_arguments({}, {}).ros_parameters_file()))
    return TaskNode(context=context, cli_args=["--ros-args", "--params-file", str(params)])


@pytest.mark.parametrize("source", ["system_file", "planner_yaml"])
def test_nested_settings_arrive_as_dotted_parameters_with_descriptors(ros_context, tmp_path, source):
    from robopin.settings import described
    from robopin.vlm.openai_backend import OpenAIBackendConfig

    node = _planner_from_parameters_file(ros_context, tmp_path, source)
    try:
        values = {name: node.get_parameter(name).value for name in
                  ("vlm.type", "vlm.base_url", "vlm.model", "vlm.timeout_s", "reasoning.max_steps",
                   "reasoning.view_roles.wrist", "workspace.min_xyz")}
        assert values["vlm.type"] == "openai" and values["vlm.base_url"] == "http://127.0.0.1:8000/v1"
        assert values["vlm.timeout_s"] == 60.0 and values["reasoning.max_steps"] == 8
        assert values["reasoning.view_roles.wrist"].startswith("camera on the robot's wrist")
        assert list(values["workspace.min_xyz"]) == [0.1, -0.5, -0.02]
        assert node.get_parameter("vlm").value == ""  # nothing travels as a YAML string any more
        # Each key is described by the chosen backend's config field (robopin.settings.key_setting).
        openai = described(OpenAIBackendConfig)
        descriptor = node.describe_parameter("vlm.base_url")
        assert descriptor.description == openai["base_url"].text and not descriptor.read_only
        assert node.describe_parameter("vlm.timeout_s").description == openai["timeout_s"].text
        assert "VLM backend" in node.describe_parameter("vlm.type").description  # the type picks; it is no field
        assert node._config.max_steps == 8 and node._config.workspace is not None
    finally:
        node.destroy_node()


def test_a_dotted_vlm_key_set_at_run_time_rebuilds_the_backend_and_a_bad_one_is_refused(ros_context):
    from robopin.vlm import register_backend

    register_backend("scripted", "tests.reasoning.stages")
    node = _planner(ros_context, None, [])
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    client = SpunNode("nested_parameter_client", ros_context)
    try:
        before = node._backend
        answer = "<think>y</think><answer>[]</answer>"
        value = ParameterMsg(name="vlm.texts").value
        value.type, value.string_array_value = ParameterType.PARAMETER_STRING_ARRAY, [answer]
        result = _call(client, SetParameters, f"/{node.get_name()}/set_parameters",
                       SetParameters.Request(parameters=[ParameterMsg(name="vlm.texts", value=value)])).results[0]
        assert result.successful, result.reason
        assert node._backend is not before and list(node._backend.config.texts) == [answer]

        bad = ParameterMsg(name="vlm.type").value
        bad.type, bad.string_value = ParameterType.PARAMETER_STRING, "no_such_backend"
        result = _call(client, SetParameters, f"/{node.get_name()}/set_parameters",
                       SetParameters.Request(parameters=[ParameterMsg(name="vlm.type", value=bad)])).results[0]
        assert not result.successful and "no_such_backend" in result.reason
        assert node.get_parameter("vlm.type").value == "scripted"
        assert list(node._backend.config.texts) == [answer]
    finally:
        client.close()
        executor.shutdown()
        spinner.join(timeout=5)
        node.destroy_node()
