"""Every topic, service and action name of a robopin graph, grouped by the node that publishes or serves it.

Nodes, the task client, the operator console, the recorder, replay and the system checks all take their
names from here, so a name is written once (nav2_simple_commander does the same for its actions, each named
once beside its client). Names are relative, so they resolve under a node's namespace
(:mod:`robopin.system.names`); the one global name is :data:`DIAGNOSTICS_TOPIC`. ``~/`` names are private to
the node that serves them. A bag holds names as the root namespace has them (``/`` + the relative name).

The message types are robopin_interfaces' (``PinnedReasoning``, ``ExecuteTask``, ...) and the standard
packages'; the comment beside each name says which. Camera topics follow the layout of the driver that
publishes them: :func:`view_topics` (re-exported from :mod:`robopin.cameras.topics`) resolves a view's names.
No rclpy here: the core imports this module too.
"""

from __future__ import annotations

import dataclasses

from robopin.cameras.topics import CAMERA_ROOT, ViewTopics, camera_topic_patterns, view_topics

__all__ = [
    "ACTION_FEEDBACK_SUFFIX",
    "ACTION_RESULT_SUFFIX",
    "ACTION_STATUS_SUFFIX",
    "ARM",
    "ARM_PREFIX",
    "CALIBRATION_CAPTURE",
    "CALIBRATION_CLEAR",
    "CALIBRATION_RUN_GUIDED",
    "CALIBRATION_SOLVE",
    "CALIBRATION_VERIFY",
    "CAMERA_ROOT",
    "DIAGNOSTICS_TOPIC",
    "EXECUTE_TASK",
    "INSTRUCT",
    "JOINT_STATES",
    "MOVE_TO_POSE",
    "NODE_PARAMETERS_PREFIX",
    "PICK_PLACE",
    "PLANNED_PATH_MARKERS",
    "PLANNED_TRAJECTORY",
    "PROCESS_PROBE_PREFIX",
    "PROJECT_POINTS",
    "READY",
    "REASONING",
    "REASONING_IMAGES",
    "REASONING_MARKERS",
    "REASONING_SEARCH",
    "RECORDER_START",
    "RECORDER_STOP",
    "ROBOPIN_ROOT",
    "ROBOT_DESCRIPTION",
    "TARGETS",
    "TARGET_MARKERS",
    "TASK_CLIENT_HEARTBEAT",
    "TASK_SERVER_HEARTBEAT",
    "TF",
    "TF_STATIC",
    "WORKSPACE_CLOUD",
    "ArmNames",
    "ViewTopics",
    "action_cancel_goal",
    "action_feedback",
    "action_get_result",
    "action_result",
    "action_status",
    "arm_names",
    "camera_topic_patterns",
    "pinned_annotations",
    "ready_service",
    "reasoning_image",
    "view_topics",
]

ROBOPIN_ROOT = "robopin"
"""First token of every name robopin itself makes up (the others follow ROS conventions: tf, joint_states)."""

# ----- every node ---------------------------------------------------------------------------------------------
READY = "~/ready"
"""std_srvs/Trigger, served by every robopin node: success once the node can do its work (robopin_ros.runtime)."""

# ----- arm_driver_node (names under its ``prefix`` parameter) --------------------------------------------------
ARM_PREFIX = f"{ROBOPIN_ROOT}/arm"
"""Default ``prefix`` of arm_driver_node: its actions, services and ee_pose topic are under it."""
JOINT_STATES = "joint_states"
"""sensor_msgs/JointState, published by arm_driver_node (ros2_control's joint_state_broadcaster name)."""


@dataclasses.dataclass(frozen=True)
class ArmNames:
    """The names arm_driver_node creates under ``prefix`` (its parameter; an external controller's may differ)."""

    prefix: str

    @property
    def ee_pose(self) -> str:
        """geometry_msgs/PoseStamped: the TCP pose in the base frame."""
        return f"{self.prefix}/ee_pose"

    @property
    def execute_trajectory(self) -> str:
        """robopin_interfaces/action/ExecuteTrajectory."""
        return f"{self.prefix}/execute_trajectory"

    @property
    def follow_joint_trajectory(self) -> str:
        """control_msgs/action/FollowJointTrajectory (joint_trajectory_controller's name)."""
        return f"{self.prefix}/follow_joint_trajectory"

    @property
    def gripper_cmd(self) -> str:
        """control_msgs/action/GripperCommand (gripper_action_controller's name)."""
        return f"{self.prefix}/gripper_cmd"

    @property
    def enable(self) -> str:
        """std_srvs/SetBool: servo on or off."""
        return f"{self.prefix}/enable"

    @property
    def stop(self) -> str:
        """std_srvs/Trigger: stop the arm now."""
        return f"{self.prefix}/stop"

    @property
    def recover(self) -> str:
        """std_srvs/Trigger: clear a fault."""
        return f"{self.prefix}/recover"

    def all_names(self) -> tuple[str, ...]:
        """Every name under the prefix: the ee_pose topic, the actions and the services."""
        return (self.ee_pose, self.execute_trajectory, self.follow_joint_trajectory, self.gripper_cmd,
                self.enable, self.stop, self.recover)


def arm_names(prefix: str = ARM_PREFIX) -> ArmNames:
    """The arm driver's names under ``prefix`` (a trailing '/' is dropped)."""
    return ArmNames(prefix.rstrip("/"))


ARM = arm_names()
"""The arm driver's names under its default prefix."""

# ----- camera_node: see view_topics() and camera_topic_patterns() (cameras/<view>/color/image_raw, ...) -----------
DIAGNOSTICS_TOPIC = "/diagnostics"
"""diagnostic_msgs/DiagnosticArray, published by camera_node and arm_driver_node. Global on purpose:
diagnostic_updater publishes on the absolute /diagnostics and diagnostic_aggregator reads that one topic for
the whole graph (ros/diagnostics, diagnostic_updater.hpp); each status names its robot's namespace."""


def pinned_annotations(view: str) -> str:
    """foxglove_msgs/ImageAnnotations of ``view``'s reasoning, beside its color image; written into bags only."""
    return f"{view_topics(view).prefix}/color/pinned_annotations"


# ----- state_publisher_node -------------------------------------------------------------------------------------
ROBOT_DESCRIPTION = "robot_description"
"""std_msgs/String, latched: the URDF (robot_state_publisher's name)."""
TF = "tf"
"""tf2_msgs/TFMessage: the arm's moving frames. Relative, as nav2_bringup remaps /tf to tf per robot."""
TF_STATIC = "tf_static"
"""tf2_msgs/TFMessage, latched: fixed frames and the camera mounts."""

# ----- projection_node ------------------------------------------------------------------------------------------
PROJECT_POINTS = f"{ROBOPIN_ROOT}/project_points"
"""robopin_interfaces/srv/ProjectPoints: pixels of a snapshot to 3-D points in the base frame."""
TARGET_MARKERS = f"{ROBOPIN_ROOT}/targets/markers"
"""visualization_msgs/MarkerArray: the projected targets, for RViz and the console."""
WORKSPACE_CLOUD = f"{ROBOPIN_ROOT}/workspace_cloud"
"""sensor_msgs/PointCloud2: the depth views fused into the base frame (the motion planner's obstacles)."""

# ----- task_node ---------------------------------------------------------------------------------------------
INSTRUCT = f"{ROBOPIN_ROOT}/instruct"
"""robopin_interfaces/srv/Instruct: run an instruction as a task (a goal of EXECUTE_TASK)."""
EXECUTE_TASK = f"{ROBOPIN_ROOT}/execute_task"
"""robopin_interfaces/action/ExecuteTask: one instruction, observed, reasoned, planned and executed."""
TASK_CLIENT_HEARTBEAT = f"{EXECUTE_TASK}/_heartbeat/client"
"""robopin_interfaces/msg/TaskHeartbeat from a task's client (the goal it follows); task_node cancels one gone quiet."""
TASK_SERVER_HEARTBEAT = f"{EXECUTE_TASK}/_heartbeat/server"
"""robopin_interfaces/msg/TaskHeartbeat from task_node (the goal it runs); a client gives up on a server gone quiet."""
REASONING = f"{ROBOPIN_ROOT}/reasoning"
"""robopin_interfaces/msg/PinnedReasoning: each step's VLM answer with its points and views."""
REASONING_SEARCH = f"{REASONING}/search"
"""std_msgs/String, JSON: how a test-time search (E-TTS) chose each step's answer (every trace, verdict, pair,
selection; ``robopin.reasoning.loop.ReasoningRecord.search``) with the task id and step. Nothing for one sample."""
REASONING_MARKERS = f"{REASONING}/markers"
"""visualization_msgs/MarkerArray: the reasoning's targets."""
TARGETS = f"{ROBOPIN_ROOT}/targets"
"""robopin_interfaces/msg/Target3D: the grounded pick and place targets."""
REASONING_IMAGES = f"{REASONING}/*/image"
"""Glob of every view's reasoning_image() (what a recorder takes)."""


def reasoning_image(view: str) -> str:
    """sensor_msgs/Image: ``view`` with the step's PinCoT drawn on it."""
    return f"{REASONING}/{view}/image"


# ----- motion_planner_node --------------------------------------------------------------------------------------
PICK_PLACE = f"{ROBOPIN_ROOT}/motion/pick_place"
"""robopin_interfaces/action/PickPlace: plan and run a pick and a place."""
MOVE_TO_POSE = f"{ROBOPIN_ROOT}/motion/move_to_pose"
"""robopin_interfaces/action/MoveToPose: plan and run a move of the TCP to a pose."""

# ----- recorder_node --------------------------------------------------------------------------------------------
RECORDER_START = "~/start"
"""std_srvs/Trigger: start recording now (a task's goal starts a bag by itself)."""
RECORDER_STOP = "~/stop"
"""std_srvs/Trigger: close the bag being written."""
PLANNED_TRAJECTORY = f"{ROBOPIN_ROOT}/planned_trajectory"
"""trajectory_msgs/JointTrajectory, one per planned phase: written into bags from each PickPlace result."""
PLANNED_PATH_MARKERS = f"{PLANNED_TRAJECTORY}/markers"
"""visualization_msgs/MarkerArray: the planned tool path, written into bags beside PLANNED_TRAJECTORY."""
NODE_PARAMETERS_PREFIX = f"{ROBOPIN_ROOT}/parameters"
"""std_msgs/String (YAML) on ``<prefix>/<node>``: each recorded node's parameters, written into bags only."""

# ----- calibration_node -----------------------------------------------------------------------------------------
CALIBRATION_CAPTURE = "~/capture"
"""std_srvs/Trigger: take one calibration sample."""
CALIBRATION_RUN_GUIDED = "~/run_guided"
"""std_srvs/SetBool: start (true) or stop the guided capture."""
CALIBRATION_SOLVE = "~/solve"
"""std_srvs/Trigger: solve the mount from the samples and write it."""
CALIBRATION_VERIFY = "~/verify"
"""std_srvs/Trigger: check the solved mount against fresh samples."""
CALIBRATION_CLEAR = "~/clear"
"""std_srvs/Trigger: drop the samples."""

# ----- graph probes (robopin_ros.actions.ActionServers) -------------------------------------------------------
PROCESS_PROBE_PREFIX = "_robopin_process"
"""std_msgs/Empty, one per probe: its publisher's gid tells the graph which process this is (hidden: '_')."""

# ----- the names rcl_action derives from an action's name ------------------------------------------------------
ACTION_STATUS_SUFFIX = "/_action/status"
ACTION_FEEDBACK_SUFFIX = "/_action/feedback"
ACTION_RESULT_SUFFIX = "/_action/result"
"""Not an rcl_action name: the recorder writes each goal's result there (a bag has no services)."""


def action_status(action: str) -> str:
    """action_msgs/GoalStatusArray of ``action``'s goals."""
    return f"{action}{ACTION_STATUS_SUFFIX}"


def action_feedback(action: str) -> str:
    """``<Action>_FeedbackMessage`` of ``action``'s goals."""
    return f"{action}{ACTION_FEEDBACK_SUFFIX}"


def action_result(action: str) -> str:
    """``<Action>_GetResult_Response`` per finished goal, as the recorder writes it into a bag."""
    return f"{action}{ACTION_RESULT_SUFFIX}"


def action_get_result(action: str) -> str:
    """The ``<Action>_GetResult`` service of ``action``."""
    return f"{action}/_action/get_result"


def action_cancel_goal(action: str) -> str:
    """The action_msgs/srv/CancelGoal service of ``action``."""
    return f"{action}/_action/cancel_goal"


def ready_service(node: str) -> str:
    """The READY service of ``node`` (a node name, relative or absolute) as its peers call it."""
    return f"{node}/{READY.removeprefix('~/')}"
