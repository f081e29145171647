"""robopin's own frames beside the URDF's, as TF edges: ``base``, ``ee`` and the camera optical frames.

The URDF's own edges (fixed joints on /tf_static, movable joints per joint state) come from
:class:`robopin.robots.urdf.UrdfTree`. :func:`robopin_frame_transforms` adds the frames the rest of the
stack names: ``base`` (an identity child of the URDF's base link, so TF stays a tree), ``ee`` (the TCP,
child of the TCP link) and the camera optical frames from their mounts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from robopin.robots.urdf import FrameTransform

__all__ = ["robopin_frame_transforms"]

BASE_FRAME = "base"
EE_FRAME = "ee"


def robopin_frame_transforms(base_link: str, tcp_link: str, T_link_tcp: np.ndarray,
                             camera_mounts: Iterable[tuple[str, object]] = (),
                             depth_to_color: Mapping[str, np.ndarray] | None = None) -> list[FrameTransform]:
    """Static edges of robopin's frames: ``base`` under the URDF base link, ``ee`` under the TCP link, cameras.

    ``camera_mounts`` are ``(view, CameraMount)``: a static mount hangs ``<view>_optical`` off ``base``, a wrist
    mount off ``ee``. ``depth_to_color`` maps a view to ``T_color_depth`` of a depth imager not aligned to color
    (``<view>_depth_optical`` under ``<view>_optical``, the frame camera_node stamps unaligned depth with).
    """
    edges = [FrameTransform(base_link, BASE_FRAME, np.eye(4)),
             FrameTransform(tcp_link, EE_FRAME, np.asarray(T_link_tcp, dtype=np.float64))]
    for view, mount in camera_mounts:
        parent = BASE_FRAME if mount.kind == "static" else EE_FRAME
        edges.append(FrameTransform(parent, f"{view}_optical", np.asarray(mount.T_parent_cam, dtype=np.float64)))
    for view, T_color_depth in (depth_to_color or {}).items():
        edges.append(FrameTransform(f"{view}_optical", f"{view}_depth_optical", np.asarray(T_color_depth)))
    return edges
