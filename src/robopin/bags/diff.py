"""Compare a recorded planner step with the same step planned again: anchors, points, targets, plan ends.

A step is reduced to :class:`StepOutcome` (plain numbers, whatever produced it: a decoded bag message
or a live planner), and :func:`diff_steps` lists every difference beyond the tolerances by name —
an anchor that appeared or vanished, a point that moved (pixels), a 3D target that moved (metres)
or changed validity, a plan whose final joint positions differ (radians).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["AnchorPoint", "StepDiff", "StepOutcome", "TargetPoint", "diff_steps", "outcome_from_messages"]


@dataclasses.dataclass(frozen=True)
class AnchorPoint:
    """A pinned point (anchor or answer point) in pixels of view ``img_idx``."""

    key: str  # anchor ID, or "answer<k>" for the k-th answer point
    name: str
    img_idx: int
    u: float
    v: float


@dataclasses.dataclass(frozen=True)
class TargetPoint:
    key: str
    point: tuple[float, float, float]
    valid: bool
    reason: str = ""


@dataclasses.dataclass(frozen=True)
class StepOutcome:
    """What one planner step decided: its pinned points, its 3D targets, the end of each planned phase."""

    anchors: tuple[AnchorPoint, ...] = ()
    answer_points: tuple[AnchorPoint, ...] = ()
    targets: tuple[TargetPoint, ...] = ()
    plan_endpoints: tuple[tuple[float, ...], ...] = ()
    valid: bool = True
    model: str = ""
    planned: bool = True  # False: no motion planner ran (a dry-run replay), so there are no plans to compare


@dataclasses.dataclass
class StepDiff:
    """Differences between a recorded and a replayed step; ``identical`` when there are none."""

    differences: list[str] = dataclasses.field(default_factory=list)
    pixel_errors: dict[str, float] = dataclasses.field(default_factory=dict)
    target_errors_m: dict[str, float] = dataclasses.field(default_factory=dict)
    plan_errors_rad: list[float] = dataclasses.field(default_factory=list)

    @property
    def identical(self) -> bool:
        return not self.differences

    def to_dict(self) -> dict[str, Any]:
        return {"identical": self.identical, "differences": list(self.differences),
                "pixel_errors": dict(self.pixel_errors), "target_errors_m": dict(self.target_errors_m),
                "plan_errors_rad": list(self.plan_errors_rad)}


def _points_by_key(points: Sequence[AnchorPoint]) -> dict[tuple[str, int], AnchorPoint]:
    return {(p.key, p.img_idx): p for p in points}


def _pixel_distance(a: AnchorPoint, b: AnchorPoint) -> float:
    if not all(math.isfinite(c) for c in (a.u, a.v, b.u, b.v)):
        return 0.0 if (math.isnan(a.u) and math.isnan(b.u)) else math.inf
    return math.hypot(a.u - b.u, a.v - b.v)


def _compare_points(kind: str, recorded: Sequence[AnchorPoint], replayed: Sequence[AnchorPoint],
                    tolerance_px: float, diff: StepDiff) -> None:
    old, new = _points_by_key(recorded), _points_by_key(replayed)
    for key in old.keys() - new.keys():
        diff.differences.append(f"{kind} {key[0]} in view {key[1]} was recorded but is missing in the replay")
    for key in new.keys() - old.keys():
        diff.differences.append(f"{kind} {key[0]} in view {key[1]} is new in the replay")
    for key in sorted(old.keys() & new.keys()):
        distance = _pixel_distance(old[key], new[key])
        diff.pixel_errors[f"{kind}:{key[0]}@{key[1]}"] = distance
        if distance > tolerance_px:
            moved = f"{distance:.2f}" if distance >= 0.005 else f"{distance:.2g}"
            diff.differences.append(
                f"{kind} {key[0]} in view {key[1]} moved {moved} px "
                f"({old[key].u:.1f}, {old[key].v:.1f}) -> ({new[key].u:.1f}, {new[key].v:.1f})")
        if old[key].name != new[key].name:
            diff.differences.append(f"{kind} {key[0]} renamed {old[key].name!r} -> {new[key].name!r}")


def _millimetres(distance_m: float) -> str:
    """``12.3 mm``, or ``3e-05 mm`` for a difference that one decimal of a millimetre would print as 0.0."""
    mm = distance_m * 1000
    return f"{mm:.1f} mm" if mm >= 0.05 else f"{mm:.2g} mm"


def diff_steps(recorded: StepOutcome, replayed: StepOutcome, *, tolerance_px: float = 0.0,
               tolerance_m: float = 0.0, tolerance_rad: float = 0.0) -> StepDiff:
    """Every difference between two outcomes beyond the tolerances (zero tolerances: exact)."""
    diff = StepDiff()
    if recorded.valid != replayed.valid:
        diff.differences.append(f"reasoning validity changed {recorded.valid} -> {replayed.valid}")
    _compare_points("anchor", recorded.anchors, replayed.anchors, tolerance_px, diff)
    _compare_points("answer", recorded.answer_points, replayed.answer_points, tolerance_px, diff)
    old = {t.key: t for t in recorded.targets}
    new = {t.key: t for t in replayed.targets}
    for key in sorted(old.keys() - new.keys()):
        diff.differences.append(f"target {key} was recorded but is missing in the replay")
    for key in sorted(new.keys() - old.keys()):
        diff.differences.append(f"target {key} is new in the replay")
    for key in sorted(old.keys() & new.keys()):
        a, b = old[key], new[key]
        if a.valid != b.valid:
            diff.differences.append(f"target {key} validity changed {a.valid} ({a.reason}) -> {b.valid} ({b.reason})")
        if a.valid and b.valid:
            distance = float(np.linalg.norm(np.subtract(a.point, b.point)))
            diff.target_errors_m[key] = distance
            if distance > tolerance_m:
                diff.differences.append(f"target {key} moved {_millimetres(distance)} "
                                        f"{np.round(a.point, 4).tolist()} -> {np.round(b.point, 4).tolist()}")
    if recorded.planned and replayed.planned and (recorded.plan_endpoints or replayed.plan_endpoints):
        if len(recorded.plan_endpoints) != len(replayed.plan_endpoints):
            diff.differences.append(f"plan has {len(replayed.plan_endpoints)} phase(s) in the replay, "
                                    f"{len(recorded.plan_endpoints)} recorded")
        for index, (a, b) in enumerate(zip(recorded.plan_endpoints, replayed.plan_endpoints, strict=False)):
            if len(a) != len(b):
                diff.differences.append(f"plan phase {index}: {len(b)} joints in the replay, {len(a)} recorded")
                continue
            error = float(np.max(np.abs(np.subtract(a, b)))) if a else 0.0
            diff.plan_errors_rad.append(error)
            if error > tolerance_rad:
                diff.differences.append(f"plan phase {index} ends {error:.4f} rad away from the recorded end")
    return diff


def outcome_from_messages(reasoning: Any, targets: Sequence[Any] = (), trajectories: Sequence[Any] = ()) -> StepOutcome:
    """A StepOutcome from PinnedReasoning / Target3D / JointTrajectory objects (rosbags or rclpy classes)."""
    anchors = tuple(AnchorPoint(a.id, a.name, int(a.img_idx), float(a.u), float(a.v)) for a in reasoning.anchors)
    answers = tuple(AnchorPoint(f"answer{k}", p.label or p.id, int(p.img_idx), float(p.u), float(p.v))
                    for k, p in enumerate(reasoning.answer_points))
    target_points = []
    for k, t in enumerate(targets):
        key = f"{t.id or f'target{k}'}@{t.img_idx}"
        target_points.append(TargetPoint(key, (float(t.point.x), float(t.point.y), float(t.point.z)), bool(t.valid),
                                         t.reason))
    endpoints = tuple(tuple(float(q) for q in trajectory.points[-1].positions)
                      for trajectory in trajectories if len(trajectory.points))
    return StepOutcome(anchors, answers, tuple(target_points), endpoints, bool(reasoning.valid), reasoning.model)
