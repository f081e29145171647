"""Rendering RGB-D views of the simulated workcell: intrinsics, OpenCV-axis poses, metric depth, noise.

pybullet's TinyRenderer (CPU) draws color, an OpenGL depth buffer and a segmentation mask. This
module turns those into what a real aligned RGB-D camera gives: uint8 RGB, metric depth along the
optical axis registered to color (0 = no reading), a pinhole K matching the projection, and the
pose ``T_base_cam`` of the ``<camera>_optical`` frame (z forward, x right, y down). Optional noise
and holes resemble a RealSense: error growing with z², dropouts at depth edges and at random.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from robopin.geometry.camera_model import CameraModel
from robopin.geometry.transforms import invert

# OpenGL camera axes (x right, y up, looking down -z) versus OpenCV optical axes (x right, y down,
# looking down +z): the same frame with y and z flipped.
GL_FROM_OPTICAL = np.diag([1.0, -1.0, -1.0, 1.0])


@dataclass(frozen=True)
class DepthNoiseConfig:
    """RealSense-like depth degradation; all zero (the default) means exact depth.

    ``sigma_at_1m_m`` is the standard deviation at 1 m, growing with z² as stereo error does;
    ``edge_hole_threshold_m`` drops pixels next to a depth jump larger than this (stereo shadows);
    ``random_hole_fraction`` drops that fraction of pixels anywhere; depth is quantised to
    ``quantization_m`` (1 mm, the z16 unit at depth scale 0.001).
    """

    sigma_at_1m_m: float = 0.0
    edge_hole_threshold_m: float = 0.0
    random_hole_fraction: float = 0.0
    quantization_m: float = 0.0
    min_range_m: float = 0.0
    max_range_m: float = 0.0

    def __post_init__(self) -> None:
        for name in (
            "sigma_at_1m_m",
            "edge_hole_threshold_m",
            "quantization_m",
            "min_range_m",
            "max_range_m",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"DepthNoiseConfig.{name} must be >= 0, got {getattr(self, name)}")
        if not 0.0 <= self.random_hole_fraction < 1.0:
            raise ValueError(
                f"DepthNoiseConfig.random_hole_fraction must be in [0, 1), got {self.random_hole_fraction}"
            )

    @classmethod
    def realsense(cls) -> DepthNoiseConfig:
        """Typical D435 figures at 640x480: ~2 mm at 1 m, holes at edges, 0.5% dropouts, 0.1–10 m range."""
        return cls(
            sigma_at_1m_m=0.002,
            edge_hole_threshold_m=0.03,
            random_hole_fraction=0.005,
            quantization_m=0.001,
            min_range_m=0.1,
            max_range_m=10.0,
        )

    @property
    def enabled(self) -> bool:
        return any(
            (
                self.sigma_at_1m_m,
                self.edge_hole_threshold_m,
                self.random_hole_fraction,
                self.quantization_m,
                self.min_range_m,
                self.max_range_m,
            )
        )


@dataclass(frozen=True)
class SimCameraSpec:
    """One simulated RGB-D camera.

    A static camera has ``mount="world"`` and ``T_mount_cam`` is ``T_base_cam``; a wrist camera has
    ``mount="ee"`` and ``T_mount_cam`` is ``T_ee_cam`` (rigidly attached to the hand). Poses are of
    the optical frame. ``vertical_fov_deg`` sets fx = fy = (H/2)/tan(fov/2), principal point at the
    image centre.
    """

    name: str
    T_mount_cam: NDArray[np.float64]
    mount: str = "world"
    width: int = 640
    height: int = 480
    vertical_fov_deg: float = 45.0
    near_m: float = 0.05
    far_m: float = 5.0
    depth_noise: DepthNoiseConfig = field(default_factory=DepthNoiseConfig)

    def __post_init__(self) -> None:
        if self.mount not in ("world", "ee"):
            raise ValueError(f"camera {self.name!r}: mount must be 'world' or 'ee', got {self.mount!r}")
        if self.width <= 0 or self.height <= 0:
            raise ValueError(f"camera {self.name!r}: image size must be positive, got {self.width}x{self.height}")
        if not 1.0 < self.vertical_fov_deg < 170.0:
            raise ValueError(f"camera {self.name!r}: vertical_fov_deg must be in (1, 170), got {self.vertical_fov_deg}")
        if not 0.0 < self.near_m < self.far_m:
            raise ValueError(f"camera {self.name!r}: need 0 < near_m < far_m, got {self.near_m}, {self.far_m}")
        T = np.asarray(self.T_mount_cam, dtype=np.float64)
        if T.shape != (4, 4):
            raise ValueError(f"camera {self.name!r}: T_mount_cam must be 4x4, got shape {T.shape}")
        object.__setattr__(self, "T_mount_cam", T)

    @property
    def aspect(self) -> float:
        return self.width / self.height

    def projection_matrix(self) -> list[float]:
        """pybullet's column-major OpenGL projection for this camera."""
        import pybullet as p

        return list(p.computeProjectionMatrixFOV(self.vertical_fov_deg, self.aspect, self.near_m, self.far_m))

    def camera_model(self) -> CameraModel:
        """Intrinsics of the rendered image, including TinyRenderer's half-pixel sampling offset."""
        return CameraModel.from_pybullet_projection(self.projection_matrix(), self.width, self.height)


@dataclass(frozen=True)
class RenderedView:
    """One rendered RGB-D frame: color (H, W, 3) uint8, depth_m (H, W) float32 with 0 = no reading,
    segmentation (H, W) int32 body ids (-1 background), the intrinsics, the optical-frame pose in
    ``base``, the simulated time it was taken at and (when known) the host wall-clock time of that state."""

    camera: str
    color: NDArray[np.uint8]
    depth_m: NDArray[np.float32]
    segmentation: NDArray[np.int32]
    model: CameraModel
    T_base_cam: NDArray[np.float64]
    stamp_s: float
    """The simulator's time of the state drawn."""

    @property
    def K(self) -> NDArray[np.float64]:
        """3x3 camera matrix, ROS / OpenCV convention (pixel i centred at i), as in CameraInfo."""
        return self.model.K


def view_matrix(T_base_cam: NDArray[np.float64]) -> list[float]:
    """pybullet view matrix (column-major 16 floats) for an optical-frame camera pose."""
    T_base_gl = T_base_cam @ GL_FROM_OPTICAL
    return invert(T_base_gl).flatten(order="F").tolist()


def linearize_depth(buffer: NDArray[np.floating], near_m: float, far_m: float) -> NDArray[np.float32]:
    """Metric depth along the optical axis from an OpenGL depth buffer in [0, 1]."""
    z = np.asarray(buffer, dtype=np.float64)
    return (far_m * near_m / (far_m - (far_m - near_m) * z)).astype(np.float32)


def camera_buffers(
    client: int, spec: SimCameraSpec, T_base_cam: NDArray[np.float64]
) -> tuple[NDArray[np.uint8], NDArray[np.float32], NDArray[np.int32]]:
    """TinyRenderer's raw buffers of one view: RGBA (H, W, 4), OpenGL depth in [0, 1], segmentation.

    pybullet keeps the GIL for the whole pass (0.1-0.7 s at 640x480 on this machine kind): in a process
    that runs other threads, call it from :mod:`robopin.sim.render_worker`'s process instead.
    """
    import pybullet as p

    _, _, rgba, depth_buffer, segmentation = p.getCameraImage(
        spec.width,
        spec.height,
        viewMatrix=view_matrix(T_base_cam),
        projectionMatrix=spec.projection_matrix(),
        renderer=p.ER_TINY_RENDERER,
        physicsClientId=client,
    )
    # pybullet built with numpy (the wheel is) returns arrays of these dtypes already: no copy then.
    return (
        np.asarray(rgba, dtype=np.uint8).reshape(spec.height, spec.width, 4),
        np.asarray(depth_buffer, dtype=np.float32).reshape(spec.height, spec.width),
        np.asarray(segmentation, dtype=np.int32).reshape(spec.height, spec.width),
    )


def body_segmentation(segmentation: NDArray[np.integer]) -> NDArray[np.int32]:
    """Body ids of a TinyRenderer segmentation buffer (-1 background)."""
    seg = np.asarray(segmentation)
    # Low 24 bits carry the body id when link indices are encoded; background stays -1.
    return np.where(seg >= 0, seg & ((1 << 24) - 1), -1).astype(np.int32)


def view_from_buffers(
    spec: SimCameraSpec,
    T_base_cam: NDArray[np.float64],
    stamp_s: float,
    buffers: tuple[NDArray[np.uint8], NDArray[np.float32], NDArray[np.int32]],
    *,
    rng: np.random.Generator | None = None,
) -> RenderedView:
    """The :class:`RenderedView` of raw buffers: metric depth, body-id segmentation, optional noise."""
    rgba, depth_buffer, segmentation = buffers
    depth = linearize_depth(depth_buffer, spec.near_m, spec.far_m)
    seg = body_segmentation(segmentation)
    depth[depth >= spec.far_m * 0.999] = 0.0
    if spec.depth_noise.enabled:
        depth = apply_depth_noise(depth, spec.depth_noise, rng if rng is not None else np.random.default_rng(0))
    return RenderedView(
        spec.name,
        np.ascontiguousarray(rgba[:, :, :3]),
        depth,
        seg,
        spec.camera_model(),
        np.array(T_base_cam, dtype=np.float64),
        stamp_s,
    )


def render(
    client: int,
    spec: SimCameraSpec,
    T_base_cam: NDArray[np.float64],
    stamp_s: float,
    rng: np.random.Generator | None = None,
) -> RenderedView:
    """Render one view with TinyRenderer in this process; the caller holds the world lock."""
    return view_from_buffers(spec, T_base_cam, stamp_s, camera_buffers(client, spec, T_base_cam), rng=rng)


def apply_depth_noise(
    depth_m: NDArray[np.float32], noise: DepthNoiseConfig, rng: np.random.Generator
) -> NDArray[np.float32]:
    """Return a degraded copy of ``depth_m`` (0 stays 0 = no reading)."""
    depth = depth_m.astype(np.float64).copy()
    valid = depth > 0
    if noise.sigma_at_1m_m > 0:
        depth[valid] += rng.normal(0.0, 1.0, int(valid.sum())) * noise.sigma_at_1m_m * depth[valid] ** 2
    holes = ~valid
    if noise.edge_hole_threshold_m > 0:
        jump_u = np.abs(np.diff(depth_m, axis=1)) > noise.edge_hole_threshold_m
        jump_v = np.abs(np.diff(depth_m, axis=0)) > noise.edge_hole_threshold_m
        edge = np.zeros_like(valid)
        edge[:, 1:] |= jump_u
        edge[:, :-1] |= jump_u
        edge[1:, :] |= jump_v
        edge[:-1, :] |= jump_v
        holes |= edge
    if noise.random_hole_fraction > 0:
        holes |= rng.random(depth.shape) < noise.random_hole_fraction
    if noise.min_range_m > 0:
        holes |= depth < noise.min_range_m
    if noise.max_range_m > 0:
        holes |= depth > noise.max_range_m
    if noise.quantization_m > 0:
        depth = np.round(depth / noise.quantization_m) * noise.quantization_m
    depth[holes] = 0.0
    return depth.astype(np.float32)


def deproject(view: RenderedView, u: float, v: float) -> NDArray[np.float64]:
    """3D point in ``base`` of image point (u, v) (pixel centres at +0.5) using the depth there.

    Raises ValueError when the pixel is off the image or has no depth reading.
    """
    if not view.model.contains(u, v):
        raise ValueError(f"image point ({u}, {v}) is outside the {view.model.width}x{view.model.height} image")
    col, row = view.model.pixel_index(u, v)
    z = float(view.depth_m[row, col])
    if z <= 0:
        raise ValueError(f"pixel ({u}, {v}) of {view.camera!r} has no depth reading")
    p_cam = view.model.deproject(u, v, z)
    return (view.T_base_cam @ np.append(p_cam, 1.0))[:3]


def project(view: RenderedView, p_base: NDArray[np.float64]) -> tuple[float, float, float]:
    """Image point (u, v) and depth z (m) of a ``base`` point in this view (NaN u, v when behind it)."""
    p_cam = (invert(view.T_base_cam) @ np.append(np.asarray(p_base, dtype=np.float64), 1.0))[:3]
    u, v = view.model.project(p_cam)
    return float(u), float(v), float(p_cam[2])
