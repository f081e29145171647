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
