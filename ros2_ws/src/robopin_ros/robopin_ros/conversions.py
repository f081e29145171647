"""Every conversion between ROS messages and robopin core types lives here (one module, by area).

Nodes call these; the core library never sees a message. Areas append their own block below,
headed ``# --- <area> ---``. Node processes start through ``robopin_ros.runtime.run_node``.
"""

from __future__ import annotations

import math

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point, Pose, Quaternion, Vector3

from robopin.geometry import transforms as _tf

# --- common ---


def stamp_to_seconds(stamp: Time) -> float:
    """Return a builtin_interfaces/Time as float seconds."""
    return stamp.sec + stamp.nanosec * 1e-9


def seconds_to_stamp(seconds: float) -> Time:
    """Return float seconds as builtin_interfaces/Time (rounded to the nanosecond)."""
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"a ROS time must be finite and non-negative, got {seconds!r}")
    total_ns = round(seconds * 1e9)
    return Time(sec=total_ns // 1_000_000_000, nanosec=total_ns % 1_000_000_000)


def vector_to_point(xyz) -> Point:
    """Return a 3-vector as geometry_msgs/Point."""
    x, y, z = (float(c) for c in xyz)
    return Point(x=x, y=y, z=z)


def vector_to_vector3(xyz) -> Vector3:
    """Return a 3-vector as geometry_msgs/Vector3."""
    x, y, z = (float(c) for c in xyz)
    return Vector3(x=x, y=y, z=z)


def point_to_vector(point: Point | Vector3) -> np.ndarray:
    """Return a geometry_msgs Point or Vector3 as a float64 3-vector."""
    return np.array([point.x, point.y, point.z], dtype=np.float64)


def matrix_to_pose(T: np.ndarray) -> Pose:
    """Return a 4x4 homogeneous transform as geometry_msgs/Pose."""
    T = np.asarray(T, dtype=np.float64)
    qx, qy, qz, qw = _tf.matrix_to_quaternion(T[:3, :3])
    return Pose(position=vector_to_point(T[:3, 3]), orientation=Quaternion(x=qx, y=qy, z=qz, w=qw))


def pose_to_matrix(pose: Pose) -> np.ndarray:
    """Return geometry_msgs/Pose as a 4x4 homogeneous transform."""
    q = pose.orientation
    R = _tf.quaternion_to_matrix([q.x, q.y, q.z, q.w])
    return _tf.make_transform(R, point_to_vector(pose.position))


# --- pincot ---
# Trace ⇄ robopin_interfaces/msg/PinnedReasoning. The message carries what consumers need (anchors
# with pixels, answer points, issues, three metrics); what it lacks (issue offsets, reference
# offsets, the other metrics) is re-derived from raw_text by msg_to_trace.

import dataclasses as _dataclasses  # noqa: E402
from collections.abc import Sequence as _Sequence  # noqa: E402

from robopin_interfaces.msg import Anchor as _AnchorMsg  # noqa: E402
from robopin_interfaces.msg import AnswerPoint as _AnswerPointMsg  # noqa: E402
from robopin_interfaces.msg import PinnedReasoning as _PinnedReasoningMsg  # noqa: E402
from robopin_interfaces.msg import ReasoningIssue as _ReasoningIssueMsg  # noqa: E402
from std_msgs.msg import Header as _Header  # noqa: E402

from robopin import pincot as _pincot  # noqa: E402
from robopin.pincot.coords import normalized_to_pixels as _normalized_to_pixels  # noqa: E402


def _view_pixels(
    x: float, y: float, img_idx: int | None, image_sizes: _Sequence[tuple[int, int]] | None
) -> tuple[float, float]:
    """0–1000 point → pixels of view img_idx's original image, NaN when the view or its size is unknown."""
    if image_sizes is None or img_idx is None or not 0 <= img_idx < len(image_sizes):
        return math.nan, math.nan
    return _normalized_to_pixels(x, y, image_sizes[img_idx])


def anchor_to_msg(anchor: _pincot.Anchor, image_sizes: _Sequence[tuple[int, int]] | None = None) -> _AnchorMsg:
    """Return a core Anchor as robopin_interfaces/Anchor (u, v NaN without the view's image size)."""
    u, v = _view_pixels(anchor.x, anchor.y, anchor.img_idx, image_sizes)
    return _AnchorMsg(
        kind=anchor.kind,
        name=anchor.name,
        id=anchor.id,
        img_idx=anchor.img_idx,
        x=float(anchor.x),
        y=float(anchor.y),
        u=float(u),
        v=float(v),
        char_offset=anchor.offset,
    )


def answer_point_to_msg(
    point: _pincot.AnswerPoint, image_sizes: _Sequence[tuple[int, int]] | None = None
) -> _AnswerPointMsg:
    """Return a core AnswerPoint as robopin_interfaces/AnswerPoint (img_idx -1 and NaN pixels when no view)."""
    u, v = _view_pixels(point.x, point.y, point.img_idx, image_sizes)
    return _AnswerPointMsg(
        img_idx=-1 if point.img_idx is None else point.img_idx,
        x=float(point.x),
        y=float(point.y),
        u=float(u),
        v=float(v),
        label=point.label or "",
        id=point.id or "",
    )


def issue_to_msg(issue: _pincot.Issue, *, is_error: bool) -> _ReasoningIssueMsg:
    """Return a core Issue as robopin_interfaces/ReasoningIssue."""
    return _ReasoningIssueMsg(code=issue.code, message=issue.message, is_error=is_error)


def trace_to_msg(
    trace: _pincot.Trace,
    *,
    image_sizes: _Sequence[tuple[int, int]] | None = None,
    view_names: _Sequence[str] = (),
    header: _Header | None = None,
    task_id: str = "",
    step: int = 0,
    instruction: str = "",
    model: str = "",
    generation_time_s: float = 0.0,
) -> _PinnedReasoningMsg:
    """Return a parsed Trace as robopin_interfaces/PinnedReasoning.

    ``image_sizes`` are the (width, height) of each view's original image, used for the pixel fields.
    """
    if view_names and len(view_names) != trace.num_views:
        raise ValueError(f"{len(view_names)} view names given for a trace over {trace.num_views} view(s)")
    return _PinnedReasoningMsg(
        header=header if header is not None else _Header(),
        task_id=task_id,
        step=step,
        instruction=instruction,
        model=model,
        raw_text=trace.text,
        think=trace.think,
        answer=trace.answer,
        anchors=[anchor_to_msg(a, image_sizes) for a in trace.anchors],
        references=[r.id for r in trace.references],
        answer_points=[answer_point_to_msg(p, image_sizes) for p in trace.answer_points],
        view_names=list(view_names),
        valid=trace.valid,
        errors=[issue_to_msg(e, is_error=True) for e in trace.errors],
        warnings=[issue_to_msg(w, is_error=False) for w in trace.warnings],
        format_score=float(trace.metrics.get("format", 0.0)),
        identity_consistency=float(trace.metrics.get("consistency", 0.0)),
        anchor_coverage=float(trace.metrics.get("anchor_coverage", 0.0)),
        generation_time_s=float(generation_time_s),
    )


def msg_to_trace(msg: _PinnedReasoningMsg, num_views: int | None = None) -> _pincot.Trace:
    """Return robopin_interfaces/PinnedReasoning as a core Trace.

    The message's anchors, answer points, issues, validity and three metrics are taken as published.
    Block spans, reference offsets, issue offsets and the remaining metrics are re-derived by parsing
    raw_text over ``num_views`` views (default: the number of view names, else the highest img_idx + 1).
    """
    if num_views is None:
        indices = [a.img_idx for a in msg.anchors] + [p.img_idx for p in msg.answer_points]
        num_views = len(msg.view_names) or max([1, *(i + 1 for i in indices)])
    reread = _pincot.parse(msg.raw_text, num_views, expect_points=bool(msg.answer_points))
    answer_start, answer_end = reread.answer_span
    anchors = tuple(
        _pincot.Anchor(
            kind=a.kind,
            name=a.name,
            id=a.id,
            img_idx=a.img_idx,
            x=a.x,
            y=a.y,
            offset=a.char_offset,
            in_answer=reread.has_answer and answer_start <= a.char_offset < answer_end,
        )
        for a in msg.anchors
    )
    answer_points = tuple(
        _pincot.AnswerPoint(
            x=p.x, y=p.y, img_idx=None if p.img_idx < 0 else p.img_idx, label=p.label or None, id=p.id or None
        )
        for p in msg.answer_points
    )
    offsets = {(i.code, i.message): i.offset for i in (*reread.errors, *reread.warnings)}
    errors = tuple(_pincot.Issue(e.code, e.message, offsets.get((e.code, e.message), -1)) for e in msg.errors)
    warnings = tuple(_pincot.Issue(w.code, w.message, offsets.get((w.code, w.message), -1)) for w in msg.warnings)
    if not msg.valid and not errors:
        # Never let a message marked invalid turn into a valid trace because it named no error.
        errors = (_pincot.Issue("invalid_message", "the message is marked invalid but names no error"),)
    if [r.id for r in reread.references] == list(msg.references):
        references = reread.references
    else:
        references = tuple(_pincot.Reference(ref, -1) for ref in msg.references)
    metrics = dict(reread.metrics)
    metrics.update(format=msg.format_score, consistency=msg.identity_consistency, anchor_coverage=msg.anchor_coverage)
    return _dataclasses.replace(
        reread,
        think=msg.think,
        answer=msg.answer,
        anchors=anchors,
        references=references,
        answer_points=answer_points,
        errors=errors,
        warnings=warnings,
        metrics=metrics,
    )


# --- reasoning ---
# The planner's core types ⇄ messages: robopin.geometry.PointRequest → Anchor (ProjectPoints request),
# Target3D → robopin.geometry.Target, robopin.reasoning.ReasoningRecord → PinnedReasoning (PinCoT traces
# through trace_to_msg; R^3 subtask and RoboGPT-R1 plan responses with their think/answer and issues).


def point_request_to_anchor_msg(request, image_size: tuple[int, int], kind: str = "obj") -> _AnchorMsg:
    """Return a robopin.geometry.PointRequest (pixels) as robopin_interfaces/Anchor with its 0–1000 point."""
    x, y = _pincot.pixels_to_normalized(request.u, request.v, image_size)
    return _AnchorMsg(kind=kind, name=request.name, id=request.id, img_idx=int(request.img_idx),
                      x=float(x), y=float(y), u=float(request.u), v=float(request.v), char_offset=-1)


def target3d_msg_to_target(msg):
    """Return robopin_interfaces/Target3D as robopin.geometry.Target (a zero normal becomes NaN)."""
    from robopin.geometry import RefusalReason, Target

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
                  frame=msg.header.frame_id or "base", valid=bool(msg.valid), reason=reason)


def reasoning_record_to_msg(record, header: _Header | None = None) -> _PinnedReasoningMsg:
    """Return a robopin.reasoning.ReasoningRecord as robopin_interfaces/PinnedReasoning."""
    header = header if header is not None else _Header(stamp=seconds_to_stamp(max(record.stamp_s, 0.0)))
    if record.trace is not None:
        msg = trace_to_msg(record.trace, image_sizes=record.image_sizes, view_names=record.view_names,
                           header=header, task_id=record.task_id, step=record.step, instruction=record.instruction,
                           model=record.model, generation_time_s=record.generation_time_s)
        # The loop may refuse a well-formed trace (e.g. no place point): the message must say so too.
        known = {(e.code, e.message) for e in record.trace.errors}
        msg.errors.extend(issue_to_msg(e, is_error=True) for e in record.errors if (e.code, e.message) not in known)
        msg.valid = bool(record.valid)
        return msg
    return _PinnedReasoningMsg(
        header=header, task_id=record.task_id, step=record.step, instruction=record.instruction, model=record.model,
        raw_text=record.text, think=record.think, answer=record.answer, view_names=list(record.view_names),
        valid=bool(record.valid), errors=[issue_to_msg(e, is_error=True) for e in record.errors],
        warnings=[issue_to_msg(w, is_error=False) for w in record.warnings],
        # R^3 and RoboGPT-R1 responses carry no anchors: PinCoT's identity and coverage measures are NaN
        # (not measured), and format_score is the response's own (RoboGPT-R1's, or R^3's instruction validity).
        format_score=float(record.metrics.get("format", record.metrics.get("instruction_validity", math.nan))),
        identity_consistency=math.nan, anchor_coverage=math.nan,
        generation_time_s=float(record.generation_time_s),
    )


# --- cameras ---
# sensor_msgs Image / CameraInfo ⇄ numpy and robopin.cameras.Frame. Color goes out as rgb8, aligned depth
# as 16UC1 millimetres with 0 = no data (the realsense-ros convention); both carry the color optical
# frame id, because aligned depth is expressed in the color camera. Buffers are handed to the message
# as array.array('B') (rclpy's fast path) and read back with np.frombuffer (no copy).


def _image_bytes(array_: np.ndarray):
    import array as _array

    buffer = _array.array("B")
    buffer.frombytes(np.ascontiguousarray(array_).view(np.uint8).reshape(-1).data)
    return buffer


def make_header(stamp_s: float, frame_id: str):
    """Return a std_msgs/Header for ``stamp_s`` (float seconds) and ``frame_id``."""
    from std_msgs.msg import Header

    return Header(stamp=seconds_to_stamp(stamp_s), frame_id=frame_id)


def color_to_image_msg(rgb: np.ndarray, header):
    """Return an rgb8 sensor_msgs/Image of a uint8 (H, W, 3) RGB array."""
    from sensor_msgs.msg import Image

    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"color must be uint8 (H, W, 3) RGB, got {rgb.dtype} {rgb.shape}")
    height, width = rgb.shape[:2]
    return Image(header=header, height=height, width=width, encoding="rgb8", is_bigendian=0, step=width * 3,
                 data=_image_bytes(rgb))


def depth_to_image_msg(depth_m: np.ndarray, header):
    """Return a 16UC1 (millimetres, 0 = no data) sensor_msgs/Image of float32 metres with NaN invalid."""
    from sensor_msgs.msg import Image

    from robopin.cameras.images import depth_m_to_16uc1

    millimetres = depth_m_to_16uc1(depth_m)
    height, width = millimetres.shape
    return Image(header=header, height=height, width=width, encoding="16UC1", is_bigendian=0, step=width * 2,
                 data=_image_bytes(millimetres))


def camera_model_to_camera_info(model, header):
    """Return sensor_msgs/CameraInfo of a robopin.geometry.CameraModel."""
    from sensor_msgs.msg import CameraInfo

    fields = model.to_camera_info_fields()
    return CameraInfo(header=header, height=fields["height"], width=fields["width"],
                      distortion_model=fields["distortion_model"], d=[float(x) for x in fields["d"]],
                      k=[float(x) for x in fields["k"]], r=[float(x) for x in fields["r"]],
                      p=[float(x) for x in fields["p"]])


def camera_info_to_camera_model(info):
    """Return the robopin.geometry.CameraModel of a sensor_msgs/CameraInfo."""
    from robopin.geometry.camera_model import CameraModel

    return CameraModel.from_camera_info(info)


def image_msg_to_color(msg) -> np.ndarray:
    """Return a sensor_msgs/Image (rgb8, bgr8, rgba8, bgra8, mono8) as uint8 (H, W, 3) RGB."""
    from robopin.cameras.images import decode_color, decode_image

    image = decode_image(msg.encoding, msg.height, msg.width, msg.step, msg.data, is_bigendian=bool(msg.is_bigendian))
    return decode_color(msg.encoding, image)


def image_msg_to_depth_m(msg) -> np.ndarray:
    """Return a depth sensor_msgs/Image (16UC1 mm or 32FC1 m) as float32 metres with NaN invalid."""
    from robopin.cameras.images import decode_depth_m, decode_image

    image = decode_image(msg.encoding, msg.height, msg.width, msg.step, msg.data, is_bigendian=bool(msg.is_bigendian))
    return decode_depth_m(msg.encoding, image)


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
    from robopin.cameras.base import Frame

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


# --- geometry ---
# robopin_interfaces Anchor → robopin.geometry.PointRequest, Target → Target3D, targets → RViz markers,
# PoseStamped → T_base_ee, PointCloud → sensor_msgs/PointCloud2 (float32 x, y, z [+ packed rgb]).


def anchor_msg_to_point_request(anchor, image_size: tuple[int, int] | None = None):
    """Return a robopin.geometry.PointRequest of a robopin_interfaces/Anchor.

    The anchor's pixels (u, v) are used; when they are NaN and the view's (width, height) is known, they
    are computed from the model's 0–1000 point (x, y).
    """
    from robopin.geometry import PointRequest

    u, v = float(anchor.u), float(anchor.v)
    if not (math.isfinite(u) and math.isfinite(v)) and image_size is not None:
        u, v = _normalized_to_pixels(float(anchor.x), float(anchor.y), image_size)
    return PointRequest(u=u, v=v, img_idx=int(anchor.img_idx), id=anchor.id, name=anchor.name)


def target_to_msg(target, frame_id: str = "base"):
    """Return a robopin.geometry.Target as robopin_interfaces/Target3D (NaN point/normal become zeros)."""
    from robopin_interfaces.msg import Target3D

    point = target.point if np.all(np.isfinite(target.point)) else np.zeros(3)
    normal = target.normal if np.all(np.isfinite(target.normal)) else np.zeros(3)
    stamp = seconds_to_stamp(target.stamp_s) if math.isfinite(target.stamp_s) and target.stamp_s >= 0 else Time()
    reason = "" if target.valid else str(target.reason or "")
    return Target3D(
        header=_Header(stamp=stamp, frame_id=frame_id),
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
    )


def pose_stamped_to_seconds_and_matrix(msg) -> tuple[float, np.ndarray]:
    """Return (stamp seconds, 4x4 T_frame_child) of a geometry_msgs/PoseStamped."""
    return stamp_to_seconds(msg.header.stamp), pose_to_matrix(msg.pose)


def targets_to_marker_array(targets, frame_id: str, stamp: Time, namespace: str = "robopin_targets"):
    """Return a visualization_msgs/MarkerArray drawing targets: spheres (green valid, red refused),
    normal arrows, and text labels "id name" or "id: reason". The first marker clears the previous set.
    """
    from visualization_msgs.msg import Marker, MarkerArray

    markers = [Marker(action=Marker.DELETEALL, ns=namespace)]
    for index, target in enumerate(targets):
        if not np.all(np.isfinite(target.point)):
            continue
        header = _Header(stamp=stamp, frame_id=frame_id)
        color = (0.1, 0.9, 0.2, 0.9) if target.valid else (0.95, 0.15, 0.1, 0.9)
        sphere = Marker(header=header, ns=namespace, id=3 * index, type=Marker.SPHERE, action=Marker.ADD)
        sphere.pose.position = vector_to_point(target.point)
        sphere.pose.orientation.w = 1.0
        sphere.scale = Vector3(x=0.015, y=0.015, z=0.015)
        sphere.color.r, sphere.color.g, sphere.color.b, sphere.color.a = color
        markers.append(sphere)
        if np.all(np.isfinite(target.normal)):
            arrow = Marker(header=header, ns=namespace, id=3 * index + 1, type=Marker.ARROW, action=Marker.ADD)
            arrow.points = [vector_to_point(target.point), vector_to_point(target.point + 0.05 * target.normal)]
            arrow.pose.orientation.w = 1.0
            arrow.scale = Vector3(x=0.004, y=0.008, z=0.01)
            arrow.color.r, arrow.color.g, arrow.color.b, arrow.color.a = color
            markers.append(arrow)
        label = Marker(header=header, ns=namespace, id=3 * index + 2, type=Marker.TEXT_VIEW_FACING,
                       action=Marker.ADD)
        label.pose.position = vector_to_point(target.point + np.array([0.0, 0.0, 0.03]))
        label.pose.orientation.w = 1.0
        label.scale.z = 0.02
        label.color.r = label.color.g = label.color.b = label.color.a = 1.0
        label.text = f"{target.id} {target.name}".strip() if target.valid else f"{target.id}: {target.reason}"
        markers.append(label)
    return MarkerArray(markers=markers)


def marker_array_to_targets(msg) -> list[dict]:
    """Read back what ``targets_to_marker_array`` drew: per target its id, label, base-frame point and
    whether it was valid (refused targets without a point are not drawn, so they are not here either).

    A client that only sees the marker topic (the trial runner) records with it where each pinned point
    went in 3D.
    """
    from visualization_msgs.msg import Marker

    drawn: dict[int, dict] = {}
    for marker in msg.markers:
        if marker.action != Marker.ADD:
            continue
        entry = drawn.setdefault(marker.id // 3, {})
        if marker.type == Marker.SPHERE:
            p = marker.pose.position
            entry["point"] = [float(p.x), float(p.y), float(p.z)]
            entry["valid"] = bool(marker.color.g > marker.color.r)
            entry["frame"] = marker.header.frame_id
        elif marker.type == Marker.TEXT_VIEW_FACING:
            identifier, _, rest = marker.text.partition(" ")
            if identifier.endswith(":"):
                entry["id"], entry["reason"] = identifier[:-1], rest.strip()
            else:
                entry["id"], entry["name"] = identifier, rest.strip()
    return [drawn[k] for k in sorted(drawn) if "point" in drawn[k]]


def point_cloud_to_msg(cloud, header):
    """Return a robopin.geometry.PointCloud as sensor_msgs/PointCloud2 (x, y, z float32 [+ rgb packed])."""
    from sensor_msgs.msg import PointCloud2, PointField

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


# --- motion ---


def _duration(seconds: float):
    from builtin_interfaces.msg import Duration

    whole = math.floor(seconds)
    return Duration(sec=int(whole), nanosec=min(round((seconds - whole) * 1e9), 999_999_999))


def motion_trajectory_to_msg(trajectory, frame_id: str = "base"):
    """Return a robopin.motion JointTrajectory as trajectory_msgs/JointTrajectory (stamp 0: start now)."""
    from trajectory_msgs.msg import JointTrajectory as _JointTrajectoryMsg
    from trajectory_msgs.msg import JointTrajectoryPoint

    msg = _JointTrajectoryMsg()
    msg.header.frame_id = frame_id
    msg.joint_names = list(trajectory.joint_names)
    for i, t in enumerate(trajectory.times_s):
        msg.points.append(
            JointTrajectoryPoint(
                positions=[float(v) for v in trajectory.positions[i]],
                velocities=[float(v) for v in trajectory.velocities[i]],
                accelerations=[float(v) for v in trajectory.accelerations[i]],
                time_from_start=_duration(float(t)),
            )
        )
    return msg


def msg_to_motion_trajectory(msg):
    """Return a trajectory_msgs/JointTrajectory as a robopin.motion JointTrajectory (missing rates = 0)."""
    from robopin.motion.types import JointTrajectory as _MotionTrajectory

    n, dof = len(msg.points), len(msg.joint_names)
    times = np.array([p.time_from_start.sec + p.time_from_start.nanosec * 1e-9 for p in msg.points])
    positions = np.array([list(p.positions) for p in msg.points], dtype=np.float64).reshape(n, dof)

    def rates(field: str) -> np.ndarray:
        values = [list(getattr(p, field)) for p in msg.points]
        return np.array(values, dtype=np.float64) if all(len(v) == dof for v in values) else np.zeros((n, dof))

    return _MotionTrajectory(tuple(msg.joint_names), times, positions, rates("velocities"), rates("accelerations"))


def target3d_to_pick_point(msg) -> tuple[np.ndarray, np.ndarray | None]:
    """The point (m) and unit normal (None when zero) of a robopin_interfaces/Target3D."""
    normal = point_to_vector(msg.normal)
    norm = float(np.linalg.norm(normal))
    return point_to_vector(msg.point), (normal / norm if norm > 1e-9 else None)


# --- robots ---

from builtin_interfaces.msg import Duration as _DurationMsg  # noqa: E402
from sensor_msgs.msg import JointState as _JointStateMsg  # noqa: E402
from trajectory_msgs.msg import JointTrajectory as _JointTrajectoryMsg  # noqa: E402
from trajectory_msgs.msg import JointTrajectoryPoint as _JointTrajectoryPointMsg  # noqa: E402

from robopin.robots import state as _arm_state  # noqa: E402
from robopin.robots import trajectory as _arm_trajectory  # noqa: E402


def msg_to_arm_trajectory(msg: _JointTrajectoryMsg) -> _arm_trajectory.JointTrajectory:
    """A trajectory_msgs/JointTrajectory as the arm layer's JointTrajectory (raises TrajectoryError).

    Velocities are kept only when every point has one per joint; accelerations are not used.
    """
    names = tuple(msg.joint_names)
    if not msg.points:
        raise _arm_trajectory.TrajectoryError("the trajectory has no points")
    dof = len(names)
    for index, point in enumerate(msg.points):
        if len(point.positions) != dof:
            raise _arm_trajectory.TrajectoryError(
                f"point {index} has {len(point.positions)} positions for {dof} joints {names}"
            )
    times = [p.time_from_start.sec + p.time_from_start.nanosec * 1e-9 for p in msg.points]
    positions = [list(p.positions) for p in msg.points]
    velocities = None
    if all(len(p.velocities) == dof for p in msg.points):
        velocities = [list(p.velocities) for p in msg.points]
    return _arm_trajectory.JointTrajectory(names, times, positions, velocities)


def arm_trajectory_to_msg(trajectory: _arm_trajectory.JointTrajectory) -> _JointTrajectoryMsg:
    """The arm layer's JointTrajectory as trajectory_msgs/JointTrajectory (header left empty)."""
    msg = _JointTrajectoryMsg(joint_names=list(trajectory.joint_names))
    for index, t in enumerate(trajectory.times_s):
        total_ns = round(float(t) * 1e9)
        point = _JointTrajectoryPointMsg(
            positions=[float(v) for v in trajectory.positions[index]],
            time_from_start=_DurationMsg(sec=total_ns // 1_000_000_000, nanosec=total_ns % 1_000_000_000),
        )
        if trajectory.velocities is not None:
            point.velocities = [float(v) for v in trajectory.velocities[index]]
        msg.points.append(point)
    return msg


def joint_state_to_msg(state: _arm_state.JointState, stamp_s: float) -> _JointStateMsg:
    """A measured joint state as sensor_msgs/JointState stamped ``stamp_s`` (ROS time, seconds)."""
    msg = _JointStateMsg(name=list(state.names), position=[float(v) for v in state.positions])
    msg.header.stamp = seconds_to_stamp(stamp_s)
    if state.velocities is not None:
        msg.velocity = [float(v) for v in state.velocities]
    if state.efforts is not None:
        msg.effort = [float(v) for v in state.efforts]
    return msg


def msg_to_joint_state(msg: _JointStateMsg) -> _arm_state.JointState:
    """A sensor_msgs/JointState as the arm layer's JointState (stamped now on the monotonic clock)."""
    n = len(msg.name)
    velocities = list(msg.velocity) if len(msg.velocity) == n else None
    efforts = list(msg.effort) if len(msg.effort) == n else None
    return _arm_state.JointState(tuple(msg.name), list(msg.position), velocities, efforts)


# --- control_msgs: FollowJointTrajectory and GripperCommand (the ros2_control actions) ----------------------
from control_msgs.action import FollowJointTrajectory as _FollowJointTrajectory  # noqa: E402

from robopin.robots.errors import Reason as _Reason  # noqa: E402

_FJT = _FollowJointTrajectory.Result
# How a robopin reason maps onto FollowJointTrajectory's error codes (control_msgs jazzy,
# action/FollowJointTrajectory.action). Refusals before motion are INVALID_GOAL (joint names:
# INVALID_JOINTS); an end off the goal is GOAL_TOLERANCE_VIOLATED; anything that cut a started motion
# short (tracking, watchdog, fault) is PATH_TOLERANCE_VIOLATED. error_string always starts with the reason.
_GOAL_REASONS = {_Reason.JOINT_NAMES: _FJT.INVALID_JOINTS, _Reason.GOAL_TOLERANCE: _FJT.GOAL_TOLERANCE_VIOLATED}


def follow_joint_trajectory_error_code(reason: _Reason, *, started: bool) -> int:
    """The FollowJointTrajectory error code for a robopin ``reason`` (``started``: the arm had moved)."""
    if reason in (_Reason.COMPLETED, _Reason.DRY_RUN):
        return _FJT.SUCCESSFUL
    if reason in _GOAL_REASONS:
        return _GOAL_REASONS[reason]
    return _FJT.PATH_TOLERANCE_VIOLATED if started else _FJT.INVALID_GOAL


def follow_joint_trajectory_result(error_code: int, reason: str, message: str) -> _FJT:
    """A FollowJointTrajectory result whose error_string reads ``<reason>: <message>``."""
    return _FJT(error_code=int(error_code), error_string=f"{reason}: {message}" if message else reason)


def resolve_joint_tolerances(tolerances, joint_names, default: float, field: str = "position") -> np.ndarray:
    """Per-joint tolerances from control_msgs/JointTolerance[] (``field`` of each), in ``joint_names`` order.

    As joint_trajectory_controller reads them (ros2_controllers tolerances.hpp, resolve_tolerance_source):
    > 0 replaces the default, 0 keeps it, -1 erases it (no limit: inf here); other negative values and
    joints the arm does not have are refused (ValueError; the controller logs and uses its defaults).
    """
    result = np.full(len(joint_names), float(default))
    index = {name: i for i, name in enumerate(joint_names)}
    for tolerance in tolerances:
        if tolerance.name not in index:
            raise KeyError(f"tolerance for unknown joint {tolerance.name!r}; the arm has {list(joint_names)}")
        value = float(getattr(tolerance, field))
        if value > 0.0:
            result[index[tolerance.name]] = value
        elif abs(value + 1.0) < 1e-6:
            result[index[tolerance.name]] = math.inf
        elif value < 0.0:
            raise ValueError(f"{field} tolerance {value} for {tolerance.name!r}: only > 0, 0 or -1 are allowed")
    return result


def trajectory_point_msg(positions, velocities=None, time_from_start_s: float = 0.0) -> _JointTrajectoryPointMsg:
    """A trajectory_msgs/JointTrajectoryPoint (for FollowJointTrajectory feedback)."""
    total_ns = max(0, round(float(time_from_start_s) * 1e9))
    point = _JointTrajectoryPointMsg(
        positions=[float(v) for v in positions],
        time_from_start=_DurationMsg(sec=total_ns // 1_000_000_000, nanosec=total_ns % 1_000_000_000),
    )
    if velocities is not None:
        point.velocities = [float(v) for v in velocities]
    return point


# --- tf ---

from geometry_msgs.msg import Transform as _TransformMsg  # noqa: E402
from geometry_msgs.msg import TransformStamped as _TransformStampedMsg  # noqa: E402
from std_msgs.msg import Header as _HeaderMsg  # noqa: E402


def frame_transforms_to_tf_message(edges, stamp: Time):
    """``robopin.robots.state_publisher.FrameTransform`` edges as one tf2_msgs/TFMessage stamped ``stamp``."""
    from tf2_msgs.msg import TFMessage

    transforms = []
    for edge in edges:
        T = np.asarray(edge.T_parent_child, dtype=np.float64)
        qx, qy, qz, qw = _tf.matrix_to_quaternion(T[:3, :3])
        transforms.append(_TransformStampedMsg(
            header=_HeaderMsg(stamp=stamp, frame_id=edge.parent), child_frame_id=edge.child,
            transform=_TransformMsg(translation=vector_to_vector3(T[:3, 3]),
                                    rotation=Quaternion(x=qx, y=qy, z=qz, w=qw))))
    return TFMessage(transforms=transforms)


def joint_state_positions(msg: _JointStateMsg) -> dict[str, float]:
    """Joint name → position of a sensor_msgs/JointState (names without a position are left out)."""
    return {name: float(value) for name, value in zip(msg.name, msg.position, strict=False)}


def trajectory_tool_paths(trajectories, description) -> list[np.ndarray]:
    """The TCP positions (N, 3) in the base frame along each trajectory_msgs/JointTrajectory (by joint name)."""
    paths = []
    for trajectory in trajectories:
        index = {name: i for i, name in enumerate(trajectory.joint_names)}
        if not all(name in index for name in description.joint_names):
            continue
        q = np.array([[point.positions[index[name]] for name in description.joint_names]
                      for point in trajectory.points], dtype=np.float64)
        paths.append(description.forward_kinematics_batch(q)[:, :3, 3] if len(q) else np.zeros((0, 3)))
    return paths


def tool_paths_to_marker_array(paths, frame_id: str, stamp: Time, namespace: str = "robopin_planned_path"):
    """A visualization_msgs/MarkerArray with one line strip per planned phase (RViz and Foxglove draw it)."""
    from visualization_msgs.msg import Marker, MarkerArray

    markers = [Marker(action=Marker.DELETEALL, ns=namespace)]
    for index, path in enumerate(paths):
        strip = Marker(header=_HeaderMsg(stamp=stamp, frame_id=frame_id), ns=namespace, id=index,
                       type=Marker.LINE_STRIP, action=Marker.ADD)
        strip.points = [vector_to_point(p) for p in path]
        strip.pose.orientation.w = 1.0
        strip.scale.x = 0.005
        hue = index / max(1, len(paths) - 1)
        strip.color.r, strip.color.g, strip.color.b, strip.color.a = 0.2 + 0.8 * hue, 0.4, 1.0 - 0.8 * hue, 0.9
        markers.append(strip)
    return MarkerArray(markers=markers)

