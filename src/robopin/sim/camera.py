"""The simulated RGB-D camera backend (camera type ``sim``): a view of a registered SimWorld.

``SimCamera`` attaches to the world named in its config (see :func:`robopin.sim.world.get_world`)
and renders one of that world's cameras (static or wrist-mounted) at the configured frame rate.
Frames follow the camera contract: RGB uint8, float32 metric depth aligned to color with NaN for
no reading, intrinsics as a :class:`~robopin.geometry.CameraModel`, host wall-clock timestamps.
The pose of the optical frame at capture time is kept as ground truth (:attr:`last_pose`).
"""

from __future__ import annotations

import dataclasses
import time
from typing import ClassVar

import numpy as np

from robopin.cameras.base import (
    Camera,
    CameraConfig,
    CameraDescription,
    CameraNotFoundError,
    CameraTimeoutError,
    Frame,
    StreamProfile,
)
from robopin.sim.render import RenderedView
from robopin.sim.world import SimWorld, UnknownNameError, get_world, registered_worlds


@dataclasses.dataclass
class SimCameraConfig(CameraConfig):
    """A camera of a simulated world.

    Attributes:
        world: name of the registered :class:`~robopin.sim.world.SimWorld`.
        sim_camera: name of the camera inside that world (default: this config's ``name``).
    """

    type: ClassVar[str] = "sim"

    world: str = "workcell"
    sim_camera: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.world, str) or not self.world:
            raise ValueError(f"camera {self.name!r}: world must be a non-empty world name, got {self.world!r}")

    @property
    def camera_in_world(self) -> str:
        return self.sim_camera or self.name


class SimCamera(Camera):
    """Renders a simulated camera; one ``read()`` per frame period (``1 / fps`` of wall time), stamped on the
    simulator's clock (frames of a still cell have its one time)."""

    config_class = SimCameraConfig
    config: SimCameraConfig

    def __init__(self, config: SimCameraConfig) -> None:
        super().__init__(config)
        self.world: SimWorld | None = None
        self._index = 0
        self._next_due = 0.0
        self.last_view: RenderedView | None = None

    @staticmethod
    def find_cameras() -> list[CameraDescription]:
        """Every camera of every simulated world registered in this process."""
        found = []
        for world_name in registered_worlds():
            try:
                world = get_world(world_name)
            except UnknownNameError:
                continue  # closed between listing and lookup
            for name, spec in world.cameras.items():
                profiles = (
                    StreamProfile("color", spec.width, spec.height, 30, "rgb8"),
                    StreamProfile("depth", spec.width, spec.height, 30, "float32"),
                )
                found.append(CameraDescription(type="sim", serial=f"{world_name}/{name}", name=name, profiles=profiles))
        return found

    @property
    def last_pose(self) -> np.ndarray | None:
        """``T_base_cam`` of the optical frame when the last frame was rendered (ground truth)."""
        return None if self.last_view is None else self.last_view.T_base_cam

    def _connect(self) -> None:
        try:
            world = get_world(self.config.world)
        except UnknownNameError as error:
            raise CameraNotFoundError(f"{self}: {error}") from None
        try:
            spec = world.camera(self.config.camera_in_world)
        except UnknownNameError as error:
            raise CameraNotFoundError(f"{self}: {error}") from None
        if (spec.width, spec.height) != (self.config.width, self.config.height):
            raise CameraNotFoundError(
                f"{self}: world camera {spec.name!r} renders {spec.width}x{spec.height}, "
                f"config asks for {self.config.width}x{self.config.height}"
            )
        self.world = world
        self._index = 0
        self._next_due = time.monotonic()

    def _read(self, timeout_s: float) -> Frame:
        assert self.world is not None
        delay = self._next_due - time.monotonic()
        if delay > timeout_s:
            time.sleep(timeout_s)
            raise CameraTimeoutError(f"{self}: next frame due in {delay * 1000:.0f} ms, beyond the timeout")
        if delay > 0:
            time.sleep(delay)
        view = self.world.render(self.config.camera_in_world)
        self._next_due = max(self._next_due + 1.0 / self.config.fps, time.monotonic())
        depth = view.depth_m.copy()
        depth[depth <= 0] = np.nan  # the camera contract marks invalid depth with NaN
        # Stamped on the simulator's clock when the drawn state was read (a render worker draws it while the world
        # moves on): the time of a simulated system's nodes (/clock, robopin_ros.bringup.SimClockPublisher).
        frame = Frame(
            view.color,
            depth.astype(np.float32),
            view.model,
            view.stamp_s,
            serial=f"{self.config.world}/{self.config.camera_in_world}",
            index=self._index,
            camera_name=self.config.name,
        )
        self._index += 1
        self.last_view = view
        return frame

    def _disconnect(self) -> None:
        self.world = None
