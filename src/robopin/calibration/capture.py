"""Capturing calibration samples: guided (the arm visits generated poses) and manual (operator-moved).

Guided capture runs in two passes. The dry run plans every generated pose through the motion planner,
chained from the arm's current configuration, and passes each plan through the arm's safety layer
without moving: unreachable poses are dropped (named in the report), a safety refusal stops the whole
capture (:class:`CaptureAbortedError`), as does having too few reachable poses. The real pass then
re-plans each kept pose from where the arm actually is, executes it, lets it settle, grabs a frame,
detects the board and records the pair (arm pose at capture, board pose). Any refusal, fault or
cancel stops it. Manual capture records the same pair whenever the operator asks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from robopin.calibration.board import BoardDetector, BoardView
from robopin.calibration.errors import CaptureAbortedError
from robopin.geometry.camera_model import CameraModel

logger = logging.getLogger(__name__)

__all__ = [
    "CaptureReport",
    "CaptureSample",
    "Frame",
    "FrameGrabber",
    "capture_sample",
    "keep_planner_inside_safety_limits",
    "make_capture_planner",
    "run_guided_capture",
]


@dataclass(frozen=True)
class Frame:
    """One colour image with the intrinsics it was taken with and its capture time (s)."""

    image: NDArray[np.uint8]
    camera: CameraModel
    stamp_s: float


class FrameGrabber(Protocol):
    """Returns a frame taken after ``not_before_s`` (monotonic seconds), so it shows the settled arm."""

    def __call__(self, not_before_s: float) -> Frame: ...


@dataclass
class CaptureSample:
    """One view: the arm pose ``T_base_ee`` when the frame was taken and the detection."""

    index: int
    T_base_ee: NDArray[np.float64]
    view: BoardView
    q: NDArray[np.float64] | None = None


@dataclass
class CaptureReport:
    """What a capture did: samples (used and rejected), poses dropped as unreachable, timings."""

    samples: list[CaptureSample] = field(default_factory=list)
    unreachable: list[tuple[int, str]] = field(default_factory=list)
    planned: int = 0
    dry_run_only: bool = False
    dry_run_s: float = 0.0
    capture_s: float = 0.0

    @property
    def accepted(self) -> list[CaptureSample]:
        """Samples whose board view is usable."""
        return [s for s in self.samples if s.view.ok]

    @property
    def rejected(self) -> list[CaptureSample]:
        """Samples whose board view was refused (with ``view.rejection``)."""
        return [s for s in self.samples if not s.view.ok]

    def summary(self) -> str:
        """One line for logs and the CLI."""
        reasons: dict[str, int] = {}
        for sample in self.rejected:
            key = sample.view.rejection.value if sample.view.rejection else "?"
            reasons[key] = reasons.get(key, 0) + 1
        return (
            f"{self.planned} poses planned, {len(self.unreachable)} unreachable, {len(self.accepted)} views accepted, "
            f"{len(self.rejected)} rejected {reasons or ''} "
            f"(dry run {self.dry_run_s:.1f} s, capture {self.capture_s:.1f} s)"
        )


def capture_sample(
    index: int, arm: Any, grab: FrameGrabber, detector: BoardDetector, not_before_s: float | None = None
) -> CaptureSample:
    """Record one sample now: a frame newer than ``not_before_s`` and the arm pose of that moment.

    The arm must be at rest (guided capture waits for it; an operator presses the key after moving).
    """
    frame = grab(time.monotonic() if not_before_s is None else not_before_s)
    state = arm.joint_state()  # None for a pose-only source (an end-effector pose topic)
    view = detector.detect(frame.image, frame.camera)
    q = None if state is None else np.array(state.positions, dtype=np.float64)
    return CaptureSample(index, arm.ee_pose(state), view, q)


def keep_planner_inside_safety_limits(planner: Any, arm: Any, extra_margin_rad: float = 0.005) -> None:
    """Shrink the planner's joint limits to the arm safety layer's (its ``position_margin_rad`` and a bit).

    A planner that uses the full URDF range returns paths the safety layer refuses a few mrad from a
    limit; planning inside the refused band keeps the capture's refusals for real problems.
    """
    margin = float(arm.config.safety.position_margin_rad) + extra_margin_rad
    robot = planner.robot
    robot.lower = np.asarray(robot.lower, dtype=np.float64) + margin
    robot.upper = np.asarray(robot.upper, dtype=np.float64) - margin
    model = getattr(robot, "model", None)
    if model is not None and hasattr(model, "lowerPositionLimit"):
        model.lowerPositionLimit = robot.lower.copy()
        model.upperPositionLimit = robot.upper.copy()


def make_capture_planner(arm: Any, planner: dict[str, Any] | None = None, table_height_m: float | None = 0.0) -> Any:
    """The motion planner for a guided capture: ``planner`` settings (``type`` defaults to roboplan, the
    robot to the arm's), the table as an obstacle, joint limits kept inside the arm's safety margin."""
    from robopin.motion.planner import make_planner, planner_config_from_dict

    settings = {"type": "roboplan", "robot": arm.config.robot, **(planner or {})}
    motion_planner = make_planner(planner_config_from_dict(settings))
    if table_height_m is not None:
        world = motion_planner.world
        world.add_table(float(table_height_m))
        motion_planner.update_world(world)
    keep_planner_inside_safety_limits(motion_planner, arm)
    return motion_planner


_UNREACHABLE = {
    "ik_fail",
    "goal_in_collision",
    "goal_outside_limits",
    "outside_workspace",
    "no_path",
    "timeout",
    "time_parameterization_fail",
    "collision_in_result",
}


def run_guided_capture(
    arm: Any,
    planner: Any,
    poses: Sequence[NDArray[np.float64]],
    grab: FrameGrabber,
    detector: BoardDetector,
    *,
    max_samples: int | None = None,
    min_reachable: int = 5,
    dry_run_only: bool = False,
    settle_s: float = 0.2,
    velocity_scale: float = 0.2,
    should_cancel: Callable[[], bool] | None = None,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> CaptureReport:
    """Visit ``poses`` (``T_base_ee`` targets) and capture a board view at each (see the module docstring).

    ``arm`` is a connected, enabled :class:`~robopin.robots.base.Arm`; ``planner`` a
    :class:`~robopin.motion.planner.MotionPlanner` for the same robot. ``max_samples`` stops after that
    many reachable poses. ``velocity_scale`` slows the moves (calibration needs no speed, and a slow arm
    stays well inside the TCP speed limit). ``on_progress(stage, done, total)`` reports ``dry_run``
    and ``capture``.
    """
    from robopin.robots.errors import ArmError, SafetyViolationError
    from robopin.robots.state import JointState

    report = CaptureReport(dry_run_only=dry_run_only)
    cancel = should_cancel or (lambda: False)
    started = time.monotonic()
    # ---- dry run: plan everything, validate through the safety layer, move nothing
    state = arm.joint_state()
    # Plan from the nearest in-limit configuration when the arm settled a few mrad past the planner's
    # (shrunk) limits; the safety layer accepts that start within its own tolerance.
    q = np.clip(np.array(state.positions, dtype=np.float64), planner.robot.lower, planner.robot.upper)
    kept: list[int] = []
    for index, T in enumerate(poses):
        if cancel():
            raise CaptureAbortedError("canceled", index, "canceled during the dry run")
        if max_samples is not None and len(kept) >= max_samples:
            break
        result = planner.plan_to_pose(q, T, velocity_scale=velocity_scale)
        report.planned += 1
        if not result.success:
            status = getattr(result.status, "value", str(result.status))
            if status not in _UNREACHABLE:
                raise CaptureAbortedError("planner_error", index, f"{status}: {result.message}")
            report.unreachable.append((index, f"{status}: {result.message}"[:200]))
            continue
        try:
            arm.safety.validate(result.trajectory, JointState(arm.joint_names, q))
        except SafetyViolationError as error:
            raise CaptureAbortedError("safety_refusal", index, str(error)) from error
        q = np.array(result.trajectory.positions[-1], dtype=np.float64)
        kept.append(index)
        if on_progress:
            on_progress("dry_run", index + 1, len(poses))
    report.dry_run_s = time.monotonic() - started
    logger.info("calibration dry run: %d of %d poses reachable", len(kept), report.planned)
    if len(kept) < min_reachable:
        raise CaptureAbortedError(
            "unreachable", len(poses), f"only {len(kept)} of {report.planned} poses are reachable; need {min_reachable}"
        )
    if dry_run_only:
        return report
    # ---- real pass: re-plan from where the arm is, move, settle, capture
    started = time.monotonic()
    for done, index in enumerate(kept):
        if cancel():
            raise CaptureAbortedError("canceled", index, "canceled by request")
        current = np.array(arm.joint_state().positions, dtype=np.float64)
        current = np.clip(current, planner.robot.lower, planner.robot.upper)  # as in the dry run
        result = planner.plan_to_pose(current, poses[index], velocity_scale=velocity_scale)
        if not result.success:
            status = getattr(result.status, "value", str(result.status))
            report.unreachable.append((index, f"{status} when re-planned: {result.message}"[:200]))
            continue
        try:
            outcome = arm.execute(result.trajectory, dry_run=False)
        except SafetyViolationError as error:
            raise CaptureAbortedError("safety_refusal", index, str(error)) from error
        except ArmError as error:
            raise CaptureAbortedError("arm_error", index, f"{type(error).__name__}: {error}") from error
        if not outcome.success:
            raise CaptureAbortedError(str(outcome.reason), index, outcome.message)
        time.sleep(settle_s)
        report.samples.append(capture_sample(index, arm, grab, detector, time.monotonic()))
        if on_progress:
            on_progress("capture", done + 1, len(kept))
    report.capture_s = time.monotonic() - started
    logger.info("calibration capture: %s", report.summary())
    return report
