"""The four stages the reasoning loop depends on, as small protocols: observe, reason, project, act.

The loop (:mod:`robopin.reasoning.loop`) only talks to these, so the same loop runs in-process
against the simulator (:mod:`robopin.reasoning.snapshot_stages`) and inside ``task_node``, where each
stage is a ROS call (camera topics → snapshot, ``ProjectPoints`` service, ``PickPlace`` action).
The *reason* stage is :class:`~robopin.reasoning.reasoner.Reasoner` (E-TTS wraps it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from robopin.geometry import PointRequest, Target
from robopin.vlm.base import ViewImage

Stages = ("observing", "reasoning", "validating", "projecting", "planning", "executing", "done")
"""Feedback stages of a task, in the order a step passes through them."""

StageCallback = Callable[[str, int, str], None]
"""``on_stage(stage, step, detail)``: called as a step enters each of :data:`Stages`."""

StopCheck = Callable[[], bool]
"""Returns True once the task has been canceled; every stage checks it before it starts."""


@dataclass(frozen=True)
class Observation:
    """One multi-view observation as the model sees it.

    ``views`` are the color images in ``img_idx`` order (``views[i].img_idx == i``);
    ``image_sizes`` are their (width, height) in pixels; ``stamp_s`` is the newest frame time.
    ``source`` is whatever the observer needs to project later (e.g. the snapshot with depth).
    """

    views: tuple[ViewImage, ...]
    stamp_s: float
    source: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "views", tuple(self.views))
        if not self.views:
            raise ValueError("an observation needs at least one view")
        indices = [view.img_idx for view in self.views]
        if indices != list(range(len(self.views))):
            raise ValueError(f"observation views must be in img_idx order 0..{len(self.views) - 1}, got {indices}")

    @property
    def view_names(self) -> tuple[str, ...]:
        return tuple(view.name for view in self.views)

    @property
    def image_sizes(self) -> tuple[tuple[int, int], ...]:
        return tuple((view.width, view.height) for view in self.views)


@dataclass(frozen=True)
class MotionOutcome:
    """What the actor reports for one pick-and-place: ``status`` is a named motion status."""

    success: bool
    status: str = "success"
    message: str = ""
    planning_time_s: float = 0.0
    executed: bool = False
    details: dict[str, Any] = field(default_factory=dict)


class Observer(Protocol):
    """Takes a synchronised multi-view observation; raises ``TaskRefusal`` (``stale_frame``, …)."""

    def observe(self) -> Observation: ...


class TargetProjector(Protocol):
    """Carries pixel points of an observation into 3D targets in the base frame, one per request.

    Refused points come back as targets with ``valid`` False and a named ``reason``; a projection
    that cannot run at all raises ``TaskRefusal("projection_unavailable", …)``.
    """

    def project(self, requests: Sequence[PointRequest], observation: Observation) -> list[Target]: ...


class Actor(Protocol):
    """Plans (and unless ``dry_run``, executes) one pick-and-place between two 3D targets.

    ``on_stage`` reports ``planning`` / ``executing``; ``should_stop`` turning True must stop the arm
    and make the call return (the loop then ends the task as ``canceled``).
    """

    def pick_place(
        self,
        pick: Target,
        place: Target,
        *,
        dry_run: bool,
        on_stage: Callable[[str, str], None],
        should_stop: StopCheck,
    ) -> MotionOutcome: ...
