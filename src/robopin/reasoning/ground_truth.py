"""Optional ground truth for the loop's run-time measures: where each named entity truly is, and the right plan.

A real cell has none: the loop then measures only what the text alone shows (format, identity consistency,
coverage). A simulated system names a ground-truth source in its planner settings (``ground_truth: {type:
sim, world: workcell}``); the loop asks it, after each model call and before anything moves, for

- :meth:`GroundTruth.regions`: every entity's region per view (0-1000 boxes of ``img_idx``) keyed by the
  words a model names it with, and the regions the next pick and place truly are; from these come
  RoboPIN's pin accuracy R_pin (AC, Table 3: reasoning anchors inside their entity's region) and the
  answer accuracy (the pick point on the object to move, the place point on its target);
- :meth:`GroundTruth.reference_plan`: the action names that carry out the instruction in order, for
  RoboGPT-R1's LCS accuracy of a plan.

A source type is a factory ``(settings) -> GroundTruth`` in :data:`GROUND_TRUTH`; the simulator's module is
declared by path, so a real system never imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from robopin.pincot import Box, Trace, answer_accuracy, pin_accuracy
from robopin.pincot.plan import plan_accuracy
from robopin.reasoning.errors import ReasoningConfigError
from robopin.reasoning.protocols import Observation
from robopin.registry import Registry, UnknownTypeError

__all__ = ["GROUND_TRUTH", "GroundTruth", "GroundTruthRegions", "make_ground_truth", "plan_measures",
           "pointing_measures"]


@dataclass(frozen=True)
class GroundTruthRegions:
    """Where things are in one observation (0-1000 boxes with their ``img_idx``).

    ``entities`` maps each name (lower-cased words) to the regions of every entity so named; ``pick`` and
    ``place`` are the regions of the next goal's object and target (both empty when nothing is left to do).
    """

    entities: Mapping[str, tuple[Box, ...]]
    pick: tuple[Box, ...] = ()
    place: tuple[Box, ...] = ()

    @property
    def done(self) -> bool:
        return not self.pick and not self.place


class GroundTruth(Protocol):
    def regions(self, observation: Observation, instruction: str) -> GroundTruthRegions | None:
        """The regions for ``instruction`` in the scene as ``observation`` saw it (None: not known)."""

    def reference_plan(self, instruction: str, actions: Mapping[int, str]) -> tuple[str, ...] | None:
        """The action names (of ``actions``) that carry out ``instruction`` from the scene now, in order."""


def pointing_measures(trace: Trace, regions: GroundTruthRegions) -> dict[str, float]:
    """``pin_accuracy`` (R_pin over the reasoning anchors, by name) and ``answer_accuracy`` of one trace.

    The answer is scored per role: the pick point inside the pick regions, the place point inside the place
    regions (a ``done`` answer is right exactly when nothing is left to do).
    """
    measures = {"pin_accuracy": pin_accuracy(trace, dict(regions.entities), key="name")}
    if trace.done or not trace.answer_points:
        measures["answer_accuracy"] = 1.0 if (trace.done and regions.done) else 0.0
    else:
        points = trace.answer_points[:2]
        roles = (regions.pick, regions.place)
        hits = [answer_accuracy([p], list(boxes)) for p, boxes in zip(points, roles, strict=False)]
        measures["answer_accuracy"] = sum(hits) / 2.0
    return measures


def plan_measures(steps: Sequence[str], reference: Sequence[str] | None) -> dict[str, float]:
    """RoboGPT-R1's ``plan_accuracy`` (LCS of action names / reference length), when a reference is known."""
    if reference is None:
        return {}
    if not reference:  # nothing left to do: the right plan is the empty one
        return {"plan_accuracy": 1.0 if not steps else 0.0}
    return {"plan_accuracy": plan_accuracy(list(steps), list(reference))}


class UnknownGroundTruthError(UnknownTypeError, ReasoningConfigError):
    """A ground-truth source type nobody registered."""


GroundTruthFactory = Callable[[Mapping[str, Any]], GroundTruth]
GROUND_TRUTH: Registry[None, GroundTruthFactory] = Registry(
    "ground truth", unknown_error=UnknownGroundTruthError, config_error=ReasoningConfigError,
    unavailable_error=ReasoningConfigError,
)
GROUND_TRUTH.declare("sim", "robopin.sim.ground_truth", requires=("pybullet",))


def make_ground_truth(settings: Mapping[str, Any] | None) -> GroundTruth | None:
    """The source ``settings["type"]`` names, or None for empty settings (a real system)."""
    if not settings:
        return None
    if not isinstance(settings, Mapping) or not isinstance(settings.get("type"), str):
        raise ReasoningConfigError(f"ground_truth must be a mapping with a 'type', got {settings!r}")
    factory = GROUND_TRUTH.backend_class(settings["type"])
    return factory({k: v for k, v in settings.items() if k != "type"})
