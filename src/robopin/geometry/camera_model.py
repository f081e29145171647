"""Pinhole camera intrinsics with lens distortion: the camera model every frame carries.

Pixel conventions (stated once, used everywhere):

* **Image points** in robopin (anchors, ``u``/``v`` arguments, ``project`` results) are continuous pixel
  coordinates of the original image in which pixel column ``i`` spans ``[i, i + 1)`` and its centre lies
  at ``u = i + 0.5`` (the same for rows). A model point ``x`` in 0..1000 maps to ``u = x / 1000 * width``.
* **Intrinsics** ``fx, fy, cx, cy`` are stored exactly as ROS ``CameraInfo.k``, OpenCV, librealsense and
  the ZED SDK give them: in those conventions the centre of pixel ``i`` is at ``i`` (``[0, 0]`` is the
  centre of the top-left pixel). So ``x_normalized = (u - 0.5 - cx) / fx``. Keeping the SDK values
  unchanged means a CameraInfo round-trips bit for bit; the half-pixel shift lives only in this module.
* The camera frame is the optical frame: z forward, x right, y down, metres. ``depth_m`` is the
  coordinate along z (what depth images hold), not the length of the ray.

Distortion models (coefficient order as in the source):

* ``none``;
* ``plumb_bob`` / ``brown_conrady`` — k1, k2, p1, p2, k3 (OpenCV; fewer coefficients are zero-padded);
* ``rational_polynomial`` — k1, k2, p1, p2, k3, k4, k5, k6 (OpenCV);
* ``modified_brown_conrady`` — librealsense's variant: tangential terms use the radially scaled point;
* ``inverse_brown_conrady`` — librealsense: the Brown–Conrady formula maps *distorted to undistorted*.

Deprojection undistorts first (iteratively where the model is a forward one), so a distorted pixel
deprojects onto the true ray.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["DISTORTION_MODELS", "CameraModel", "CameraModelError", "pixel_rays"]


class CameraModelError(ValueError):
    """Intrinsics, distortion or an input to a camera model that cannot be used."""


# name -> (aliases it accepts, maximum number of coefficients)
DISTORTION_MODELS: dict[str, int] = {
    "none": 0,
    "plumb_bob": 5,
    "rational_polynomial": 8,
    "modified_brown_conrady": 5,
    "inverse_brown_conrady": 5,
}
_ALIASES = {
    "": "none",
    "brown_conrady": "plumb_bob",
    "distortion.brown_conrady": "plumb_bob",
    "distortion.modified_brown_conrady": "modified_brown_conrady",
    "distortion.inverse_brown_conrady": "inverse_brown_conrady",
    "distortion.none": "none",
}

# Undistortion stops when the re-distorted point is this close (normalized units; 1e-10 is
# ~1e-7 px at f = 600) or after this many Newton steps.
_UNDISTORT_TOL = 1e-10
_UNDISTORT_MAX_ITER = 20


def _canonical_model(name: str) -> str:
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in DISTORTION_MODELS:
        raise CameraModelError(
            f"distortion_model {name!r} is not supported; expected one of "
            f"{sorted(DISTORTION_MODELS) + sorted(a for a in _ALIASES if a and '.' not in a)}"
        )
    return key


@dataclass(frozen=True)
class CameraModel:
    """Intrinsics of one camera stream (see the module docstring for the pixel conventions).

    ``cx, cy`` follow the ROS / OpenCV / SDK convention (centre of pixel ``i`` at ``i``); ``u, v``
    arguments and results follow robopin's (centre of pixel ``i`` at ``i + 0.5``).
    """

    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float
    distortion_model: str = "none"
    coeffs: tuple[float, ...] = ()
    _k: tuple[float, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("width", "height"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
                raise CameraModelError(f"{name} must be a positive integer number of pixels, got {value!r}")
            object.__setattr__(self, name, int(value))
        for name in ("fx", "fy", "cx", "cy"):
            value = float(getattr(self, name))
            if not math.isfinite(value):
                raise CameraModelError(f"{name} must be finite, got {value}")
            object.__setattr__(self, name, value)
        if self.fx <= 0 or self.fy <= 0:
            raise CameraModelError(f"focal lengths must be positive pixels, got fx={self.fx}, fy={self.fy}")
        model = _canonical_model(self.distortion_model)
        coeffs = tuple(float(c) for c in np.asarray(self.coeffs, dtype=np.float64).reshape(-1))
        if not all(math.isfinite(c) for c in coeffs):
            raise CameraModelError(f"distortion coefficients must be finite, got {coeffs}")
        n_max = DISTORTION_MODELS[model]
        # CameraInfo often carries trailing zeros beyond what the model uses (e.g. 8 or 14 for
        # plumb_bob from some drivers); those are harmless, non-zero extras are not.
        if len(coeffs) > n_max and any(c != 0.0 for c in coeffs[n_max:]):
            raise CameraModelError(
                f"distortion_model {model!r} takes at most {n_max} coefficients, got {len(coeffs)}: {coeffs}"
            )
        coeffs = coeffs[:n_max]
        if model != "none" and not any(coeffs):
            model, coeffs = "none", ()
        object.__setattr__(self, "distortion_model", model)
        object.__setattr__(self, "coeffs", coeffs)
        object.__setattr__(self, "_k", coeffs + (0.0,) * (n_max - len(coeffs)))

    # ----------------------------------------------------------------------------------- queries
    @property
    def K(self) -> NDArray[np.float64]:
        """3x3 camera matrix in the ROS / OpenCV convention (as in ``CameraInfo.k``)."""
        return np.array([[self.fx, 0.0, self.cx], [0.0, self.fy, self.cy], [0.0, 0.0, 1.0]])

    @property
    def has_distortion(self) -> bool:
        """True when the model bends rays (any non-zero coefficient)."""
        return self.distortion_model != "none"

    def contains(self, u: ArrayLike, v: ArrayLike) -> NDArray[np.bool_] | bool:
        """Whether image points lie on the image (``0 <= u < width``, ``0 <= v < height``)."""
        u = np.asarray(u, dtype=np.float64)
        v = np.asarray(v, dtype=np.float64)
        inside = (u >= 0) & (u < self.width) & (v >= 0) & (v < self.height) & np.isfinite(u) & np.isfinite(v)
        return bool(inside) if inside.ndim == 0 else inside

    def pixel_index(self, u: float, v: float) -> tuple[int, int]:
        """``(column, row)`` of the pixel containing image point ``(u, v)`` (no bounds check)."""
        return math.floor(u), math.floor(v)

    def pixel_centres(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Image points of every pixel centre, as two ``(height, width)`` arrays ``(u, v)``."""
        u = np.arange(self.width, dtype=np.float64) + 0.5
        v = np.arange(self.height, dtype=np.float64) + 0.5
        return np.meshgrid(u, v)

    def resized(self, width: int, height: int) -> CameraModel:
        """The same camera after resizing its image to ``width x height`` (scaled focal lengths, centre)."""
        sx, sy = width / self.width, height / self.height
        # Scale in edge coordinates (centre at +0.5), then return to the SDK convention.
        return CameraModel(
            width,
            height,
            self.fx * sx,
            self.fy * sy,
            (self.cx + 0.5) * sx - 0.5,
            (self.cy + 0.5) * sy - 0.5,
            self.distortion_model,
            self.coeffs,
        )

    # ---------------------------------------------------------------------- distortion maths
    def distort_normalized(self, x: ArrayLike, y: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Ideal normalized image coordinates (``X/Z, Y/Z``) to distorted normalized coordinates."""
        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        model = self.distortion_model
        if model == "none":
            return x, y
        if model == "inverse_brown_conrady":
            # Coefficients describe the inverse map; distorting needs the iterative solve.
            return self._solve_inverse(x, y, self._brown_conrady)
        if model == "modified_brown_conrady":
            k1, k2, p1, p2, k3 = self._k
            r2 = x * x + y * y
            f = 1 + r2 * (k1 + r2 * (k2 + r2 * k3))
            xs, ys = x * f, y * f
            return xs + 2 * p1 * xs * ys + p2 * (r2 + 2 * xs * xs), ys + 2 * p2 * xs * ys + p1 * (r2 + 2 * ys * ys)
        return self._brown_conrady(x, y)

    def undistort_normalized(self, x: ArrayLike, y: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Distorted normalized coordinates back to ideal ones (inverse of :meth:`distort_normalized`)."""
        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        if self.distortion_model == "none":
            return x, y
        if self.distortion_model == "inverse_brown_conrady":
            return self._brown_conrady(x, y)
        return self._solve_inverse(x, y, self.distort_normalized)

    def _brown_conrady(self, x: NDArray[np.float64], y: NDArray[np.float64]) -> tuple[NDArray, NDArray]:
        k = self._k
        k1, k2, p1, p2, k3 = k[:5]
        r2 = x * x + y * y
        radial = 1 + r2 * (k1 + r2 * (k2 + r2 * k3))
        if len(k) == 8:
            k4, k5, k6 = k[5:]
            radial = radial / (1 + r2 * (k4 + r2 * (k5 + r2 * k6)))
        xy = x * y
        return x * radial + 2 * p1 * xy + p2 * (r2 + 2 * x * x), y * radial + p1 * (r2 + 2 * y * y) + 2 * p2 * xy

    @staticmethod
    def _solve_inverse(xt: NDArray, yt: NDArray, forward) -> tuple[NDArray, NDArray]:
        """Find (x, y) with forward(x, y) == (xt, yt) by Newton steps with a finite-difference Jacobian."""
        x, y = np.array(xt, dtype=np.float64, copy=True), np.array(yt, dtype=np.float64, copy=True)
        h = 1e-7
        for _ in range(_UNDISTORT_MAX_ITER):
            fx, fy = forward(x, y)
            ex, ey = fx - xt, fy - yt
            if np.all(np.abs(ex) < _UNDISTORT_TOL) and np.all(np.abs(ey) < _UNDISTORT_TOL):
                break
            ax, ay = forward(x + h, y)
            bx, by = forward(x, y + h)
            j11, j21 = (ax - fx) / h, (ay - fy) / h
            j12, j22 = (bx - fx) / h, (by - fy) / h
            det = j11 * j22 - j12 * j21
            det = np.where(np.abs(det) < 1e-12, 1e-12, det)
            x = x - (j22 * ex - j12 * ey) / det
            y = y - (-j21 * ex + j11 * ey) / det
        return x, y

    # ------------------------------------------------------------------- project / deproject
    def pixel_to_ray(self, u: ArrayLike, v: ArrayLike) -> NDArray[np.float64]:
        """Undistorted ray ``(x, y, 1)`` through image point(s) ``(u, v)``; shape ``(..., 3)``."""
        u = np.asarray(u, dtype=np.float64)
        v = np.asarray(v, dtype=np.float64)
        xd = (u - 0.5 - self.cx) / self.fx
        yd = (v - 0.5 - self.cy) / self.fy
        x, y = self.undistort_normalized(xd, yd)
        return np.stack(np.broadcast_arrays(x, y, np.ones_like(x)), axis=-1)

    def deproject(self, u: ArrayLike, v: ArrayLike, depth_m: ArrayLike) -> NDArray[np.float64]:
        """3D point(s) in the optical frame at image point(s) ``(u, v)``, z = ``depth_m``; shape (..., 3)."""
        depth = np.asarray(depth_m, dtype=np.float64)
        return self.pixel_to_ray(u, v) * depth[..., None]

    def project(self, point_cam: ArrayLike) -> tuple[Any, Any]:
        """Image point ``(u, v)`` of a 3D point in the optical frame (arrays for an ``(N, 3)`` input).

        Points at or behind the camera (z <= 0) give NaN.
        """
        p = np.asarray(point_cam, dtype=np.float64)
        if p.shape[-1:] != (3,):
            raise CameraModelError(f"point_cam must have shape (3,) or (N, 3), got {p.shape}")
        z = p[..., 2]
        with np.errstate(divide="ignore", invalid="ignore"):
            safe_z = np.where(z > 0, z, np.nan)
            x, y = p[..., 0] / safe_z, p[..., 1] / safe_z
        xd, yd = self.distort_normalized(x, y)
        u = self.fx * xd + self.cx + 0.5
        v = self.fy * yd + self.cy + 0.5
        if p.ndim == 1:
            return float(u), float(v)
        return u, v

    # -------------------------------------------------------------------------- constructors
    @classmethod
    def from_camera_info(cls, info: Any) -> CameraModel:
        """From a ``sensor_msgs/CameraInfo`` (or anything with ``width, height, k, d, distortion_model``)."""
        k = np.asarray(info.k, dtype=np.float64).reshape(-1)
        if k.shape != (9,):
            raise CameraModelError(f"CameraInfo.k must hold 9 numbers, got {k.shape[0]}")
        if k[0] == 0 or k[4] == 0:
            raise CameraModelError(
                f"CameraInfo.k is not calibrated (fx={k[0]}, fy={k[4]}); expected positive focal lengths"
            )
        return cls(
            int(info.width),
            int(info.height),
            k[0],
            k[4],
            k[2],
            k[5],
            distortion_model=info.distortion_model or "none",
            coeffs=tuple(info.d),
        )

    def to_camera_info_fields(self) -> dict[str, Any]:
        """Fields of a ``sensor_msgs/CameraInfo`` for this model (``k, d, p, r``, sizes, model)."""
        model = self.distortion_model
        d = list(self.coeffs)
        if model == "none":
            model, d = "plumb_bob", [0.0] * 5
        return {
            "width": self.width,
            "height": self.height,
            "distortion_model": model,
            "d": d,
            "k": [self.fx, 0.0, self.cx, 0.0, self.fy, self.cy, 0.0, 0.0, 1.0],
            "r": [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
            "p": [self.fx, 0.0, self.cx, 0.0, 0.0, self.fy, self.cy, 0.0, 0.0, 0.0, 1.0, 0.0],
        }

    @classmethod
    def from_realsense(cls, intrinsics: Any) -> CameraModel:
        """From ``pyrealsense2.intrinsics`` (``width, height, fx, fy, ppx, ppy, model, coeffs``)."""
        model = str(getattr(intrinsics, "model", "none")).lower()
        return cls(
            int(intrinsics.width),
            int(intrinsics.height),
            intrinsics.fx,
            intrinsics.fy,
            intrinsics.ppx,
            intrinsics.ppy,
            distortion_model=model,
            coeffs=tuple(intrinsics.coeffs),
        )

    @classmethod
    def from_zed(cls, parameters: Any, rectified: bool = True) -> CameraModel:
        """From a ZED ``CameraParameters`` (``fx, fy, cx, cy, disto, image_size``).

        ZED images from ``retrieve_image`` / ``retrieve_measure`` are rectified, so by default the
        distortion is dropped; pass ``rectified=False`` for raw images (``disto`` is k1, k2, p1, p2, k3, ...).
        """
        size = parameters.image_size
        width, height = int(size.width), int(size.height)
        if rectified:
            return cls(width, height, parameters.fx, parameters.fy, parameters.cx, parameters.cy)
        disto = [float(c) for c in parameters.disto]
        rational = len(disto) > 5 and any(disto[5:8])
        model, count = ("rational_polynomial", 8) if rational else ("plumb_bob", 5)
        return cls(width, height, parameters.fx, parameters.fy, parameters.cx, parameters.cy, model,
                   tuple(disto[:count]))

    @classmethod
    def from_pybullet_projection(
        cls, projection_matrix: Sequence[float], width: int, height: int, tiny_renderer: bool = True
    ) -> CameraModel:
        """From pybullet's 16-number column-major OpenGL projection matrix and the render size.

        The ideal image centre is ``(W (1 - P02) / 2, H (1 + P12) / 2)`` in edge coordinates. pybullet's
        TinyRenderer (the only renderer in DIRECT mode) samples pixel ``(i, j)`` at ``(i, j + 1)`` in
        those coordinates instead of at its centre ``(i + 0.5, j + 0.5)`` (measured: with this
        correction rendered depth of a plane matches the analytic plane to 5 µm, without it to
        ~2 mm at 1 m), so by default the principal point is moved by that half pixel. Pass
        ``tiny_renderer=False`` for images rendered with pixel-centre sampling (OpenGL / EGL).
        """
        P = np.asarray(projection_matrix, dtype=np.float64).reshape(-1)
        if P.shape != (16,):
            raise CameraModelError(f"projection_matrix must hold 16 numbers (column-major 4x4), got {P.shape[0]}")
        P = P.reshape(4, 4).T  # column-major storage -> row-major matrix
        fx = P[0, 0] * width / 2.0
        fy = P[1, 1] * height / 2.0
        centre_u = width * (1.0 - P[0, 2]) / 2.0
        centre_v = height * (1.0 + P[1, 2]) / 2.0
        if tiny_renderer:
            # Pixel (i, j) shows the ideal image at (i, j + 1): robopin u = ideal u + 0.5, v = ideal v - 0.5.
            return cls(int(width), int(height), fx, fy, centre_u, centre_v - 1.0)
        return cls(int(width), int(height), fx, fy, centre_u - 0.5, centre_v - 0.5)

    @classmethod
    def from_fov(cls, width: int, height: int, vertical_fov_rad: float) -> CameraModel:
        """Ideal centred pinhole with square pixels and the given vertical field of view."""
        if not 0 < vertical_fov_rad < math.pi:
            raise CameraModelError(f"vertical_fov_rad must be in (0, pi), got {vertical_fov_rad}")
        f = height / 2.0 / math.tan(vertical_fov_rad / 2.0)
        return cls(width, height, f, f, width / 2.0 - 0.5, height / 2.0 - 0.5)


@lru_cache(maxsize=16)
def pixel_rays(camera: CameraModel) -> NDArray[np.float32]:
    """Undistorted ray ``(x, y, 1)`` of every pixel centre, shape ``(H, W, 3)`` float32 (cached per model).

    Undistorting a whole image costs tens of milliseconds; point clouds and patch fits reuse this.
    """
    u, v = camera.pixel_centres()
    rays = camera.pixel_to_ray(u, v).astype(np.float32)
    rays.setflags(write=False)
    return rays
