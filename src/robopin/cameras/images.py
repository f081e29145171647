"""Raw image buffers ⇄ numpy for the encodings camera topics use, and the fields of sensor_msgs Image and CameraInfo.

Pure numpy, no ROS: the bag backend and the trial recorders read and write recorded images with it and
``robopin_ros.conversions`` builds and reads messages with it. Depth on the wire follows realsense-ros:
16UC1 in millimetres with 0 as "no data"; 32FC1 metres (ZED) is read too. Inside robopin depth is
float32 metres with NaN invalid.

The ``*_fields`` functions give a message's fields (all but the header) with arrays as numpy arrays,
which rosbags serializes; rclpy takes them after its own array conversion (robopin_ros.conversions.images).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = [
    "COLOR_ENCODINGS",
    "DEPTH_ENCODINGS",
    "ImageEncodingError",
    "camera_info_fields",
    "camera_info_message",
    "color_image_fields",
    "decode_color",
    "decode_depth_m",
    "decode_image",
    "depth_image_fields",
    "depth_m_to_16uc1",
    "image_message",
    "image_message_to_color",
    "image_message_to_depth_m",
]

# encoding -> (numpy dtype, channels)
_LAYOUTS: dict[str, tuple[np.dtype, int]] = {
    "rgb8": (np.dtype(np.uint8), 3),
    "bgr8": (np.dtype(np.uint8), 3),
    "rgba8": (np.dtype(np.uint8), 4),
    "bgra8": (np.dtype(np.uint8), 4),
    "mono8": (np.dtype(np.uint8), 1),
    "8UC3": (np.dtype(np.uint8), 3),
    "16UC1": (np.dtype(np.uint16), 1),
    "mono16": (np.dtype(np.uint16), 1),
    "32FC1": (np.dtype(np.float32), 1),
}
COLOR_ENCODINGS = ("rgb8", "bgr8", "rgba8", "bgra8", "mono8", "8UC3")
DEPTH_ENCODINGS = ("16UC1", "mono16", "32FC1")

# 16UC1 millimetres cannot hold more than 65.535 m; anything beyond is written as "no data".
_MAX_DEPTH_MM = 65535


class ImageEncodingError(ValueError):
    """An image buffer whose encoding, size or step cannot be read as claimed."""


def decode_image(
    encoding: str, height: int, width: int, step: int, data: bytes | np.ndarray, *, is_bigendian: bool = False
) -> np.ndarray:
    """Return the (H, W) or (H, W, C) array a raw image buffer holds (a view where possible)."""
    if encoding not in _LAYOUTS:
        raise ImageEncodingError(f"image encoding {encoding!r} is not supported; expected one of {sorted(_LAYOUTS)}")
    dtype, channels = _LAYOUTS[encoding]
    row_bytes = width * channels * dtype.itemsize
    if step < row_bytes:
        raise ImageEncodingError(f"{encoding} image {width}x{height}: step {step} < {row_bytes} bytes per row")
    buffer = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data.view(np.uint8)
    if buffer.size < step * height:
        raise ImageEncodingError(
            f"{encoding} image {width}x{height} (step {step}) needs {step * height} bytes, got {buffer.size}"
        )
    rows = buffer[: step * height].reshape(height, step)[:, :row_bytes]
    array = np.ascontiguousarray(rows).view(dtype.newbyteorder(">" if is_bigendian else "<"))
    array = array.astype(dtype, copy=False) if is_bigendian else array
    return array.reshape(height, width, channels) if channels > 1 else array.reshape(height, width)


def decode_color(encoding: str, image: np.ndarray) -> np.ndarray:
    """Convert a decoded color image of ``encoding`` to uint8 RGB (H, W, 3)."""
    if encoding in ("rgb8", "8UC3"):
        return np.ascontiguousarray(image)
    if encoding == "bgr8":
        return np.ascontiguousarray(image[..., ::-1])
    if encoding == "rgba8":
        return np.ascontiguousarray(image[..., :3])
    if encoding == "bgra8":
        return np.ascontiguousarray(image[..., 2::-1])
    if encoding == "mono8":
        return np.repeat(image[..., None], 3, axis=2)
    raise ImageEncodingError(f"{encoding!r} is not a color encoding; expected one of {COLOR_ENCODINGS}")


def decode_depth_m(encoding: str, image: np.ndarray, depth_scale_m: float = 0.001) -> np.ndarray:
    """Convert a decoded depth image to float32 metres with NaN where there is no data.

    16UC1/mono16 are integers in ``depth_scale_m`` (millimetres by the ROS convention) with 0 = no
    data; 32FC1 is metres with NaN/±inf/0 = no data.
    """
    if encoding in ("16UC1", "mono16"):
        depth = image.astype(np.float32) * np.float32(depth_scale_m)
        depth[image == 0] = np.nan
        return depth
    if encoding == "32FC1":
        depth = np.array(image, dtype=np.float32, copy=True)
        depth[~np.isfinite(depth) | (depth <= 0)] = np.nan
        return depth
    raise ImageEncodingError(f"{encoding!r} is not a depth encoding; expected one of {DEPTH_ENCODINGS}")


def depth_m_to_16uc1(depth_m: np.ndarray) -> np.ndarray:
    """float32 metres (NaN invalid) → uint16 millimetres (0 = no data), rounded to the nearest mm."""
    mm = np.multiply(np.asarray(depth_m, dtype=np.float32), np.float32(1000.0))  # one temporary, reused
    np.rint(mm, out=mm)
    valid = mm > 0  # NaN compares false: invalid with the rest; so does +inf below
    valid &= mm <= _MAX_DEPTH_MM
    np.copyto(mm, 0, where=~valid)
    return mm.astype(np.uint16)


def _message_array(message: Any) -> np.ndarray:
    return decode_image(message.encoding, message.height, message.width, message.step, message.data,
                        is_bigendian=bool(message.is_bigendian))


def image_message_to_color(message: Any) -> np.ndarray:
    """A sensor_msgs/Image (rclpy's or one read from a bag; rgb8, bgr8, rgba8, bgra8, mono8) as uint8 (H, W, 3) RGB."""
    return decode_color(message.encoding, _message_array(message))


def image_message_to_depth_m(message: Any) -> np.ndarray:
    """A depth sensor_msgs/Image (16UC1 mm or 32FC1 m) as float32 metres with NaN invalid."""
    return decode_depth_m(message.encoding, _message_array(message))


def color_image_fields(rgb: np.ndarray) -> dict[str, Any]:
    """The rgb8 sensor_msgs/Image fields of a uint8 (H, W, 3) RGB array (``data``: flat uint8)."""
    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"color must be uint8 (H, W, 3) RGB, got {rgb.dtype} {rgb.shape}")
    height, width = rgb.shape[:2]
    return {"height": height, "width": width, "encoding": "rgb8", "is_bigendian": 0, "step": width * 3,
            "data": np.ascontiguousarray(rgb).reshape(-1)}


def depth_image_fields(depth_m: np.ndarray) -> dict[str, Any]:
    """The 16UC1 sensor_msgs/Image fields (millimetres, 0 = no data) of float32 metres with NaN invalid."""
    millimetres = depth_m_to_16uc1(depth_m)
    height, width = millimetres.shape
    return {"height": height, "width": width, "encoding": "16UC1", "is_bigendian": 0, "step": width * 2,
            "data": millimetres.view(np.uint8).reshape(-1)}


def camera_info_fields(model: Any) -> dict[str, Any]:
    """The sensor_msgs/CameraInfo fields of a robopin.geometry.CameraModel but the header and ``roi``
    (``d``, ``k``, ``r``, ``p`` as float64 arrays; no binning)."""
    fields = model.to_camera_info_fields()
    return {"height": fields["height"], "width": fields["width"], "distortion_model": fields["distortion_model"],
            **{key: np.array(fields[key], dtype=np.float64) for key in ("d", "k", "r", "p")},
            "binning_x": 0, "binning_y": 0}


def image_message(types: Mapping[str, Any], header: Any, fields: Mapping[str, Any]) -> Any:
    """A sensor_msgs/Image of ``types`` (a rosbags typestore's) with ``fields`` from :func:`color_image_fields`
    or :func:`depth_image_fields`."""
    return types["sensor_msgs/msg/Image"](header=header, **fields)


def camera_info_message(types: Mapping[str, Any], header: Any, model: Any) -> Any:
    """A sensor_msgs/CameraInfo of ``types`` (a rosbags typestore's: every field given, the ROI empty)."""
    roi = types["sensor_msgs/msg/RegionOfInterest"](x_offset=0, y_offset=0, height=0, width=0, do_rectify=False)
    return types["sensor_msgs/msg/CameraInfo"](header=header, roi=roi, **camera_info_fields(model))
