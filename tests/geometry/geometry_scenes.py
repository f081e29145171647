"""Analytic depth images for geometry tests: planes and boxes seen by a pinhole camera, exact to float."""

from __future__ import annotations

import numpy as np

from robopin.geometry import CameraModel

CAMERA = CameraModel(640, 480, 600.0, 600.0, 319.5, 239.5)


def plane_depth(camera: CameraModel, normal, offset_m: float) -> np.ndarray:
    """Depth (z) of the plane ``normal · p = offset_m`` (optical frame) at every pixel centre."""
    u, v = camera.pixel_centres()
    rays = camera.pixel_to_ray(u, v)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = offset_m / (rays @ np.asarray(normal, dtype=np.float64))
    z[~np.isfinite(z) | (z <= 0)] = np.nan
    return z.astype(np.float32)


def tilted_plane(tilt_rad: float, distance_m: float) -> tuple[np.ndarray, float]:
    """Unit normal (toward the camera) and offset of a plane tilted about the x axis at ``distance_m``."""
    n = np.array([0.0, np.sin(tilt_rad), -np.cos(tilt_rad)])
    return n, float(n @ [0.0, 0.0, distance_m])


def step_depth(camera: CameraModel, near_m: float, far_m: float, edge_u: int) -> np.ndarray:
    """Fronto-parallel foreground (columns < edge_u) at near_m, background at far_m."""
    d = np.full((camera.height, camera.width), far_m, dtype=np.float32)
    d[:, :edge_u] = near_m
    return d


def render_boxes_on_table(camera: CameraModel, T_base_cam: np.ndarray, boxes) -> np.ndarray:
    """Exact depth of boxes resting on the table plane z = 0 (base frame), by ray casting.

    ``boxes``: iterable of ``(centre_xy, yaw_rad, (size_x, size_y, size_z))``. Background beyond the
    table is NaN; the table is unbounded.
    """
    u, v = camera.pixel_centres()
    rays_cam = camera.pixel_to_ray(u, v).reshape(-1, 3)
    R, origin = T_base_cam[:3, :3], T_base_cam[:3, 3]
    dirs = rays_cam @ R.T  # ray direction in base per unit of optical z
    with np.errstate(divide="ignore", invalid="ignore"):
        s_best = -origin[2] / dirs[:, 2]  # table plane z = 0
    s_best[~(s_best > 0)] = np.inf
    for centre_xy, yaw, size in boxes:
        c, s = np.cos(yaw), np.sin(yaw)
        R_box = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        centre = np.array([centre_xy[0], centre_xy[1], size[2] / 2.0])
        o = (origin - centre) @ R_box  # ray origin and directions in the box frame
        d = dirs @ R_box
        half = np.asarray(size) / 2.0
        with np.errstate(divide="ignore", invalid="ignore"):
            t1 = (-half - o) / d
            t2 = (half - o) / d
        t_near = np.nanmax(np.minimum(t1, t2), axis=1)
        t_far = np.nanmin(np.maximum(t1, t2), axis=1)
        hit = (t_near <= t_far) & (t_near > 0)
        s_best = np.where(hit & (t_near < s_best), t_near, s_best)
    depth = np.where(np.isfinite(s_best), s_best, np.nan)  # s is optical z since ray z = 1
    return depth.reshape(camera.height, camera.width).astype(np.float32)


def look_at(eye, target, up=(0.0, 0.0, 1.0)) -> np.ndarray:
    """``T_base_cam`` of an optical frame at ``eye`` looking at ``target``."""
    eye = np.asarray(eye, dtype=np.float64)
    z = np.asarray(target, dtype=np.float64) - eye
    z /= np.linalg.norm(z)
    x = np.cross(z, up)
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    T = np.eye(4)
    T[:3, :3] = np.column_stack([x, y, z])
    T[:3, 3] = eye
    return T


def pybullet_image_point(
    T_base_cam: np.ndarray, projection_matrix, width: int, height: int, p_base
) -> tuple[float, float]:
    """Where pybullet's TinyRenderer shows base point ``p_base``, in robopin image points (centres at +0.5).

    Computed with OpenGL maths from pybullet's own projection matrix (independent of CameraModel):
    clip = P · V · p, window coordinates from NDC, then TinyRenderer's measured sampling offset (pixel
    (i, j) shows the ideal image at (i, j + 1), so a point appears half a pixel right and up).
    """
    T_base_gl = T_base_cam @ np.diag([1.0, -1.0, -1.0, 1.0])  # optical (x right, y down, z fwd) -> GL axes
    view = np.linalg.inv(T_base_gl)
    proj = np.asarray(projection_matrix, dtype=np.float64).reshape(4, 4).T  # column-major storage
    clip = proj @ view @ np.append(np.asarray(p_base, dtype=np.float64), 1.0)
    ndc = clip[:3] / clip[3]
    x_edge = (ndc[0] + 1.0) / 2.0 * width
    y_edge = (1.0 - ndc[1]) / 2.0 * height
    return x_edge + 0.5, y_edge - 0.5
