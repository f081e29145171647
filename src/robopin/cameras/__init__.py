"""Camera capture for robopin: one abstract camera, backends (RealSense, ZED, sim, bag) and multi-view sync.

Backends are imported lazily through :func:`make_camera`, so importing this package needs no camera SDK.
"""

from robopin.cameras.base import (
    CAMERAS,
    Camera,
    CameraBackendUnavailableError,
    CameraConfig,
    CameraConfigError,
    CameraDescription,
    CameraError,
    CameraNotFoundError,
    CameraReadError,
    CameraTimeoutError,
    DeviceAlreadyConnectedError,
    DeviceNotConnectedError,
    Frame,
    StreamProfile,
    UnknownCameraTypeError,
    camera_class,
    camera_config_class,
    camera_config_from_dict,
    make_camera,
)
from robopin.cameras.snapshot import (
    SNAPSHOT_REFUSALS,
    MultiViewSnapshot,
    SnapshotConfig,
    SnapshotError,
    SnapshotSynchronizer,
)

__all__ = [
    "CAMERAS",
    "SNAPSHOT_REFUSALS",
    "Camera",
    "CameraBackendUnavailableError",
    "CameraConfig",
    "CameraConfigError",
    "CameraDescription",
    "CameraError",
    "CameraNotFoundError",
    "CameraReadError",
    "CameraTimeoutError",
    "DeviceAlreadyConnectedError",
    "DeviceNotConnectedError",
    "Frame",
    "MultiViewSnapshot",
    "SnapshotConfig",
    "SnapshotError",
    "SnapshotSynchronizer",
    "StreamProfile",
    "UnknownCameraTypeError",
    "camera_class",
    "camera_config_class",
    "camera_config_from_dict",
    "make_camera",
]
