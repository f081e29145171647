"""3D targets ⇄ robopin_interfaces/Target3D (the ProjectPoints answer the motion planner picks from)."""

from __future__ import annotations

import math

import numpy as np
from builtin_interfaces.msg import Time
from robopin_interfaces.msg import Target3D
from std_msgs.msg import Header

from robopin.geometry import RefusalReason, Target
from robopin_ros.conversions.common import (
    point_to_vector,
    seconds_to_stamp,
    stamp_to_seconds,
    vector_to_point,
    vector_to_vector3,
)


def target_to_msg(target, frame_id: str = "base"):
    """Return a robopin.geometry.Target as robopin_interfaces/Target3D (NaN point/normal become zeros)."""
    point = target.point if np.all(np.isfinite(target.point)) else np.zeros(3)
    normal = target.normal if np.all(np.isfinite(target.normal)) else np.zeros(3)
    stamp = seconds_to_stamp(target.stamp_s) if math.isfinite(target.stamp_s) and target.stamp_s >= 0 else Time()
    reason = "" if target.valid else str(target.reason or "")
    return Target3D(
        header=Header(stamp=stamp, frame_id=frame_id),
        id=target.id,
        name=target.name,
        point=vector_to_point(point),
        normal=vector_to_vector3(normal),
        source_view=target.source_view,
        img_idx=int(target.img_idx),
        u=float(target.u),
        v=float(target.v),
        depth_m=float(target.depth_m),
        depth_spread_m=float(target.depth_spread_m),
        depth_valid_fraction=float(target.depth_valid_fraction),
        valid=bool(target.valid),
        reason=reason,
        detail=target.detail,
    )


def target3d_msg_to_target(msg):
    """Return robopin_interfaces/Target3D as robopin.geometry.Target (a zero normal becomes NaN)."""
    normal = point_to_vector(msg.normal)
    if not float(np.linalg.norm(normal)) > 1e-9:
        normal = np.full(3, np.nan)
    try:
        reason = RefusalReason(msg.reason) if msg.reason else None
    except ValueError:
        reason = msg.reason  # a reason this version does not know: keep its name
    stamp = stamp_to_seconds(msg.header.stamp)
    return Target(id=msg.id, name=msg.name, source_view=msg.source_view, img_idx=int(msg.img_idx),
                  u=float(msg.u), v=float(msg.v), point=point_to_vector(msg.point), normal=normal,
                  depth_m=float(msg.depth_m), depth_spread_m=float(msg.depth_spread_m),
                  depth_valid_fraction=float(msg.depth_valid_fraction), stamp_s=stamp if stamp > 0 else math.nan,
                  frame=msg.header.frame_id or "base", valid=bool(msg.valid), reason=reason,
                  detail=msg.detail)


def target3d_to_pick_point(msg) -> tuple[np.ndarray, np.ndarray | None]:
    """The point (m) and unit normal (None when zero) of a robopin_interfaces/Target3D."""
    normal = point_to_vector(msg.normal)
    norm = float(np.linalg.norm(normal))
    return point_to_vector(msg.point), (normal / norm if norm > 1e-9 else None)
