"""calibration_node: capture board views with arm poses, solve a camera mount, store and verify it.

Subscribes to one camera's ``<camera_topic_prefix>/color/image_raw`` and ``.../color/camera_info``
(realsense-ros names; default prefix ``cameras/<name>``, relative like every name here). The arm pose comes
from the configured arm backend (``arm`` parameter, the same backends as the arm driver; used for guided
capture) or, for a manual capture next to a running arm_driver_node, from its ``geometry_msgs/PoseStamped`` topic
(``ee_pose_topic``, default ``robopin/arm/ee_pose``).
Services (all in the node's namespace):

* ``~/capture`` (std_srvs/Trigger): record one view now (manual mode: the operator moved the arm);
* ``~/run_guided`` (std_srvs/SetBool): visit generated poses through the motion planner; ``data=true``
  only plans and safety-checks them (dry run); any safety refusal stops the capture;
* ``~/solve`` (std_srvs/Trigger): solve from the views so far and write ``<output_dir>/<name>.yaml``;
* ``~/verify`` (std_srvs/Trigger): re-measure the board (a few guided views, or the views captured
  since ``~/clear`` when there is no arm) and report the stored calibration's error;
* ``~/clear`` (std_srvs/Trigger): forget the captured views.

With ``keyboard:=true`` the node also reads its terminal: Enter captures, ``s`` solves, ``v`` verifies,
``g`` runs the guided capture, ``q`` quits. Example (wrist camera, guided, sim arm)::

    ros2 run robopin_ros calibration_node --ros-args -p name:=wrist -p kind:=eye_in_hand \\
        -p arm:="{type: sim, robot: panda, world: workcell}" \\
        -p board_pose:="{translation: [0.36, 0.1, 0.0], rpy: [3.14159, 0, 0]}"
"""

from __future__ import annotations

import collections
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseStamped
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from sensor_msgs.msg import CameraInfo, Image
from std_srvs.srv import SetBool, Trigger

from robopin.calibration import (
    BoardConfig,
    BoardDetector,
    CalibrationError,
    CaptureAbortedError,
    CaptureSample,
    DetectionConfig,
    Frame,
    PoseGeneratorConfig,
    SolverConfig,
    capture_sample,
    eye_in_hand_poses,
    eye_to_hand_poses,
    load_calibration,
    run_guided_capture,
    save_calibration,
    save_samples,
    solve_samples,
    verify_calibration,
)
from robopin.calibration.capture import make_capture_planner
from robopin.cameras.topics import view_topics
from robopin.geometry.extrinsics import mount_from_dict
from robopin.interfaces import (
    CALIBRATION_CAPTURE,
    CALIBRATION_CLEAR,
    CALIBRATION_RUN_GUIDED,
    CALIBRATION_SOLVE,
    CALIBRATION_VERIFY,
)
from robopin.system.node_settings import CalibrationNodeSettings, settings_from
from robopin_ros import conversions
from robopin_ros.camera_snapshot import camera_qos, declare_view_topics
from robopin_ros.logs import LoggedNode
from robopin_ros.parameters import declare_settings
from robopin_ros.runtime import run_node


class _PoseOnlyArm:
    """The part of the arm contract a manual capture needs, fed by a PoseStamped topic."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pose: tuple[float, np.ndarray] | None = None

    def update(self, msg: PoseStamped) -> None:
        with self._lock:
            self._pose = (time.monotonic(), conversions.pose_to_matrix(msg.pose))

    def joint_state(self) -> None:
        return None

    def ee_pose(self, _state: Any = None) -> np.ndarray:
        with self._lock:
            if self._pose is None:
                raise CalibrationError("no end-effector pose received yet on ee_pose_topic")
            stamp, pose = self._pose
        if time.monotonic() - stamp > 1.0:
            raise CalibrationError(f"the newest end-effector pose is {time.monotonic() - stamp:.1f} s old")
        return pose


class CalibrationNode(LoggedNode):
    """Capture, solve, store and verify one camera's calibration (see the module docstring)."""

    def __init__(self, **node_kwargs: Any) -> None:
        super().__init__("calibration_node", **node_kwargs)
        own = settings_from(CalibrationNodeSettings, declare_settings(self, CalibrationNodeSettings()))
        self.view, self.kind, prefix = own.name, own.kind, own.camera_topic_prefix
        topics = declare_view_topics(self, [self.view])[self.view]
        if prefix:
            topics = view_topics(self.view, topics.driver, prefix, topics.qos)
        image_qos = camera_qos(topics.qos, depth=2)
        # Nested settings, one dotted parameter per key (board.type, board.squares_x, arm.type, ...), or the
        # older one YAML string each.
        self.board = BoardConfig.from_dict(own.board)
        self.detector = BoardDetector(self.board, DetectionConfig(**own.detection))
        self.solver = SolverConfig(method=own.method)
        self.output_dir = Path(own.output_dir)
        self.child_frame = own.child_frame or f"{self.view}_optical"
        self.serial = own.camera_serial
        self.frame_timeout_s, self.settle_s, self.velocity_scale = own.frame_timeout_s, own.settle_s, own.velocity_scale
        self.verify_pose_count = own.verify_pose_count
        self.pose_config = settings_from(PoseGeneratorConfig, declare_settings(self, PoseGeneratorConfig()))
        self.min_center_height_m = own.min_center_height_m
        board_pose, nominal = own.board_pose, own.nominal_mount
        self.T_board = mount_from_dict(board_pose, source="board_pose").T_parent_cam if board_pose else None
        self.T_nominal = mount_from_dict(nominal, source="nominal_mount").T_parent_cam if nominal else None
        arm_settings, planner_settings, table = own.arm, own.planner, own.table_height_m

        self.samples: list[CaptureSample] = []
        self._busy = threading.Lock()
        self._frame_lock = threading.Condition()
        self._images: collections.deque[tuple[float, Image]] = collections.deque(maxlen=6)  # (stamp, msg)
        self.skip_frames = own.skip_frames
        self._info: CameraInfo | None = None
        self.arm: Any = None
        self.planner: Any = None
        streams = ReentrantCallbackGroup()
        if arm_settings:
            from robopin.robots.base import make_arm, make_arm_config

            arm_type = arm_settings.pop("type", "sim")
            self.arm = make_arm(make_arm_config(arm_type, arm_settings))
            self.arm.connect()
            self.planner = make_capture_planner(self.arm, planner_settings, table_height_m=table)
        else:
            self.arm = _PoseOnlyArm()
            self.create_subscription(PoseStamped, own.ee_pose_topic, self.arm.update, 10, callback_group=streams)
        self.create_subscription(Image, topics.color, self._on_image, image_qos, callback_group=streams)
        self.create_subscription(CameraInfo, topics.info, self._on_info, image_qos, callback_group=streams)
        services = MutuallyExclusiveCallbackGroup()
        self.create_service(Trigger, CALIBRATION_CAPTURE, self._on_capture, callback_group=services)
        self.create_service(SetBool, CALIBRATION_RUN_GUIDED, self._on_run_guided, callback_group=services)
        self.create_service(Trigger, CALIBRATION_SOLVE, self._on_solve, callback_group=services)
        self.create_service(Trigger, CALIBRATION_VERIFY, self._on_verify, callback_group=services)
        self.create_service(Trigger, CALIBRATION_CLEAR, self._on_clear, callback_group=services)
        if own.keyboard:
            threading.Thread(target=self._keyboard_loop, name="calibration-keys", daemon=True).start()
        self.get_logger().info(
            f"calibration_node ready: {self.kind} for {self.view!r} from {prefix}, "
            f"{'guided (arm ' + type(self.arm).__name__ + ')' if self.planner else 'manual'}"
        )

    # ------------------------------------------------------------------ helpers
    def _on_image(self, msg: Image) -> None:
        """Keep the newest colour images with their capture stamps."""
        with self._frame_lock:
            self._images.append((conversions.stamp_to_seconds(msg.header.stamp), msg))
            self._frame_lock.notify_all()

    def _on_info(self, msg: CameraInfo) -> None:
        """Keep the newest camera info."""
        with self._frame_lock:
            self._info = msg

    def grab(self, not_before_s: float) -> Frame:
        """A colour frame captured after ``not_before_s`` (monotonic clock; frames carry stamps on this node's
        clock: wall time, or a simulated cell's), skipping ``skip_frames`` of them, with its intrinsics."""
        wall_not_before = self.get_clock().now().nanoseconds * 1e-9 - (time.monotonic() - not_before_s)
        deadline = time.monotonic() + self.frame_timeout_s
        with self._frame_lock:
            while True:
                fresh = [msg for stamp, msg in self._images if stamp >= wall_not_before]
                if self._info is not None and len(fresh) > self.skip_frames:
                    image, info = fresh[self.skip_frames], self._info
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise CalibrationError(
                        f"no frame from camera {self.view!r} within {self.frame_timeout_s} s "
                        "(is its camera_node running?)"
                    )
                self._frame_lock.wait(min(remaining, 0.1))
        return Frame(
            conversions.image_msg_to_color(image),
            conversions.camera_info_to_camera_model(info),
            conversions.stamp_to_seconds(image.header.stamp),
        )

    def _poses(self, count: int, seed: int) -> list[np.ndarray]:
        if self.T_board is None or self.T_nominal is None:
            raise CalibrationError(
                "guided capture needs the board_pose and nominal_mount parameters "
                "(T_base_board and T_ee_cam for a wrist camera; T_ee_board and T_base_cam for a static one)"
            )
        config = PoseGeneratorConfig(**{**self.pose_config.__dict__, "count": count, "seed": seed})
        if self.kind == "eye_in_hand":
            return eye_in_hand_poses(self.T_board, self.board.center_m(), self.T_nominal, config)
        return eye_to_hand_poses(
            self.T_nominal, self.T_board, self.board.center_m(), config, min_center_height_m=self.min_center_height_m
        )

    def _guided(self, count: int, seed: int, *, dry_run: bool, min_reachable: int):
        if self.planner is None:
            raise CalibrationError("guided capture needs the arm parameter (an arm backend); use ~/capture by hand")
        if not dry_run and not self.arm.is_enabled:
            self.arm.enable()
        # Spare poses: some turn out unreachable in the dry run and are dropped.
        return run_guided_capture(
            self.arm,
            self.planner,
            self._poses(2 * count + 4, seed),
            self.grab,
            self.detector,
            max_samples=count,
            min_reachable=min_reachable,
            dry_run_only=dry_run,
            settle_s=self.settle_s,
            velocity_scale=self.velocity_scale,
        )

    def _exclusive(self, response, work) -> Any:
        """Run ``work() -> (success, message)`` unless another step runs; errors become the message."""
        if not self._busy.acquire(blocking=False):
            response.success, response.message = False, "busy: another calibration step is running"
            return response
        try:
            response.success, response.message = work()
        except (CalibrationError, CaptureAbortedError, ValueError) as error:
            response.success, response.message = False, f"{type(error).__name__}: {error}"
        finally:
            self._busy.release()
        # rclpy fixes a call site's severity on first use: one call per severity.
        if response.success:
            self.get_logger().info(response.message)
        else:
            self.get_logger().warning(response.message)
        return response

    # ------------------------------------------------------------------ services
    def _on_capture(self, _request, response):
        """Record one view at the arm's current pose."""

        def work():
            sample = capture_sample(len(self.samples), self.arm, self.grab, self.detector)
            self.samples.append(sample)
            view = sample.view
            if not view.ok:
                return False, f"view {sample.index} rejected: {view.rejection.value}: {view.message}"
            usable = sum(s.view.ok for s in self.samples)
            return (
                True,
                f"view {sample.index} accepted ({view.corner_count} corners, "
                f"{view.reprojection_rms_px:.2f} px); {usable} usable",
            )

        return self._exclusive(response, work)

    def _on_run_guided(self, request, response):
        """Visit generated poses and capture a view at each (data=true: dry run only)."""

        def work():
            report = self._guided(self.pose_config.count, self.pose_config.seed, dry_run=request.data, min_reachable=5)
            self.samples.extend(report.samples)
            return True, report.summary()

        return self._exclusive(response, work)

    def _on_solve(self, _request, response):
        """Solve from the captured views and store the calibration."""

        def work():
            camera = self.grab(0.0).camera
            result, record = solve_samples(self.view, self.kind, self.samples, camera, board=self.board,
                                           serial=self.serial, child_frame=self.child_frame, solver=self.solver)
            path = save_calibration(record, self.output_dir / f"{self.view}.yaml")
            save_samples(self.output_dir / f"{self.view}.samples.yaml", self.kind, self.samples)
            held = result.heldout or result.fit
            return True, (
                f"stored {path}: T_{record.parent_frame}_{record.child_frame} by {result.method} from "
                f"{result.sample_count} views; held-out {held.translation_rms_mm:.2f} mm / "
                f"{held.rotation_rms_deg:.3f} deg"
            )

        return self._exclusive(response, work)

    def _on_verify(self, _request, response):
        """Re-measure the board and report the stored calibration's error."""

        def work():
            record = load_calibration(self.output_dir / f"{self.view}.yaml")
            camera = self.grab(0.0).camera
            record.check_camera(camera, self.serial)
            if self.planner is not None:
                samples = self._guided(
                    self.verify_pose_count, self.pose_config.seed + 101, dry_run=False, min_reachable=1
                ).samples
            else:
                samples = self.samples
            report = verify_calibration(record, samples, K=camera.K)
            return report.ok, report.summary()

        return self._exclusive(response, work)

    def _on_clear(self, _request, response):
        """Forget the captured views."""

        def work():
            count = len(self.samples)
            self.samples.clear()
            return True, f"cleared {count} views"

        return self._exclusive(response, work)

    def _keyboard_loop(self) -> None:
        """Operator keys on the node's terminal (manual capture without a service call)."""
        actions = {"": self._on_capture, "s": self._on_solve, "v": self._on_verify, "c": self._on_clear}
        print("calibration keys: Enter = capture, s = solve, v = verify, g = guided, c = clear, q = quit", flush=True)
        for line in sys.stdin:
            key = line.strip().lower()
            if key == "q":
                break
            if key == "g":
                result = self._on_run_guided(SetBool.Request(data=False), SetBool.Response())
            elif key in actions:
                result = actions[key](Trigger.Request(), Trigger.Response())
            else:
                print(f"unknown key {key!r}", flush=True)
                continue
            print(("OK  " if result.success else "NO  ") + result.message, flush=True)

    def destroy_node(self) -> None:
        """Disconnect the arm backend with the node."""
        if self.planner is not None and self.arm is not None:
            try:
                self.arm.disconnect()
            except Exception as error:  # shutting down: report, do not mask the shutdown
                self.get_logger().warning(f"arm disconnect failed: {error}")
        super().destroy_node()


def main(args=None) -> int:
    """Run the calibration node until Ctrl-C."""
    return run_node(CalibrationNode, args)


if __name__ == "__main__":
    sys.exit(main())
