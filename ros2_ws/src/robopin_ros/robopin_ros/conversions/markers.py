"""What RViz and Foxglove draw: visualization_msgs/MarkerArray of 3D targets and of planned tool paths."""

from __future__ import annotations

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Vector3
from std_msgs.msg import Header
from visualization_msgs.msg import Marker, MarkerArray

from robopin_ros.conversions.common import vector_to_point


def targets_to_marker_array(targets, frame_id: str, stamp: Time, namespace: str = "robopin_targets"):
    """Return a visualization_msgs/MarkerArray drawing targets: spheres (green valid, red refused),
    normal arrows, and text labels "id name" or "id: reason". The first marker clears the previous set.
    """
    markers = [Marker(action=Marker.DELETEALL, ns=namespace)]
    for index, target in enumerate(targets):
        if not np.all(np.isfinite(target.point)):
            continue
        header = Header(stamp=stamp, frame_id=frame_id)
        color = (0.1, 0.9, 0.2, 0.9) if target.valid else (0.95, 0.15, 0.1, 0.9)
        sphere = Marker(header=header, ns=namespace, id=3 * index, type=Marker.SPHERE, action=Marker.ADD)
        sphere.pose.position = vector_to_point(target.point)
        sphere.pose.orientation.w = 1.0
        sphere.scale = Vector3(x=0.015, y=0.015, z=0.015)
        sphere.color.r, sphere.color.g, sphere.color.b, sphere.color.a = color
        markers.append(sphere)
        if np.all(np.isfinite(target.normal)):
            arrow = Marker(header=header, ns=namespace, id=3 * index + 1, type=Marker.ARROW, action=Marker.ADD)
            arrow.points = [vector_to_point(target.point), vector_to_point(target.point + 0.05 * target.normal)]
            arrow.pose.orientation.w = 1.0
            arrow.scale = Vector3(x=0.004, y=0.008, z=0.01)
            arrow.color.r, arrow.color.g, arrow.color.b, arrow.color.a = color
            markers.append(arrow)
        label = Marker(header=header, ns=namespace, id=3 * index + 2, type=Marker.TEXT_VIEW_FACING,
                       action=Marker.ADD)
        label.pose.position = vector_to_point(target.point + np.array([0.0, 0.0, 0.03]))
        label.pose.orientation.w = 1.0
        label.scale.z = 0.02
        label.color.r = label.color.g = label.color.b = label.color.a = 1.0
        label.text = f"{target.id} {target.name}".strip() if target.valid else f"{target.id}: {target.reason}"
        markers.append(label)
    return MarkerArray(markers=markers)


def marker_array_to_targets(msg) -> list[dict]:
    """Read back what ``targets_to_marker_array`` drew: per target its id, label, base-frame point and
    whether it was valid (refused targets without a point are not drawn, so they are not here either).

    A client that only sees the marker topic (the trial runner) records with it where each pinned point
    went in 3D.
    """
    drawn: dict[int, dict] = {}
    for marker in msg.markers:
        if marker.action != Marker.ADD:
            continue
        entry = drawn.setdefault(marker.id // 3, {})
        if marker.type == Marker.SPHERE:
            p = marker.pose.position
            entry["point"] = [float(p.x), float(p.y), float(p.z)]
            entry["valid"] = bool(marker.color.g > marker.color.r)
            entry["frame"] = marker.header.frame_id
        elif marker.type == Marker.TEXT_VIEW_FACING:
            identifier, _, rest = marker.text.partition(" ")
            if identifier.endswith(":"):
                entry["id"], entry["reason"] = identifier[:-1], rest.strip()
            else:
                entry["id"], entry["name"] = identifier, rest.strip()
    return [drawn[k] for k in sorted(drawn) if "point" in drawn[k]]


def trajectory_tool_paths(trajectories, description) -> list[np.ndarray]:
    """The TCP positions (N, 3) in the base frame along each trajectory_msgs/JointTrajectory (by joint name)."""
    paths = []
    for trajectory in trajectories:
        index = {name: i for i, name in enumerate(trajectory.joint_names)}
        if not all(name in index for name in description.joint_names):
            continue
        q = np.array([[point.positions[index[name]] for name in description.joint_names]
                      for point in trajectory.points], dtype=np.float64)
        paths.append(description.forward_kinematics_batch(q)[:, :3, 3] if len(q) else np.zeros((0, 3)))
    return paths


def tool_paths_to_marker_array(paths, frame_id: str, stamp: Time, namespace: str = "robopin_planned_path"):
    """A visualization_msgs/MarkerArray with one line strip per planned phase (RViz and Foxglove draw it)."""
    markers = [Marker(action=Marker.DELETEALL, ns=namespace)]
    for index, path in enumerate(paths):
        strip = Marker(header=Header(stamp=stamp, frame_id=frame_id), ns=namespace, id=index,
                       type=Marker.LINE_STRIP, action=Marker.ADD)
        strip.points = [vector_to_point(p) for p in path]
        strip.pose.orientation.w = 1.0
        strip.scale.x = 0.005
        hue = index / max(1, len(paths) - 1)
        strip.color.r, strip.color.g, strip.color.b, strip.color.a = 0.2 + 0.8 * hue, 0.4, 1.0 - 0.8 * hue, 0.9
        markers.append(strip)
    return MarkerArray(markers=markers)
