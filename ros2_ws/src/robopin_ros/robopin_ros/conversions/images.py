"""Camera data ⇄ sensor_msgs Image, CameraInfo and PointCloud2, and robopin.cameras.Frame.

Color goes out as rgb8, aligned depth as 16UC1 millimetres with 0 = no data (the realsense-ros
convention); both carry the color optical frame id, because aligned depth is expressed in the color
camera. Buffers are handed to the message as array.array('B') (rclpy's fast path) and read back with
np.frombuffer (no copy).
"""

from __future__ import annotations

import array

import numpy as np
from sensor_msgs.msg import CameraInfo, Image, PointCloud2, PointField

from robopin.cameras.base import Frame
from robopin.cameras.images import (
    camera_info_fields,
    color_image_fields,
    depth_image_fields,
    image_message_to_color,
    image_message_to_depth_m,
)
from robopin.geometry.camera_model import CameraModel
from robopin_ros.conversions.common import make_header, stamp_to_seconds


def _image_bytes(array_: np.ndarray):
    buffer = array.array("B")
    buffer.frombytes(np.ascontiguousarray(array_).view(np.uint8).reshape(-1).data)
    return buffer


def _image_msg(fields: dict, header):
    return Image(header=header, **{**fields, "data": _image_bytes(fields["data"])})


def color_to_image_msg(rgb: np.ndarray, header):
    """Return an rgb8 sensor_msgs/Image of a uint8 (H, W, 3) RGB array."""
    return _image_msg(color_image_fields(rgb), header)


def depth_to_image_msg(depth_m: np.ndarray, header):
    """Return a 16UC1 (millimetres, 0 = no data) sensor_msgs/Image of float32 metres with NaN invalid."""
    return _image_msg(depth_image_fields(depth_m), header)


def camera_model_to_camera_info(model, header):
    """Return sensor_msgs/CameraInfo of a robopin.geometry.CameraModel."""
    fields = camera_info_fields(model)
    # rclpy takes an unbounded float64 sequence as array('d') (its fast path), not as a numpy array.
    return CameraInfo(header=header, **{**fields, "d": array.array("d", fields["d"].tobytes())})


def camera_info_to_camera_model(info):
    """Return the robopin.geometry.CameraModel of a sensor_msgs/CameraInfo."""
    return CameraModel.from_camera_info(info)


# One decoder for live messages and recorded ones (robopin.cameras.images).
image_msg_to_color = image_message_to_color
image_msg_to_depth_m = image_message_to_depth_m


def frame_to_msgs(frame, stamp_s: float | None = None):
    """Return (color Image, depth Image or None, CameraInfo) of a robopin.cameras.Frame.

    Color, its CameraInfo and aligned depth share one header: the frame's timestamp (or ``stamp_s``)
    and its optical frame id. Unaligned depth (``frame.depth_aligned`` false) carries the same stamp in
    the depth imager's optical frame ``<name>_depth_optical``; its CameraInfo is ``depth_camera_info``.
    """
    stamp = frame.timestamp_s if stamp_s is None else stamp_s
    header = make_header(stamp, frame.optical_frame_id)
    depth = None
    if frame.depth_m is not None:
        depth_header = header if frame.depth_aligned else make_header(stamp, depth_optical_frame_id(frame.camera_name))
        depth = depth_to_image_msg(frame.depth_m, depth_header)
    return color_to_image_msg(frame.color, header), depth, camera_model_to_camera_info(frame.intrinsics, header)


def depth_optical_frame_id(camera_name: str) -> str:
    """The optical frame of a camera's depth imager, for depth left unaligned: ``<name>_depth_optical``."""
    return f"{camera_name or 'camera'}_depth_optical"


def depth_camera_info(frame, stamp_s: float | None = None):
    """CameraInfo of a frame's unaligned depth image (None when its depth is aligned to color)."""
    if frame.depth_intrinsics is None:
        return None
    stamp = frame.timestamp_s if stamp_s is None else stamp_s
    header = make_header(stamp, depth_optical_frame_id(frame.camera_name))
    return camera_model_to_camera_info(frame.depth_intrinsics, header)


def msgs_to_frame(color_msg, depth_msg, info, camera_name: str = "", index: int = 0, *, depth_info=None,
                  T_color_depth=None):
    """Return a robopin.cameras.Frame of a color Image, a depth Image (or None) and CameraInfo.

    Depth is aligned to color unless ``depth_info`` (the depth imager's CameraInfo) and ``T_color_depth``
    (depth optical → color optical, 4x4) are given: then the Frame keeps it unaligned.
    """
    unaligned = depth_msg is not None and depth_info is not None
    return Frame(
        color=image_msg_to_color(color_msg),
        depth_m=None if depth_msg is None else image_msg_to_depth_m(depth_msg),
        intrinsics=camera_info_to_camera_model(info),
        timestamp_s=stamp_to_seconds(color_msg.header.stamp),
        serial="",
        index=index,
        camera_name=camera_name or color_msg.header.frame_id.removesuffix("_optical"),
        depth_intrinsics=camera_info_to_camera_model(depth_info) if unaligned else None,
        T_color_depth=np.asarray(T_color_depth, dtype=np.float64) if unaligned else None,
    )


def point_cloud_to_msg(cloud, header):
    """Return a robopin.geometry.PointCloud as sensor_msgs/PointCloud2 (x, y, z float32 [+ rgb packed])."""
    points = np.ascontiguousarray(cloud.points, dtype=np.float32).reshape(-1, 3)
    fields = [PointField(name=n, offset=4 * i, datatype=PointField.FLOAT32, count=1) for i, n in enumerate("xyz")]
    if cloud.colors is not None:
        rgb = np.asarray(cloud.colors, dtype=np.uint32).reshape(-1, 3)
        packed = ((rgb[:, 0] << 16) | (rgb[:, 1] << 8) | rgb[:, 2]).astype(np.uint32).view(np.float32)
        data = np.column_stack([points, packed[:, None]])
        fields.append(PointField(name="rgb", offset=12, datatype=PointField.FLOAT32, count=1))
    else:
        data = points
    point_step = 4 * data.shape[1]
    return PointCloud2(header=header, height=1, width=len(points), fields=fields, is_bigendian=False,
                       point_step=point_step, row_step=point_step * len(points), is_dense=True,
                       data=_image_bytes(np.ascontiguousarray(data, dtype=np.float32)))


def point_cloud_msg_to_points(msg) -> np.ndarray:
    """Return the x, y, z of a float32 sensor_msgs/PointCloud2 as an (N, 3) float32 array."""
    offsets = {f.name: f.offset for f in msg.fields}
    raw = np.frombuffer(bytes(msg.data), dtype=np.uint8).reshape(-1, msg.point_step)
    return np.stack([raw[:, offsets[a]: offsets[a] + 4].copy().view(np.float32)[:, 0] for a in "xyz"], axis=1)
