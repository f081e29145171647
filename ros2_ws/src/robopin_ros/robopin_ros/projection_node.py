"""projection_node: the ProjectPoints service — pinned 2D anchors to 3D targets in the base frame.

Subscribes per configured view (``views[i]`` is ``img_idx`` i) to realsense-ros style topics
``<camera_prefix>/<view>/aligned_depth_to_color/image_raw`` and ``.../color/camera_info`` (and
``.../color/image_raw`` when ``sync_color``), or another driver's names and QoS set by ``cameras.<view>.*``
(robopin.cameras.topics), pairs them by stamp, and keeps the last few synced
frames. Arm poses for wrist views come from a ``geometry_msgs/PoseStamped`` of the end effector in
base (``ee_pose_topic``) and/or ``sensor_msgs/JointState`` through the forward kinematics of
``robot_description``. Camera mounts come from ``<calibration_dir>/<view>.yaml`` or the
``calibrations`` parameters (view -> mount: ``calibrations.<view>.parent_frame``, ...). A view listed in
``unaligned_depth`` (view -> ``T_color_depth``) reads ``.../depth/image_rect_raw`` and ``.../depth/camera_info``
instead and registers depth to color on demand. Serves ``/robopin/project_points`` and draws the
targets on ``/robopin/targets/markers``; with ``cloud_period_s`` > 0 publishes the workspace point cloud
(``/robopin/workspace_cloud``, base frame, cropped to ``workspace``) from the views in ``cloud_views``
(default: every calibrated view; a static-only list keeps a moving wrist camera out of the obstacles).

    ros2 run robopin_ros projection_node --ros-args -p views:="['static', 'wrist']" \\
        -p calibration_dir:=calibration -p workspace.min_xyz:="[0.1, -0.5, -0.02]" \\
        -p workspace.max_xyz:="[0.9, 0.5, 0.6]"
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import math
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseStamped
from robopin_interfaces.srv import ProjectPoints
from sensor_msgs.msg import CameraInfo, Image, JointState, PointCloud2
from visualization_msgs.msg import MarkerArray

from robopin.calibration import load_mount_for_view
from robopin.cameras.pairing import StampPairer
from robopin.geometry import (
    CalibrationError,
    CameraMount,
    CrossViewConfig,
    DepthConfig,
    PoseBuffer,
    ProjectionConfig,
    Projector,
    StalePoseError,
    ViewConfig,
    ViewData,
    WorkspaceBox,
    align_depth_to_color,
    depth_to_point_cloud,
    mount_from_dict,
    voxel_downsample,
)
from robopin.geometry.pointcloud import PointCloud
from robopin.interfaces import PROJECT_POINTS, TARGET_MARKERS, WORKSPACE_CLOUD
from robopin.system.node_settings import ProjectionNodeSettings, settings_from
from robopin_ros import conversions
from robopin_ros.camera_snapshot import QosMismatchWatch, camera_qos, declare_view_topics
from robopin_ros.logs import LoggedNode
from robopin_ros.parameters import declare_settings
from robopin_ros.runtime import run_node, steady_timer

# A running node refuses stale frames; the core's default (0: no check) is for offline projection.
NODE_PROJECTION_DEFAULTS = dataclasses.replace(ProjectionConfig(), max_frame_age_s=1.0)


_DECODED_FRAMES = 3
"""Decoded frames kept per view: the newest (the cloud's) and the one or two a running task asks about."""


@dataclass
class _SyncedFrame:
    stamp_s: float
    depth: Image
    info: CameraInfo
    color: Image | None
    depth_info: CameraInfo | None = None


class _ViewStreams:
    """Recent depth / info / color messages of one view, paired by stamp into synced frames.

    Messages are kept undecoded: decoding happens only for the frame a request uses. An unaligned
    view also pairs the depth camera's own CameraInfo (``depth_info``).
    """

    def __init__(self, tolerance_s: float, keep: int, sync_color: bool, unaligned: bool = False,
                 history_s: float = 0.0) -> None:
        self.tolerance_s = tolerance_s
        self.history_s = history_s
        self.sync_color = sync_color
        self.unaligned = unaligned
        self.lock = threading.Lock()
        partners = ["info"] + (["color"] if sync_color else []) + (["depth_info"] if unaligned else [])
        self.pairer = StampPairer("depth", partners, tolerance_s, keep)
        self.keep = keep
        self.frames: collections.deque[_SyncedFrame] = collections.deque()

    def add(self, kind: str, msg: Any) -> None:
        stamp = conversions.stamp_to_seconds(msg.header.stamp)
        with self.lock:
            for group in self.pairer.add(kind, stamp, msg):
                items = group.items
                if self.frames and self.frames[-1].stamp_s == group.stamp_s:
                    # A still simulated cell: its clock stands, so each frame rendered meanwhile has the same stamp
                    # and shows the same cell. The newest stands for them all (the history stays bounded).
                    self.frames.pop()
                self.frames.append(_SyncedFrame(group.stamp_s, items["depth"], items["info"], items.get("color"),
                                                items.get("depth_info")))
            # Keep ``history_s`` of frames (at least ``keep``): a request names the frame its points were
            # drawn on, taken before the model answered, seconds ago.
            while len(self.frames) > self.keep and self.frames[0].stamp_s < self.frames[-1].stamp_s - self.history_s:
                self.frames.popleft()

    def pick(self, stamp_s: float | None, tolerance_s: float | None = None) -> _SyncedFrame | None:
        """The newest synced frame; with ``stamp_s``, the newest one stamped at or before it (within tolerance).

        ``stamp_s`` is an observation's stamp, the time of its newest frame: each view's frame in that
        observation is its newest frame not after it (1 µs: stamp rounding).
        """
        tolerance_s = self.tolerance_s if tolerance_s is None else tolerance_s
        with self.lock:
            if not self.frames:
                return None
            if stamp_s is None:
                return self.frames[-1]
            best = max((f for f in self.frames if f.stamp_s <= stamp_s + 1e-6), key=lambda f: f.stamp_s, default=None)
            return best if best is not None and stamp_s - best.stamp_s <= tolerance_s else None

    def first_after(self, stamp_s: float, within_s: float) -> _SyncedFrame | None:
        """The oldest synced frame stamped after ``stamp_s`` by at most ``within_s``."""
        with self.lock:
            after = (f for f in self.frames if f.stamp_s > stamp_s + 1e-6 and f.stamp_s - stamp_s <= within_s)
            return min(after, key=lambda f: f.stamp_s, default=None)

    def held(self) -> str:
        """The span of the frames held, for a refusal's detail."""
        with self.lock:
            if not self.frames:
                return "it holds none"
            first, last = self.frames[0].stamp_s, self.frames[-1].stamp_s
            return f"it holds {len(self.frames)} from t={first:.3f} to t={last:.3f} s"


class ProjectionNode(LoggedNode):
    """Serves ProjectPoints from the latest synced depth of every configured view."""

    # Every callback is short (frames kept undecoded, a request's few points); the cloud has its own thread.
    EXECUTOR_THREADS = 1  # robopin_ros.runtime.make_executor

    def __init__(self, **node_options: Any) -> None:
        super().__init__("projection_node", **node_options)
        own = settings_from(ProjectionNodeSettings, declare_settings(self, ProjectionNodeSettings()))
        self.view_names = list(own.views)
        self.target_frame = own.target_frame
        camera_prefix = own.camera_prefix.rstrip("/")
        calibration_dir = Path(own.calibration_dir)
        calibrations, workspace, unaligned = own.calibrations, own.workspace or None, own.unaligned_depth
        self.sync_tolerance_s = own.sync_tolerance_s
        self.stamp_tolerance_s = own.stamp_tolerance_s
        self.frame_history_s = own.frame_history_s
        sync_color = own.sync_color
        ee_pose_topic, joint_states_topic = own.ee_pose_topic, own.joint_states_topic
        robot_description = own.robot_description
        self.cloud_voxel_m = own.cloud_voxel_m
        cloud_period_s = own.cloud_period_s
        cloud_views = list(own.cloud_views)
        depth = DepthConfig(**declare_settings(self, DepthConfig()))
        self.workspace = WorkspaceBox.from_dict(workspace) if workspace else None
        cross_view = CrossViewConfig(**declare_settings(self, CrossViewConfig()))
        config = ProjectionConfig(
            depth=depth, workspace=self.workspace, cross_view=cross_view,
            view_priority=tuple(own.view_priority),
            **declare_settings(self, NODE_PROJECTION_DEFAULTS),
        )
        if not self.view_names:
            raise ValueError("parameter views must name at least one camera view (img_idx 0, 1, ...)")
        views = [
            ViewConfig(name, i, self._load_mount(name, calibrations, calibration_dir))
            for i, name in enumerate(self.view_names)
        ]
        unknown_cloud_views = sorted(set(cloud_views) - set(self.view_names))
        if unknown_cloud_views:
            raise ValueError(f"parameter cloud_views names {unknown_cloud_views}, which are not in views "
                             f"{self.view_names}")
        self.cloud_img_idx = {i for i, name in enumerate(self.view_names) if not cloud_views or name in cloud_views}
        self.poses = PoseBuffer()
        self.projector = Projector(views, config, self.poses)
        if config.cross_view.rule == "object_extent":
            from robopin.geometry.crossview import warm_up

            warm_up()

        unknown = sorted(set(unaligned) - set(self.view_names))
        if unknown:
            raise ValueError(f"unaligned_depth names unknown views {unknown}; views: {self.view_names}")
        self.T_color_depth = {
            self.view_names.index(v): mount_from_dict(d, source=f"unaligned_depth[{v!r}]").T_parent_cam
            for v, d in unaligned.items()
        }
        self.streams: dict[int, _ViewStreams] = {}
        self.camera_topics = declare_view_topics(self, self.view_names, robopin_root=camera_prefix)
        self.qos_watch = QosMismatchWatch(self)
        for i, name in enumerate(self.view_names):
            streams = _ViewStreams(self.sync_tolerance_s, 10, sync_color, unaligned=i in self.T_color_depth,
                                   history_s=self.frame_history_s)
            self.streams[i] = streams
            topics = self.camera_topics[name]
            # realsense-ros names without align_depth: the depth stream in its own camera, with its own info.
            names = topics.names(unaligned=streams.unaligned)
            kinds = [("depth", Image), ("info", CameraInfo)] + ([("depth_info", CameraInfo)] if streams.unaligned
                                                                else []) + ([("color", Image)] if sync_color else [])
            for kind, msg_type in kinds:
                self.create_subscription(
                    msg_type, names[kind], lambda m, s=streams, k=kind: s.add(k, m), camera_qos(topics.qos),
                    event_callbacks=self.qos_watch.subscription_events(topics, names[kind]))
        self.create_subscription(PoseStamped, ee_pose_topic, self._on_ee_pose, 50)
        self._description = None
        if robot_description:
            from robopin.robots.description import load_description

            self._description = load_description(robot_description)
            self.create_subscription(JointState, joint_states_topic, self._on_joint_state, 50)

        self._camera_models: dict[tuple, Any] = {}
        # img_idx -> its last decoded frames, newest last: the cloud decodes the newest frame while a task's requests
        # still ask about the frames its model saw, and the projector keeps its work per decoded frame.
        self._decoded: dict[int, list[tuple[_SyncedFrame, ViewData]]] = {}
        self.markers_pub = self.create_publisher(MarkerArray, TARGET_MARKERS, 10)
        self._markers = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="projection-markers")
        self.cloud_pub = self.create_publisher(PointCloud2, WORKSPACE_CLOUD, 2)
        self.create_service(ProjectPoints, PROJECT_POINTS, self._on_project_points)
        self._cloud_source: tuple = ()  # (img_idx, frame stamp) of the frames the last cloud was built from
        self._view_clouds: dict[int, tuple] = {}  # img_idx -> (depth_m, T_base_cam, points, camera) of its last cloud
        self._merged_cloud: tuple = ((), None)  # (the views' clouds, their merged downsampled points)
        # The cloud is built on a thread of its own, woken by the timer: a request is served while a cloud
        # builds (tens of ms), and this node's callbacks all stay short (EXECUTOR_THREADS).
        self._cloud_wanted = threading.Event()
        self._closing = threading.Event()
        self._cloud_thread: threading.Thread | None = None
        if cloud_period_s > 0:
            self._cloud_thread = threading.Thread(target=self._cloud_loop, name="projection-cloud", daemon=True)
            self._cloud_thread.start()
            steady_timer(self, cloud_period_s, self._cloud_wanted.set)
        mounts = ", ".join(f"{v.img_idx}={v.name} ({v.mount.kind if v.mount else 'uncalibrated'})" for v in views)
        self.get_logger().info(f"projection_node ready: views {mounts}; target frame {self.target_frame!r}")

    def destroy_node(self) -> None:
        self._markers.shutdown(wait=True, cancel_futures=True)
        self._closing.set()
        self._cloud_wanted.set()
        if self._cloud_thread is not None:
            self._cloud_thread.join(timeout=5.0)
        super().destroy_node()

    def _cloud_loop(self) -> None:
        while True:
            self._cloud_wanted.wait()
            self._cloud_wanted.clear()
            if self._closing.is_set():
                return
            try:
                self._publish_cloud()
            except Exception as error:  # one bad frame must not end the cloud for the rest of the run
                self.get_logger().warning(f"workspace cloud not built: {type(error).__name__}: {error}")

    def _load_mount(self, view: str, calibrations: dict, calibration_dir: Path) -> CameraMount | None:
        """Mount of a view from the calibrations parameter, else calibration_dir/<view>.yaml, else None."""
        if view in calibrations:
            return mount_from_dict(calibrations[view], source=f"calibrations[{view!r}]")
        path = calibration_dir / f"{view}.yaml"
        if path.is_file():
            try:
                return load_mount_for_view(calibration_dir, view)
            except CalibrationError as error:
                self.get_logger().error(f"view {view!r}: {error}")
                return None
        self.get_logger().warning(f"view {view!r} has no calibration ({path} missing): its targets are refused")
        return None

    def new_scene(self, changed_at_s: float, **_: Any) -> None:
        """The cell was reset at ``changed_at_s`` (a trial boundary): the arm was put at its start pose without
        moving there, so no later frame may take its pose from the poses before."""
        self.poses.forget_before(changed_at_s)

    def _on_ee_pose(self, msg: PoseStamped) -> None:
        """Store the end-effector pose at its stamp."""
        stamp, T = conversions.pose_stamped_to_seconds_and_matrix(msg)
        self.poses.add(stamp, T)

    def _on_joint_state(self, msg: JointState) -> None:
        """Store the end-effector pose computed from joint positions at the message's stamp."""
        names = self._description.joint_names
        index = {n: i for i, n in enumerate(msg.name)}
        if not all(n in index for n in names):
            return  # e.g. a gripper-only JointState
        q = np.array([msg.position[index[n]] for n in names])
        self.poses.add(conversions.stamp_to_seconds(msg.header.stamp), self._description.forward_kinematics(q))

    def _camera_model(self, info: CameraInfo):
        key = (tuple(info.k), tuple(info.d), info.width, info.height, info.distortion_model)
        camera = self._camera_models.get(key)
        if camera is None:
            camera = conversions.camera_info_to_camera_model(info)
            self._camera_models[key] = camera
        return camera

    def _frame(self, img_idx: int, stamp_s: float | None) -> tuple[_SyncedFrame | None, str]:
        """The view's frame for a request's stamp, and why there is none (or why another frame stands in for it).

        A frame this node never received (its subscription starved on a loaded machine while the task node's got
        it) is stood in for by the view's next frame within ``stamp_tolerance_s`` when the arm's poses show it
        still from the earliest time the lost frame can have had until that frame: a static view then sees the
        same cell (the arm is its only mover), a wrist view the same cell from the same pose.
        """
        streams = self.streams[img_idx]
        frame = streams.pick(stamp_s, self.stamp_tolerance_s)
        if frame is not None or stamp_s is None:
            return frame, "" if frame is not None else "none received"
        lost = (f"its frame at or up to {self.stamp_tolerance_s:.3f} s before t={stamp_s:.3f} s never reached "
                f"this node ({streams.held()})")
        later = streams.first_after(stamp_s, self.stamp_tolerance_s)
        if later is None:
            return None, lost
        why_not = self.poses.why_not_still(stamp_s - self.stamp_tolerance_s, later.stamp_s,
                                           self.projector.config.pose_tolerance_s)
        if why_not:
            return None, f"{lost}; its next frame, t={later.stamp_s:.3f} s, cannot stand in for it: {why_not}"
        return later, f"{lost}; its next frame, t={later.stamp_s:.3f} s, stands in for it (the arm was still)"

    def _view_data(self, img_idx: int, frame: _SyncedFrame) -> ViewData:
        # The cloud and a request often read the same frame: it is decoded (and registered) once. Read-only,
        # so no reader can change what the next one gets.
        decoded = self._decoded.setdefault(img_idx, [])
        for seen, data in decoded:
            if seen is frame:
                return data
        camera = self._camera_model(frame.info)
        depth_m = conversions.image_msg_to_depth_m(frame.depth)
        if frame.depth_info is not None:
            # Registration on demand: only the frames a request uses pay for it.
            depth_m = align_depth_to_color(
                depth_m, self._camera_model(frame.depth_info), camera, self.T_color_depth[img_idx]
            )
        depth_m.setflags(write=False)
        data = ViewData(depth_m, camera, frame.stamp_s)
        decoded.append((frame, data))
        del decoded[:-_DECODED_FRAMES]
        return data

    def _on_project_points(self, request, response):
        """Project each anchor of the request into the target frame, one Target3D per anchor."""
        # Frame age is judged at arrival: decoding and registration below must not age the frames.
        now_s = conversions.stamp_to_seconds(self.get_clock().now().to_msg())
        target_frame = request.target_frame or self.target_frame
        wanted = conversions.stamp_to_seconds(request.stamp)
        stamp_s = wanted if wanted > 0 else None
        if target_frame != self.target_frame:
            response.success = False
            response.message = f"unknown target frame {target_frame!r}; this node projects into {self.target_frame!r}"
            return response
        frames, absent, stood_in = {}, {}, []
        for img_idx in sorted({a.img_idx for a in request.anchors if a.img_idx in self.streams}):
            frame, why = self._frame(img_idx, stamp_s)
            if frame is None:
                absent[img_idx] = why
                continue
            frames[img_idx] = self._view_data(img_idx, frame)  # only the views the anchors use are decoded
            if why:
                stood_in.append(f"view {self.view_names[img_idx]!r}: {why}")
        for line in stood_in:
            self.get_logger().warning(line)
        have_frames = bool(frames) or any(s.pick(stamp_s, self.stamp_tolerance_s) is not None
                                          for s in self.streams.values())
        sizes = {i: (d.camera.width, d.camera.height) for i, d in frames.items()}
        requests = [conversions.anchor_msg_to_point_request(a, sizes.get(a.img_idx)) for a in request.anchors]
        targets = self.projector.project(requests, frames, now_s=None if stamp_s is not None else now_s,
                                         absent=absent)
        response.targets = [conversions.target_to_msg(t, target_frame) for t in targets]
        response.success = have_frames
        if have_frames:
            refused = [f"{t.id or i}: {t.reason} ({t.detail})" for i, t in enumerate(targets) if not t.valid]
            response.message = "; ".join([f"{len(targets) - len(refused)}/{len(targets)} targets valid", *stood_in])
            for line in refused:
                self.get_logger().warning(f"target refused: {line}")
        else:
            near = "" if stamp_s is None else f" near t={stamp_s:.3f} s"
            response.message = f"no synced depth + camera_info frames{near} from views {self.view_names}" + "".join(
                f"; view {self.view_names[i]!r}: {why}" for i, why in sorted(absent.items()))
            if self.qos_watch.mismatches:
                response.message += "; " + "; ".join(self.qos_watch.mismatches.values())
        if have_frames and self._cloud_thread is not None:
            # A task projects on frames taken after the arm came to rest, and the motion planner waits for a cloud
            # at least that new before it plans: build it from them now, not up to a cloud period later (the
            # cloud thread skips frames it has built a cloud from already).
            self._cloud_wanted.set()
        # The markers are for RViz: drawn and published once the reply is on its way, not before it.
        stamp = self.get_clock().now().to_msg()
        with contextlib.suppress(RuntimeError):  # shutting down: nothing more to show
            self._markers.submit(self._publish_markers, targets, target_frame, stamp)
        return response

    def _publish_markers(self, targets: list, target_frame: str, stamp: Any) -> None:
        try:
            self.markers_pub.publish(conversions.targets_to_marker_array(targets, target_frame, stamp))
        except Exception as error:  # a display failure is never the request's
            self.get_logger().warning(f"target markers not published: {type(error).__name__}: {error}")

    def _publish_cloud(self) -> None:
        """Publish the depth of the cloud views as one cropped, voxel-downsampled cloud in the target frame.

        Only when a cloud view has a frame newer than the last cloud's: the same frames give the same
        cloud with the same stamp, and building it holds the interpreter while requests wait.
        """
        newest = tuple((i, frame.stamp_s) for i in sorted(self.cloud_img_idx)
                       if (frame := self.streams[i].pick(None)) is not None)
        if newest == self._cloud_source:
            return
        self._cloud_source = newest
        clouds = []
        stamp = None
        for img_idx, view in self.projector.views.items():
            if img_idx not in self.cloud_img_idx:
                continue
            frame = self.streams[img_idx].pick(None)
            if frame is None or view.mount is None:
                continue
            data = self._view_data(img_idx, frame)
            try:
                T_base_ee = None
                if view.mount.kind == "wrist":
                    T_base_ee = self.poses.lookup(data.stamp_s, self.projector.config.pose_tolerance_s)
                T_base_cam = view.mount.T_base_cam(T_base_ee, validate=False)
            except StalePoseError:
                continue
            depth = self.projector.config.depth
            # A still scene (a simulated camera, a static view between motions) sends the same depth from
            # the same pose frame after frame: its cloud is the last one's (a ~1 ms comparison, not a build).
            last = self._view_clouds.get(img_idx)
            if last is not None and last[3] is data.camera and np.array_equal(last[1], T_base_cam) and np.array_equal(
                    last[0], data.depth_m, equal_nan=True):
                clouds.append(last[2])
            else:
                clouds.append(depth_to_point_cloud(data.depth_m, data.camera, T_base_cam, workspace=self.workspace,
                                                   voxel_size_m=self.cloud_voxel_m, min_depth_m=depth.min_depth_m,
                                                   max_depth_m=depth.max_depth_m).points)
                self._view_clouds[img_idx] = (data.depth_m, T_base_cam, clouds[-1], data.camera)
            # Stamped with its oldest view: the cloud is only as recent as the oldest depth in it.
            stamp = data.stamp_s if stamp is None else min(stamp, data.stamp_s)
        if not clouds:
            return
        previous, merged = self._merged_cloud
        if len(clouds) == len(previous) and all(a is b for a, b in zip(clouds, previous, strict=True)):
            points = merged
        else:
            points, _ = voxel_downsample(np.concatenate(clouds), self.cloud_voxel_m)
            self._merged_cloud = (tuple(clouds), points)
        header = conversions.make_header(
            stamp if stamp is not None and math.isfinite(stamp) else 0.0, self.target_frame
        )
        self.cloud_pub.publish(conversions.point_cloud_to_msg(PointCloud(points, None, self.target_frame), header))


def main(args=None) -> int:
    return run_node(ProjectionNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
