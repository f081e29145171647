"""Conversions between robopin's conventions and cuRobo's, in numpy (no torch, no cuRobo).

cuRobo poses are ``[x, y, z, qw, qx, qy, qz]`` (scalar-first quaternion); robopin uses 4x4 matrices
and ``[x, y, z, w]`` quaternions. World obstacles become cuRobo ``WorldConfig`` dictionaries; the
depth point cloud becomes occupancy voxels (cuboids) so the primitive checker can use it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from robopin.geometry.transforms import matrix_to_quaternion, quaternion_to_matrix
from robopin.motion.types import JointTrajectory, PlanStatus
from robopin.motion.world import CollisionWorld


def matrix_to_curobo_pose(T: NDArray[np.float64]) -> list[float]:
    """``[x, y, z, qw, qx, qy, qz]`` of a 4x4 pose."""
    T = np.asarray(T, dtype=np.float64)
    return [float(v) for v in T[:3, 3]] + [float(v) for v in matrix_to_quaternion(T[:3, :3], order="wxyz")]


def curobo_pose_to_matrix(pose: list[float] | NDArray[np.float64]) -> NDArray[np.float64]:
    """4x4 pose of ``[x, y, z, qw, qx, qy, qz]``."""
    values = np.asarray(pose, dtype=np.float64).reshape(7)
    T = np.eye(4)
    T[:3, :3] = quaternion_to_matrix(values[3:], order="wxyz")
    T[:3, 3] = values[:3]
    return T


def tcp_goal_to_link_goal(T_base_ee: NDArray[np.float64], T_link_tcp: NDArray[np.float64]) -> NDArray[np.float64]:
    """Pose of cuRobo's ee_link that puts the TCP at ``T_base_ee``, ``T_link_tcp`` being the TCP in
    the ee_link frame (cuRobo plans the ee_link)."""
    return np.asarray(T_base_ee, dtype=np.float64) @ np.linalg.inv(np.asarray(T_link_tcp, dtype=np.float64))


def world_to_curobo_dict(world: CollisionWorld, *, voxel_size_m: float, max_cuboids: int) -> tuple[dict[str, Any], int]:
    """A ``WorldConfig.from_dict`` mapping (every box, one cuboid per occupied cloud voxel), and how
    many voxels did not fit in ``max_cuboids`` (those farthest from the robot base are dropped)."""
    cuboids: dict[str, dict[str, list[float]]] = {}
    dropped = 0
    for box in world.boxes.values():
        cuboids[box.name] = {"dims": [float(s) for s in box.size_m], "pose": matrix_to_curobo_pose(box.T_base_box)}
    if world.points is not None and len(world.points):
        centers = occupied_voxel_centers(world.points, voxel_size_m)
        room = max(0, max_cuboids - len(cuboids))
        order = np.argsort(np.linalg.norm(centers, axis=1))[:room]
        dropped = len(centers) - len(order)
        for k, center in enumerate(centers[order]):
            cuboids[f"voxel_{k}"] = {
                "dims": [voxel_size_m] * 3,
                "pose": [float(center[0]), float(center[1]), float(center[2]), 1.0, 0.0, 0.0, 0.0],
            }
    return {"cuboid": cuboids}, dropped


def occupied_voxel_centers(points: NDArray[np.float64], voxel_size_m: float) -> NDArray[np.float64]:
    """Centres of the voxels (edge ``voxel_size_m``, grid anchored at the origin) holding any point."""
    keys = np.unique(np.floor(np.asarray(points, dtype=np.float64) / voxel_size_m).astype(np.int64), axis=0)
    return (keys + 0.5) * voxel_size_m


def attached_object_cuboid(world: CollisionWorld) -> dict[str, Any] | None:
    """The held object as a cuboid in the TCP frame (for ``attach_objects_to_robot``), or None."""
    if world.attached is None:
        return None
    return {"dims": list(world.attached.size_m), "pose": matrix_to_curobo_pose(world.attached.T_ee_object)}


# MotionGenStatus names (cuRobo v1) → robopin statuses.
_STATUS_BY_NAME = {
    "SUCCESS": PlanStatus.SUCCESS,
    "IK_FAIL": PlanStatus.IK_FAIL,
    "GRAPH_FAIL": PlanStatus.NO_PATH,
    "TRAJOPT_FAIL": PlanStatus.NO_PATH,
    "FINETUNE_TRAJOPT_FAIL": PlanStatus.NO_PATH,
    "DT_EXCEPTION": PlanStatus.TIME_PARAMETERIZATION_FAIL,
    "INVALID_START_STATE_JOINT_LIMITS": PlanStatus.START_OUTSIDE_LIMITS,
    "INVALID_START_STATE_WORLD_COLLISION": PlanStatus.START_IN_COLLISION,
    "INVALID_START_STATE_SELF_COLLISION": PlanStatus.START_IN_COLLISION,
    "INVALID_START_STATE_UNKNOWN_ISSUE": PlanStatus.START_IN_COLLISION,
    "INVALID_PARTIAL_POSE_COST_METRIC": PlanStatus.BACKEND_ERROR,
    # MotionGenStatus.INVALID_QUERY (motion_gen.py): the start state is out of limits or in collision for
    # cuRobo's sphere model, after robopin's mesh check passed it. Not "no path": the query was refused.
    "INVALID_QUERY": PlanStatus.START_IN_COLLISION,
}


def status_from_curobo(status: Any, success: bool) -> PlanStatus:
    """Map a cuRobo ``MotionGenStatus`` (enum, its name, or None) to a :class:`PlanStatus`."""
    if success:
        return PlanStatus.SUCCESS
    if status is None:
        return PlanStatus.NO_PATH
    name = getattr(status, "name", str(status)).split(".")[-1].upper()
    return _STATUS_BY_NAME.get(name, PlanStatus.NO_PATH)


def trajectory_from_curobo(
    joint_names: tuple[str, ...], curobo_joint_names: list[str], position, velocity, acceleration, *, dt_s: float
) -> JointTrajectory:
    """A :class:`JointTrajectory` from cuRobo's interpolated plan arrays (T×dof), reordered to ``joint_names``."""
    order = [list(curobo_joint_names).index(name) for name in joint_names]
    positions = np.asarray(position, dtype=np.float64).reshape(-1, len(curobo_joint_names))[:, order]
    velocities = np.asarray(velocity, dtype=np.float64).reshape(positions.shape[0], -1)[:, order]
    accelerations = np.asarray(acceleration, dtype=np.float64).reshape(positions.shape[0], -1)[:, order]
    times = np.arange(len(positions)) * float(dt_s)
    return JointTrajectory(joint_names, times, positions, velocities, accelerations)


__all__ = [
    "attached_object_cuboid",
    "curobo_pose_to_matrix",
    "matrix_to_curobo_pose",
    "occupied_voxel_centers",
    "status_from_curobo",
    "tcp_goal_to_link_goal",
    "trajectory_from_curobo",
    "world_to_curobo_dict",
]
