"""The parameters of the nodes that read no core config of their own, one dataclass per node.

Each field is one ROS parameter of its node (:func:`robopin.settings.setting`: name, default, description,
range); the node declares exactly these (``robopin_ros.parameters.declare_settings``) and builds the dataclass
from what was given, and :data:`robopin.system.node_parameters.NODE_PARAMETERS` reads its rows from here, so a
parameter is written once. A mapping default is a nested setting (``options.robot``, ``calibrations.<view>``).
No rclpy here.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass, fields
from functools import cache
from typing import Any

from robopin.interfaces import (
    ACTION_FEEDBACK_SUFFIX,
    ACTION_STATUS_SUFFIX,
    ARM,
    CAMERA_ROOT,
    EXECUTE_TASK,
    JOINT_STATES,
    PICK_PLACE,
    PROJECT_POINTS,
    REASONING,
    REASONING_IMAGES,
    REASONING_MARKERS,
    REASONING_SEARCH,
    ROBOT_DESCRIPTION,
    TARGET_MARKERS,
    TARGETS,
    TF,
    TF_STATIC,
    WORKSPACE_CLOUD,
    action_status,
    camera_topic_patterns,
    reasoning_image,
)
from robopin.settings import described, setting

__all__ = [
    "DEFAULT_OUTPUT_DIR",
    "DEFAULT_TOPICS",
    "NODE_SETTINGS",
    "ArmDriverSettings",
    "RecorderSettings",
    "ReplaySettings",
    "StatePublisherSettings",
    "settings_from",
    "settings_parameters",
]

DEFAULT_OUTPUT_DIR = "trials/bags"
# Relative to the recorder's namespace, as the nodes name them (a leading '/' would record outside it).
DEFAULT_TOPICS = [
    *camera_topic_patterns(),  # with depth/image_rect_raw and depth/camera_info of views with align_depth:=false
    JOINT_STATES, ARM.ee_pose, REASONING, REASONING_SEARCH, REASONING_IMAGES, REASONING_MARKERS, TARGETS,
    TARGET_MARKERS, WORKSPACE_CLOUD, f"*{ACTION_FEEDBACK_SUFFIX}", f"*{ACTION_STATUS_SUFFIX}",
    TF_STATIC, TF, ROBOT_DESCRIPTION,
]
DEFAULT_FLUSH_INTERVAL_S = 1.0
"""How often the bag writer closes and flushes its MCAP chunk (the worst-case loss of a killed recorder)."""


@dataclass
class ArmDriverSettings:
    """arm_driver_node: one arm backend served as FollowJointTrajectory, GripperCommand and robopin's services."""

    backend: str = setting("sim", "arm backend: sim, xarm or franka")
    options: dict = setting({}, "the backend's arm config (robot, ip, gripper, dry_run, ...)")
    prefix: str = setting(ARM.prefix, "name prefix of the driver's actions, services and ee_pose topic")
    base_frame: str = setting("base", "frame_id of the published end-effector pose")
    enable_on_connect: bool = setting(True, "enable the arm (servo on) after each connect")
    reconnect_period_s: float = setting(2.0, "seconds between connect attempts while disconnected (> 0)", min=0.0)
    feedback_rate_hz: float = setting(20.0, "trajectory action feedback rate in Hz (> 0)", min=0.0)
    state_rate_hz: float = setting(50.0, "joint state and ee_pose publish rate in Hz (> 0)", min=0.0)
    joint_states_topic: str = setting(JOINT_STATES, "topic the joint states are published on")
    ee_pose_topic: str = setting("", "topic the TCP pose is published on (empty: <prefix>/ee_pose)")

    def __post_init__(self) -> None:
        if not (self.state_rate_hz > 0 and self.reconnect_period_s > 0 and self.feedback_rate_hz > 0):
            raise ValueError("state_rate_hz, reconnect_period_s and feedback_rate_hz must be > 0")


@dataclass
class RecorderSettings:
    """recorder_node: one MCAP bag per task of the matching topics."""

    output_dir: str = setting(DEFAULT_OUTPUT_DIR, "folder the per-task bags are written to")
    topics: list = setting(DEFAULT_TOPICS, "topic names or glob patterns recorded")
    task_status_topic: str = setting(action_status(EXECUTE_TASK),
                                     "action status topic whose goals start and end a task's bag")
    discovery_period_s: float = setting(0.5, "seconds between searches for new matching topics (> 0)", min=0.0)
    queue_size: int = setting(2000, "messages buffered for the bag writer thread (0: unbounded)", min=0)
    sensor_reliability: str = setting("reliable", "QoS reliability of sensor subscriptions: reliable or best_effort")
    flush_interval_s: float = setting(
        DEFAULT_FLUSH_INTERVAL_S,
        "worst-case loss of a killed recorder: the MCAP chunk is closed and flushed this often, seconds (> 0)",
        min=0.0)
    robot: str = setting(
        "", "robot description name (panda, xarm6, ...) for the tool path of planned trajectories (empty: none)")
    parameter_nodes: list = setting(
        ["projection_node"],
        "nodes whose parameters every bag carries (what a replay needs to project as the live node did)")
    result_wait_s: float = setting(
        5.0, "a task's bag closes once the results still being fetched are written, or after this many seconds",
        min=0.0)
    views: list = setting([""], "camera views whose topics (cameras.<view>.*) are recorded (empty: cameras/*)")

    def __post_init__(self) -> None:
        if self.sensor_reliability not in ("reliable", "best_effort"):
            raise ValueError(f"sensor_reliability must be reliable or best_effort, got {self.sensor_reliability!r}")


@dataclass
class ReplaySettings:
    """replay_node: a recorded bag published again, on its own clock."""

    bag: str = setting("", "path of the bag to replay")
    rate: float = setting(1.0, "playback speed factor (0: as fast as possible)", min=0.0)
    loop: bool = setting(False, "replay again from the start when the bag ends")
    start_offset_s: float = setting(0.0, "seconds into the bag to start from", min=0.0)
    topics: list = setting([""], "topics to replay (empty: all)")
    exclude: list = setting([""], "topics not to replay")


@dataclass
class StatePublisherSettings:
    """state_publisher_node: /robot_description, /tf_static (arm and camera mounts) and /tf per joint state."""

    robot: str = setting("panda", "robot description name (panda, fr3, xarm6, ...) whose URDF is published")
    views: list = setting(["static", "wrist"], "camera views whose mount frames go on /tf_static")
    calibrations: dict = setting({}, "view -> camera mount; overrides sim_world and calibration_dir")
    calibration_dir: str = setting("calibration", "folder of <view>.yaml camera mounts")
    sim_world: str = setting("", "simulated world whose ground-truth camera mounts are used (empty: none)")
    unaligned_depth: dict = setting({}, "view -> T_color_depth: <view>_depth_optical goes under <view>_optical")
    joint_states_topic: str = setting(JOINT_STATES, "topic of the arm's joint states")


@dataclass
class MotionPlannerNodeSettings:
    """motion_planner_node's own parameters; the rest are fields of SceneConfig, GraspConfig, PickPlaceSettings."""

    robot: str = setting("panda", "robot description name (panda, fr3, xarm6, ...)")
    planner: dict = setting({"type": "roboplan"}, "motion planner config; type: roboplan, ompl (CPU) or curobo (GPU)")
    workspace: dict = setting({"min_xyz": [0.1, -0.6, -0.05], "max_xyz": [0.9, 0.6, 0.8]},
                              "workspace box {min_xyz, max_xyz} in the base frame, metres; "
                              "targets outside are refused")
    table_height_m: float = setting(0.0, "table surface height in the base frame, metres "
                                         "(nan: no table collision plane)")
    max_joint_state_age_s: float = setting(1.0, "a joint state older than this many seconds refuses the goal", min=0.0)
    execution_timeout_s: float = setting(
        60.0, "seconds a trajectory may run (at least 3x its duration) before it is canceled", min=0.0)
    driver_wait_s: float = setting(5.0, "seconds to wait for the driver's action servers", min=0.0)
    joint_states_topic: str = setting(JOINT_STATES, "topic of the arm's joint states")
    cloud_topic: str = setting(WORKSPACE_CLOUD, "topic of the workspace obstacle cloud (PointCloud2)")
    execute_action: str = setting(ARM.follow_joint_trajectory,
                                  "FollowJointTrajectory action the trajectories are sent to")
    gripper_action: str = setting(ARM.gripper_cmd, "GripperCommand action the gripper goals are sent to")

    @property
    def table(self) -> float | None:
        """The table height, None for no table (nan)."""
        return None if math.isnan(self.table_height_m) else float(self.table_height_m)


@dataclass
class TaskNodeSettings:
    """task_node: language instructions through the reasoning loop (ExecuteTask, Instruct)."""

    views: list = setting(["static", "wrist"],
                          "camera view names in img_idx order (same order as projection_node's views)")
    target_frame: str = setting("base", "frame the 3D targets and motion goals are expressed in")
    service_timeout_s: float = setting(
        10.0, "seconds to wait for a ProjectPoints reply, or for the PickPlace action to be found", min=0.0)
    ready_wait_s: float = setting(
        60.0, "seconds a task waits for a starting stack to be ready (every topic recorded) before it is refused "
        "with not_ready", min=0.0)
    motion_timeout_s: float = setting(
        120.0, "a PickPlace goal running longer than this many seconds is canceled (motion_timeout)", min=0.0)
    velocity_scale: float = setting(
        0.0, "fraction of the configured maximum velocity, 0..1 (0: the motion planner's default)", min=0.0, max=1.0)
    publish_images: bool = setting(True, f"publish the PinCoT drawn on each view on {reasoning_image('<view>')}")
    project_service: str = setting(PROJECT_POINTS, "ProjectPoints service of the projection node")
    pick_place_action: str = setting(PICK_PLACE, "PickPlace action of the motion planner")
    sync_tolerance_s: float = setting(0.02, "largest stamp spread inside one multi-view snapshot, seconds", min=0.0)
    max_frame_age_s: float = setting(
        0.5, "frames older than this many seconds refuse the task with stale_frame", min=0.0)
    # Applied at run time: the node rebuilds its backend and config while no task runs.
    vlm: dict = setting({"type": "openai"}, "VLM backend config, with its type (openai, oracle, ...)", dynamic=True)
    reasoning: dict = setting({}, "reasoning config (mode, max_steps, reasoner, ...)", dynamic=True)
    workspace: dict = setting({}, "workspace box {min_xyz, max_xyz} in target_frame, metres (none: no box)",
                              dynamic=True)
    # Simulated systems only: the loop's pin, answer and plan accuracy against the world's ground truth.
    ground_truth: dict = setting({}, "ground-truth source, e.g. {type: sim, world: workcell} (none: a real cell)")
    snapshot_wait_s: float = setting(1.0, "seconds a task waits for a usable snapshot before refusing", min=0.0)
    settle_s: float = setting(
        0.1, "after a motion, only frames captured this many seconds after it ended count", min=0.0)
    ready_nodes: list = setting(
        [""], "nodes of this stack, each in a process of its own (ros2 launch), whose ~/ready must answer success "
        "before a task runs (empty: tasks run at once, or when robopin up releases them)")


@dataclass
class ProjectionNodeSettings:
    """projection_node's own parameters; the rest are fields of DepthConfig, CrossViewConfig, ProjectionConfig."""

    views: list = setting(["static"], "camera view names in img_idx order (0, 1, ...)")
    target_frame: str = setting("base", "frame the 3D targets are expressed in")
    camera_prefix: str = setting(CAMERA_ROOT, "topic prefix of the camera views (<prefix>/<view>/...)")
    calibration_dir: str = setting("calibration",
                                   "folder of <view>.yaml camera mounts, used for views missing from calibrations")
    calibrations: dict = setting({}, "view -> camera mount {parent_frame, matrix | translation + rpy}; overrides "
                                 "calibration_dir")
    workspace: dict = setting({}, "workspace box {min_xyz, max_xyz} in target_frame, metres; points outside are "
                              "refused (none: no box)")
    unaligned_depth: dict = setting({}, "view -> T_color_depth for cameras whose depth is not aligned to color")
    sync_tolerance_s: float = setting(
        0.02, "largest stamp difference between a view's depth, camera_info and color, seconds", min=0.0)
    # Views of one snapshot differ by up to the task node's sync tolerance.
    stamp_tolerance_s: float = setting(0.1, "how far before a request's stamp a view's frame may be, seconds",
                                       min=0.0)
    frame_history_s: float = setting(10.0, "seconds of frames kept for requests that name a stamp", min=0.0)
    sync_color: bool = setting(False, "also require a color image synced to each depth frame")
    ee_pose_topic: str = setting(ARM.ee_pose, "topic of the end-effector pose in the base frame (wrist view poses)")
    joint_states_topic: str = setting(JOINT_STATES, "topic of the arm's joint states")
    robot_description: str = setting(
        "", "robot description name (panda, xarm6, ...) whose kinematics give wrist poses from joint states "
        "(empty: ee_pose only)")
    cloud_voxel_m: float = setting(0.01, "workspace cloud voxel size, metres", min=0.0)
    cloud_period_s: float = setting(0.0, "workspace cloud publish period, seconds (0: no cloud)", min=0.0)
    cloud_views: list = setting([""], "views the workspace cloud is built from (empty: all views)")
    view_priority: list = setting([""], "view names, most trusted first (fusion_policy prefer_view)")


@dataclass
class CameraNodeSettings:
    """camera_node's own parameters; name, width, height and fps are CameraConfig's."""

    backend: str = setting("realsense", "camera backend: realsense, zed, sim or bag")
    # Serials are digits: any type lets `-p serial:=123456` through (as an int) instead of failing.
    serial: str = setting("", "device serial number (empty: the only connected device)", any_type=True)
    filters: list = setting([""], "depth post-processing filters of the backend, in order")
    playback_file: str = setting("", "RealSense .db3 (or .bag) recording played instead of a device "
                                     "(empty: a live device)")
    bag_path: str = setting("", "bag backend: the bag directory or .mcap/.db3 file frames are read from")
    topic_prefix: str = setting("", "bag backend: topic prefix of the view in the bag (empty: /cameras/<name>)")
    options: dict = setting({}, "any other option of the camera backend")
    # realsense-ros's align_depth.enable: false publishes depth/image_rect_raw + depth/camera_info in the depth
    # imager's frame instead of registering every frame to color (RealSense backend only).
    align_depth: bool = setting(
        True, "register depth to color in every frame (false: publish depth/image_rect_raw; RealSense only)")
    # Applied to the running reconnect loop.
    reconnect_period_s: float = setting(1.0, "seconds between reconnect attempts after a failure (> 0)", min=0.0,
                                        dynamic=True)
    diagnostics_period_s: float = setting(1.0, "seconds between /diagnostics messages (> 0)", min=0.0)


@dataclass
class CalibrationNodeSettings:
    """calibration_node: capture, solve, store and verify one camera's hand-eye calibration."""

    name: str = setting("wrist", "camera view name (default topics /cameras/<name>/..., output "
                                 "<output_dir>/<name>.yaml)")
    kind: str = setting("eye_in_hand", "eye_in_hand (wrist camera) or eye_to_hand (static camera)")
    camera_topic_prefix: str = setting(
        "", "topic prefix of the camera's color image and info (empty: cameras.<name>.prefix, else the driver's: "
        "cameras/<name>)")
    board: dict = setting({}, "the calibration board (type, squares_x, square_length_m, ...)")
    detection: dict = setting({}, "the board detection settings")
    method: str = setting("auto", "hand-eye method: auto or tsai, park, horaud, andreff, daniilidis, shah, li")
    output_dir: str = setting("calibration", "folder the solved <name>.yaml calibration is written to")
    child_frame: str = setting("", "child frame of the stored mount (empty: <name>_optical)")
    camera_serial: str = setting("", "camera serial stored with the calibration and checked at verify")
    frame_timeout_s: float = setting(10.0, "seconds to wait for a camera frame before a capture fails", min=0.0)
    settle_s: float = setting(0.3, "seconds the arm rests after a guided move before a frame counts", min=0.0)
    velocity_scale: float = setting(
        0.2, "guided capture velocity as a fraction of the planner's maximum, 0..1", min=0.0, max=1.0)
    verify_pose_count: int = setting(3, "guided poses re-measured by verify", min=1)
    min_center_height_m: float = setting(
        0.2, "eye_to_hand: generated board centres lower than this base z are drawn again, metres")
    board_pose: dict = setting({}, "guided capture: board pose {translation, rpy}, T_base_board (eye_in_hand) or "
                                   "T_ee_board (eye_to_hand)")
    nominal_mount: dict = setting({}, "guided capture: nominal camera mount, T_ee_cam (eye_in_hand) or T_base_cam "
                                      "(eye_to_hand)")
    arm: dict = setting({}, "arm backend config {type, ...} for guided capture (none: manual, poses from "
                            "ee_pose_topic)")
    planner: dict = setting({}, "motion planner settings of the guided capture (type defaults to roboplan)")
    table_height_m: float = setting(0.0, "table height in the base frame, metres: an obstacle for guided moves")
    # A frame stamped after the arm settled may have been exposed (or, in the simulator, rendered) partly before.
    skip_frames: int = setting(
        1, "frames stamped after the arm settled that are skipped (partly exposed before)", min=0)
    ee_pose_topic: str = setting(ARM.ee_pose, "end-effector pose topic in manual capture")
    keyboard: bool = setting(False, "read keys from the terminal: Enter capture, s solve, v verify, g guided, q quit")

    def __post_init__(self) -> None:
        if self.kind not in ("eye_in_hand", "eye_to_hand"):
            raise ValueError(f"kind must be eye_in_hand (wrist camera) or eye_to_hand (static camera), "
                             f"got {self.kind!r}")


NODE_SETTINGS: dict[str, tuple[str, ...]] = {
    "arm_driver_node": ("robopin.system.node_settings:ArmDriverSettings",),
    "calibration_node": ("robopin.system.node_settings:CalibrationNodeSettings",
                         "robopin.calibration.poses:PoseGeneratorConfig"),
    "camera_node": ("robopin.system.node_settings:CameraNodeSettings", "robopin.cameras.base:CameraConfig"),
    "motion_planner_node": ("robopin.system.node_settings:MotionPlannerNodeSettings",
                            "robopin.motion.scene:SceneConfig", "robopin.motion.grasps:GraspConfig",
                            "robopin.motion.pick_place_task:PickPlaceSettings"),
    "projection_node": ("robopin.system.node_settings:ProjectionNodeSettings", "robopin.geometry.depth:DepthConfig",
                        "robopin.geometry.crossview:CrossViewConfig", "robopin.geometry.projection:ProjectionConfig"),
    "recorder_node": ("robopin.system.node_settings:RecorderSettings",),
    "replay_node": ("robopin.system.node_settings:ReplaySettings",),
    "state_publisher_node": ("robopin.system.node_settings:StatePublisherSettings",),
    "task_node": ("robopin.system.node_settings:TaskNodeSettings",),
}
"""Executable -> the dataclasses (``module:Class``, imported when asked for) whose described fields are all of
its node's parameters."""


@cache
def node_settings(executable: str) -> tuple[type, ...]:
    """The settings dataclasses of ``executable`` (empty for a node that declares its parameters by hand)."""
    classes = []
    for path in NODE_SETTINGS.get(executable, ()):
        module, _, name = path.partition(":")
        classes.append(getattr(importlib.import_module(module), name))
    return tuple(classes)


def settings_parameters(config: Any) -> frozenset[str]:
    """The parameter names of a settings dataclass's described fields."""
    return frozenset(about.parameter or name for name, about in described(config).items())


def settings_from(config: type, values: dict[str, Any]) -> Any:
    """``config`` built from the declared values (``{field: value}``); a list parameter's empty entries (ROS
    has no empty string array default) are dropped."""
    kinds = {f.name: f.type for f in fields(config)}
    cleaned = {k: ([x for x in v if x] if kinds.get(k) == "list" else v) for k, v in values.items()}
    return config(**cleaned)
