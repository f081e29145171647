"""Every conversion between ROS messages and robopin core types, one module per message family.

Nodes call these; the core library never sees a message. ``from robopin_ros.conversions import X`` works
for every public name of the family modules: ``common`` (stamps, durations, headers, points, poses),
``images`` (Image, CameraInfo, PointCloud2, camera frames), ``pincot`` (PinnedReasoning, Anchor,
AnswerPoint), ``targets`` (Target3D), ``markers`` (MarkerArray), ``trajectories`` (JointTrajectory),
``joint_states`` (JointState, TFMessage) and ``control`` (FollowJointTrajectory, JointTolerance).
"""

from robopin_ros.conversions.common import (
    duration_to_seconds,
    make_header,
    matrix_to_pose,
    point_to_vector,
    pose_stamped_to_seconds_and_matrix,
    pose_to_matrix,
    seconds_to_duration,
    seconds_to_stamp,
    stamp_to_seconds,
    vector_to_point,
    vector_to_vector3,
)
from robopin_ros.conversions.control import (
    follow_joint_trajectory_error_code,
    follow_joint_trajectory_result,
    resolve_joint_tolerances,
)
from robopin_ros.conversions.images import (
    camera_info_to_camera_model,
    camera_model_to_camera_info,
    color_to_image_msg,
    depth_camera_info,
    depth_optical_frame_id,
    depth_to_image_msg,
    frame_to_msgs,
    image_msg_to_color,
    image_msg_to_depth_m,
    msgs_to_frame,
    point_cloud_msg_to_points,
    point_cloud_to_msg,
)
from robopin_ros.conversions.joint_states import (
    frame_transforms_to_tf_message,
    joint_state_positions,
    joint_state_to_msg,
    msg_to_joint_state,
)
from robopin_ros.conversions.markers import (
    marker_array_to_targets,
    targets_to_marker_array,
    tool_paths_to_marker_array,
    trajectory_tool_paths,
)
from robopin_ros.conversions.pincot import (
    anchor_msg_to_point_request,
    anchor_to_msg,
    answer_point_to_msg,
    issue_to_msg,
    msg_to_trace,
    point_request_to_anchor_msg,
    reasoning_record_to_msg,
    trace_to_msg,
)
from robopin_ros.conversions.targets import (
    target3d_msg_to_target,
    target3d_to_pick_point,
    target_to_msg,
)
from robopin_ros.conversions.trajectories import (
    msg_to_trajectory,
    trajectory_point_msg,
    trajectory_to_msg,
)

# The names nodes call from before there was one trajectory type; both pairs are the one encoder and decoder.
arm_trajectory_to_msg = motion_trajectory_to_msg = trajectory_to_msg
msg_to_arm_trajectory = msg_to_motion_trajectory = msg_to_trajectory

__all__ = [
    "anchor_msg_to_point_request",
    "anchor_to_msg",
    "answer_point_to_msg",
    "arm_trajectory_to_msg",
    "camera_info_to_camera_model",
    "camera_model_to_camera_info",
    "color_to_image_msg",
    "depth_camera_info",
    "depth_optical_frame_id",
    "depth_to_image_msg",
    "duration_to_seconds",
    "follow_joint_trajectory_error_code",
    "follow_joint_trajectory_result",
    "frame_to_msgs",
    "frame_transforms_to_tf_message",
    "image_msg_to_color",
    "image_msg_to_depth_m",
    "issue_to_msg",
    "joint_state_positions",
    "joint_state_to_msg",
    "make_header",
    "marker_array_to_targets",
    "matrix_to_pose",
    "motion_trajectory_to_msg",
    "msg_to_arm_trajectory",
    "msg_to_joint_state",
    "msg_to_motion_trajectory",
    "msg_to_trace",
    "msg_to_trajectory",
    "msgs_to_frame",
    "point_cloud_msg_to_points",
    "point_cloud_to_msg",
    "point_request_to_anchor_msg",
    "point_to_vector",
    "pose_stamped_to_seconds_and_matrix",
    "pose_to_matrix",
    "reasoning_record_to_msg",
    "resolve_joint_tolerances",
    "seconds_to_duration",
    "seconds_to_stamp",
    "stamp_to_seconds",
    "target3d_msg_to_target",
    "target3d_to_pick_point",
    "target_to_msg",
    "targets_to_marker_array",
    "tool_paths_to_marker_array",
    "trace_to_msg",
    "trajectory_point_msg",
    "trajectory_to_msg",
    "trajectory_tool_paths",
    "vector_to_point",
    "vector_to_vector3",
]
