"""Ground-truth perception that writes RoboPIN-format PinCoT for a simulated scene. Not a model.

:class:`GroundTruthOracle` reads the simulator's segmentation masks and object poses and writes the
trace a perfect RoboPIN would: every task-relevant entity pinned on a visible pixel in each view
that shows it, one ID per entity shared across views, IDs in first-mention order, bare-ID
references afterwards, and an answer with the pick point and the place point. It lets the rest of
the stack (projection, motion, trials, test-time scaling) run end to end without a GPU.

It can also inject controlled errors (:class:`OracleErrors`): point jitter, a reference to an ID
never introduced, a missing view, a malformed tag, or the wrong target; validation and E-TTS are
tested against those.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from robopin.pincot.coords import pixel_index_to_normalized
from robopin.pincot.trace import AnswerPoint
from robopin.pincot.writer import TraceWriter, format_answer_json, format_trace
from robopin.settings import check_fields, fraction
from robopin.sim.grounding import Grounding, GroundingError, ground_instruction
from robopin.sim.render import RenderedView, project
from robopin.sim.selfcheck import place_points
from robopin.sim.tasks import Scene, on_plate

OCCLUSION_MARGIN_M = 0.01
"""A place spot counts as hidden in a view when that view's depth there is this much nearer."""
OCCLUSION_WINDOW_PX = 4
"""...anywhere within this many pixels of the spot: the projector's depth window must not reach an occluder."""


def spot_in_view(
    view: RenderedView, point_base: NDArray[np.float64], surface_body: int | None = None
) -> tuple[float, float, bool] | None:
    """Pixel (u, v) of a base point in ``view`` and whether the view sees it, or None when it lies
    outside the image or behind the camera.

    Seen means nothing lies in front of it, at the pixel or within ``OCCLUSION_WINDOW_PX`` of it (the
    projector's depth window must not reach an occluder). Pixels of ``surface_body`` (the plate the
    point lies on) never count as occluders: a plate seen at a slant is nearer below the spot.
    """
    u, v, z = project(view, point_base)
    if not (z > 0 and 0 <= u < view.color.shape[1] and 0 <= v < view.color.shape[0]):
        return None
    height, width = view.depth_m.shape
    r = OCCLUSION_WINDOW_PX
    rows = slice(max(int(v) - r, 0), min(int(v) + r + 1, height))
    cols = slice(max(int(u) - r, 0), min(int(u) + r + 1, width))
    depth = view.depth_m[rows, cols]
    nearer = (depth > 0.0) & (depth < z - OCCLUSION_MARGIN_M)
    if surface_body is not None:
        nearer &= view.segmentation[rows, cols] != surface_body
    return u, v, not bool(np.any(nearer))


HAND_CLEARANCE_M = 0.04
"""Gap between footprints that leaves the gripper room beside an object already on the plate (a closed
xArm gripper's fingers and body reach ~3 cm past a small object): such spots are preferred."""
FREE_CLEARANCE_M = 0.01
"""The least gap between footprints that still counts as free when placing beside an object."""
RIM_MARGIN_M = 0.012
"""How far inside a plate's rim a placed footprint stays."""


def free_spots(scene: Scene, target: str, moving: str, preferred: NDArray[np.float64]) -> list[NDArray[np.float64]]:
    """Place points on ``target`` for ``moving``, best first (ground truth).

    ``preferred`` (the planned release point) comes first while it leaves ``HAND_CLEARANCE_M`` to the
    objects already resting on the plate. The rest are points of a grid inside the plate that keep
    ``moving``'s footprint ``RIM_MARGIN_M`` inside the rim: those that leave ``HAND_CLEARANCE_M``, nearest
    the plate centre first, then those that leave ``FREE_CLEARANCE_M``, likewise, then the others by
    clearance. A ``preferred`` that leaves ``FREE_CLEARANCE_M`` but not ``HAND_CLEARANCE_M`` comes before
    the grid points that leave no more than it must: among those, the one nearest the centre lies just
    ``FREE_CLEARANCE_M`` from its neighbour, where the planned spot usually leaves more (a duck planned
    opposite a ball on a small plate: 3.5 cm against 1.1 cm). This is what "a free area on the plate"
    means. The planned ring of points alone sent a later object onto one that had landed off its own spot;
    the spot farthest from the others lay on the rim, where a release a centimetre off dropped the object
    over the edge; and a spot 1 cm from a duck left the xArm's gripper no room (every place pose in
    collision). The caller takes the first one a camera sees (``answer_place``).
    """
    world = scene.world
    plate = world.object(target)
    mover = world.object(moving)
    occupants = []
    for name, obj in world.objects.items():
        if name in (target, moving) or obj.kind in ("plate", "tray"):
            continue
        if on_plate(world, name, target)[0]:
            occupants.append((world.object_center(name)[:2], obj.radius_m))

    def clearance(xy: NDArray[np.float64]) -> float:
        if not occupants:
            return math.inf
        return min(float(np.linalg.norm(xy - c)) - r for c, r in occupants) - mover.radius_m

    center = world.object_center(target)[:2]
    reach = max(plate.radius_m - mover.radius_m - RIM_MARGIN_M, 0.0)
    ranked = []
    for dx in np.linspace(-reach, reach, 21):
        for dy in np.linspace(-reach, reach, 21):
            if math.hypot(dx, dy) > reach + 1e-9:
                continue
            xy = center + np.array([dx, dy])
            free = clearance(xy)
            if not occupants:
                key = (2, -float(np.linalg.norm(xy - preferred[:2])))
            elif free >= FREE_CLEARANCE_M:
                key = (2 if free >= HAND_CLEARANCE_M else 1, -math.hypot(dx, dy))
            else:
                key = (0, round(free, 3))
            ranked.append((key, np.array([xy[0], xy[1], preferred[2]])))
    ranked.sort(key=lambda item: item[0], reverse=True)
    spots = [spot for _, spot in ranked]
    planned = clearance(preferred[:2])
    if planned >= HAND_CLEARANCE_M:
        return [preferred, *spots]
    if planned >= FREE_CLEARANCE_M:
        roomy = sum(1 for key, _ in ranked if key[0] == 2)
        return [*spots[:roomy], preferred, *spots[roomy:]]
    return spots or [preferred]


def free_spot(scene: Scene, target: str, moving: str, preferred: NDArray[np.float64]) -> NDArray[np.float64]:
    """The best of ``free_spots`` (ignoring what the cameras see)."""
    return free_spots(scene, target, moving, preferred)[0]


class OracleError(RuntimeError):
    """The oracle cannot write a trace for this state (no view given, target seen nowhere, …)."""


@dataclass(frozen=True)
class OracleErrors:
    """Controlled mistakes to inject; all off by default (a perfect trace).

    - ``point_jitter_px``: Gaussian noise (standard deviation, pixels) on every written point.
    - ``wrong_id_probability``: one bare-ID reference becomes an ID that was never introduced.
    - ``missing_views``: image indices the oracle writes no anchor in (as if it ignored that view);
      when the target is only visible there, the answer falls back to a wrong visible entity.
    - ``malformed_tag_probability``: one anchor tag loses its closing quote and ``>``.
    - ``wrong_target_probability``: the answer picks a distractor (valid format, wrong entity).
    """

    point_jitter_px: float = 0.0
    wrong_id_probability: float = 0.0
    missing_views: tuple[int, ...] = ()
    malformed_tag_probability: float = 0.0
    wrong_target_probability: float = 0.0

    def __post_init__(self) -> None:
        if self.point_jitter_px < 0:
            raise ValueError(f"point_jitter_px must be >= 0, got {self.point_jitter_px}")
        check_fields(self, ("wrong_id_probability", "malformed_tag_probability", "wrong_target_probability"),
                     fraction, ValueError, "in [0, 1]")
        object.__setattr__(self, "missing_views", tuple(int(v) for v in self.missing_views))

    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> OracleErrors:
        """Build from a config mapping, naming unknown keys."""
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown oracle error settings {sorted(unknown)}; expected some of {sorted(known)}")
        return cls(**values)  # type: ignore[arg-type]


@dataclass(frozen=True)
class OracleTrace:
    """One written trace: the text plus what the oracle meant (for tests and trial reports)."""

    text: str
    num_views: int
    pick_object: str | None
    place_target: str | None
    done: bool
    injected: tuple[str, ...] = ()
    entity_ids: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Sighting:
    view: int
    u: float
    v: float
    pixels: int


def describe(scene: Scene, name: str) -> str:
    """The words a person would use for an object: colour + noun (``red plate``, ``duck``)."""
    obj = scene.world.object(name)
    noun = {"teddy": "teddy bear", "toy_block": "toy block", "ball": "ball", "lego": "lego brick"}.get(
        obj.kind, obj.kind
    )
    if obj.kind == "duck":
        return "yellow duck" if scene.task.task_type == "long_horizon" else "duck"
    return f"{obj.color} {noun}" if obj.color else noun


_SIGHTINGS: dict[tuple, tuple[tuple[RenderedView, ...], dict[str, list[_Sighting]]]] = {}


class GroundTruthOracle:
    """Writes PinCoT from simulator ground truth for ``scene`` (see module docstring).

    ``views`` are camera names in ``img_idx`` order (static first, as the stack configures them).
    ``min_visible_pixels``: an entity is pinned in a view only when at least this many of its
    pixels are visible there.
    """

    def __init__(
        self,
        scene: Scene,
        views: Sequence[str] = ("static", "wrist"),
        *,
        min_visible_pixels: int = 40,
        errors: OracleErrors | None = None,
        seed: int = 0,
        instruction: str | None = None,
    ) -> None:
        if not views:
            raise OracleError("the oracle needs at least one view")
        for view in views:
            scene.world.camera(view)
        self.scene = scene
        self.views = tuple(views)
        self.min_visible_pixels = int(min_visible_pixels)
        self.errors = errors or OracleErrors()
        self.rng = np.random.default_rng(seed)
        # None: the scenario's own task (callers that hold no instruction). Otherwise the instruction is
        # grounded in the scene, and one that cannot be is answered with a refusal naming why.
        self.instruction = instruction
        self.grounding: Grounding | None = None
        self.grounding_error = ""
        self.grounding_failure: GroundingError | None = None
        if instruction is not None:
            try:
                self.grounding = ground_instruction(scene, instruction)
            except GroundingError as error:
                self.grounding_error = str(error)
                self.grounding_failure = error

    @property
    def own_task(self) -> bool:
        """True when the oracle works on the scenario's own task (its narratives read the layout's roles)."""
        return self.grounding is None or self.grounding.own

    def goals(self) -> tuple[tuple[str, str], ...]:
        """(object, target) pairs the instruction asks for, in order (the scenario's goals by default)."""
        if self.grounding is not None:
            return self.grounding.goals
        return tuple((g.object, g.target) for g in self.scene.task.goals)

    # ------------------------------------------------------------------ perception
    def render(self) -> list[RenderedView]:
        """Render every view now (in ``img_idx`` order)."""
        return [self.scene.world.render(view) for view in self.views]

    def sightings(self, rendered: Sequence[RenderedView]) -> dict[str, list[_Sighting]]:
        """Per object: where it is visible, as the mask pixel nearest its visible centroid, per view.

        Cached for the last few renders: every sample of one request reads the same views.
        """
        key = (id(self.scene), self.min_visible_pixels, *(id(view) for view in rendered))
        cached = _SIGHTINGS.get(key)
        if cached is not None and all(a is b for a, b in zip(cached[0], rendered, strict=True)):
            return {name: list(seen) for name, seen in cached[1].items()}
        found = self._sightings(rendered)
        _SIGHTINGS[key] = (tuple(rendered), found)
        while len(_SIGHTINGS) > 4:
            _SIGHTINGS.pop(next(iter(_SIGHTINGS)))
        return {name: list(seen) for name, seen in found.items()}

    def _sightings(self, rendered: Sequence[RenderedView]) -> dict[str, list[_Sighting]]:
        found: dict[str, list[_Sighting]] = {}
        for index, view in enumerate(rendered):
            for obj in self.scene.world.objects.values():
                rows, cols = np.nonzero(view.segmentation == obj.body_id)
                if len(rows) < self.min_visible_pixels:
                    continue
                # The centroid of a concave mask can fall off the object: take the nearest mask pixel.
                k = int(np.argmin((rows - rows.mean()) ** 2 + (cols - cols.mean()) ** 2))
                found.setdefault(obj.name, []).append(_Sighting(index, cols[k] + 0.5, rows[k] + 0.5, len(rows)))
        return found

    # ------------------------------------------------------------------ writing
    def next_goal(self) -> tuple[str, str] | None:
        """The first goal (object, target) not yet achieved, or None when the task is done."""
        for obj, target in self.goals():
            if not on_plate(self.scene.world, obj, target)[0]:
                return obj, target
        return None

    def write(self, rendered: Sequence[RenderedView] | None = None) -> OracleTrace:
        """Write the trace for the scene's current state from ``rendered`` views (rendered now if None)."""
        rendered = list(rendered) if rendered is not None else self.render()
        if len(rendered) != len(self.views):
            raise OracleError(f"expected {len(self.views)} rendered views {self.views}, got {len(rendered)}")
        sightings = self.sightings(rendered)
        dropped = set(self.errors.missing_views)
        if dropped:
            sightings = {n: [s for s in seen if s.view not in dropped] for n, seen in sightings.items()}
            sightings = {n: seen for n, seen in sightings.items() if seen}
        composer = _Composer(self, rendered, sightings)
        if self.grounding_failure is not None:
            composer.decline(self.grounding_failure)
            return composer.result()
        goal = self.next_goal()
        if goal is None:
            composer.finish()
        else:
            composer.compose(*goal)
        return composer.result()

    def _jitter(self, u: float, v: float, view: RenderedView) -> tuple[float, float]:
        if self.errors.point_jitter_px > 0:
            u += float(self.rng.normal(0.0, self.errors.point_jitter_px))
            v += float(self.rng.normal(0.0, self.errors.point_jitter_px))
        width, height = view.color.shape[1], view.color.shape[0]
        return min(max(u, 0.0), width - 1e-6), min(max(v, 0.0), height - 1e-6)


class _Composer:
    """Builds one trace: entity pins per view, reasoning sentences, answer, then injected errors."""

    def __init__(
        self, oracle: GroundTruthOracle, rendered: Sequence[RenderedView], sightings: Mapping[str, list[_Sighting]]
    ) -> None:
        self.oracle = oracle
        self.scene = oracle.scene
        self.rendered = rendered
        self.sightings = sightings
        self.writer = TraceWriter(num_views=len(rendered))
        self.ids: dict[str, str] = {}
        self.counter = {"obj": 0, "space": 0}
        self.pick: str | None = None
        self.place: str | None = None
        self.done = False
        self.answer_points: list[AnswerPoint] = []
        self.injected: list[str] = []
        self.declined = ""

    # -- helpers
    def _id(self, key: str, kind: str = "obj") -> str:
        if key not in self.ids:
            self.counter[kind] += 1
            self.ids[key] = f"{kind}_{self.counter[kind]:02d}"
        return self.ids[key]

    def _norm(self, u: float, v: float, view_index: int) -> tuple[int, int]:
        view = self.rendered[view_index]
        u, v = self.oracle._jitter(u, v, view)
        width, height = view.color.shape[1], view.color.shape[0]
        x, y = pixel_index_to_normalized(math.floor(u), math.floor(v), (width, height))
        return round(x), round(y)

    def visible(self, name: str, view_index: int) -> bool:
        return any(s.view == view_index for s in self.sightings.get(name, ()))

    def pin(self, name: str, view_index: int) -> str:
        """Pin ``name`` in a view where it is visible (its ID is created at first mention)."""
        sighting = next(s for s in self.sightings[name] if s.view == view_index)
        x, y = self._norm(sighting.u, sighting.v, view_index)
        return self.writer.pin("obj", describe(self.scene, name), view_index, x, y, entity_id=self._id(name))

    def mention(self, name: str) -> None:
        """Refer to an entity by ID if introduced, else by words (it is not visible anywhere)."""
        if name in self.ids:
            self.writer.refer(self.ids[name])
        else:
            self.writer.say(f"the {describe(self.scene, name)}")

    def say(self, text: str) -> None:
        self.writer.say(text)

    def describe_views(self, names: Sequence[str]) -> None:
        """One sentence per view listing the relevant entities visible there, pinned."""
        for view_index in range(len(self.rendered)):
            seen = [n for n in names if self.visible(n, view_index)]
            label = self.oracle.views[view_index]
            if not seen:
                self.say(f"Image {view_index} ({label} camera) shows none of the relevant objects. ")
                continue
            self.say(f"In image {view_index} ({label} camera) I see ")
            for k, name in enumerate(seen):
                if k:
                    self.say(", " if k < len(seen) - 1 else " and ")
                self.pin(name, view_index)
            self.say(". ")

    def best_view(self, name: str) -> _Sighting | None:
        seen = self.sightings.get(name, [])
        return max(seen, key=lambda s: s.pixels) if seen else None

    def answer_pick(self, name: str) -> None:
        sighting = self.best_view(name)
        if sighting is None:
            raise OracleError(f"{name} is visible in no view; cannot answer a pick point")
        anchor_id = self.ids.get(name) or self.pin(name, sighting.view)
        self.writer.answer_anchor(anchor_id, img_idx=sighting.view)
        self.pick = name

    def answer_place(self, target: str, candidates: list[NDArray[np.float64]]) -> None:
        """Pin a ``space`` anchor on the placement spot (projected ground truth) and answer it.

        ``candidates`` are place points best first; the first one some view sees (nothing in front of
        it) is pinned, in the view that shows the plate largest. A spot hidden behind something (an
        object already on the plate) would project onto that object's top, so it is pinned only when
        every candidate is hidden.
        """
        plate_body = self.scene.world.object(target).body_id
        best = None
        for point_base in candidates:
            here = None
            for view_index, view in enumerate(self.rendered):
                if view_index in self.oracle.errors.missing_views or not self.visible(target, view_index):
                    continue
                spot = spot_in_view(view, point_base, surface_body=plate_body)
                if spot is not None:
                    u, v, unoccluded = spot
                    pixels = next(s.pixels for s in self.sightings[target] if s.view == view_index)
                    key = (unoccluded, pixels)
                    if here is None or key > here[3]:
                        here = (view_index, u, v, key)
            if best is None:
                best = here
            if here is not None and here[3][0]:
                best = here
                break
        if best is None:
            raise OracleError(f"the placement spot on {target} is visible in no view")
        view_index, u, v, _ = best
        x, y = self._norm(u, v, view_index)
        space_id = self.writer.pin(
            "space",
            f"free area on the {describe(self.scene, target)}",
            view_index,
            x,
            y,
            entity_id=self._id(f"space:{target}", "space"),
        )
        self.writer.answer_anchor(space_id, img_idx=view_index)
        self.place = target

    # -- task narratives
    def compose(self, target: str, place: str) -> None:
        task = self.scene.task
        roles = task.roles
        wrong = self.oracle.rng.random() < self.oracle.errors.wrong_target_probability
        pick = target
        narrative = task.task_type if self.oracle.own_task else "instruction"
        if narrative in ("spatial", "multi_view"):
            toys = [roles["toy_a"], roles["toy_b"]]
            ducks = [roles["target"], roles["other_duck"]]
            plates = [n for n, o in self.scene.world.objects.items() if o.kind == "plate"]
            self.describe_views(toys + ducks + plates)
            if not any(self.visible(target, v) for v in range(len(self.rendered))):
                # Without a view of the target (e.g. the wrist view ignored), the only duck visible
                # is the wrong one; RoboPIN's baselines fail exactly this way.
                pick = roles["other_duck"]
                self.injected.append("target not visible: answered the visible duck")
            if wrong:
                pick = roles["other_duck"]
                self.injected.append("wrong target")
            relation = "in front of" if task.task_type == "spatial" else "behind"
            self.mention(pick)
            self.say(f" is the duck {relation} ")
            self.mention(toys[0])
            self.say(" and ")
            self.mention(toys[1])
            self.say(", so it is the one to pick; ")
            self.mention(roles["other_duck"] if pick == target else target)
            self.say(" is not. ")
            if task.task_type == "spatial":
                self.say("The plates ")
                self.mention(roles["plate_first"])
                self.say(", ")
                self.mention(place)
                self.say(" and ")
                self.mention(roles["plate_last"])
                self.say(" stand in a row and ")
                self.mention(place)
                self.say(" is the middle one. ")
            else:
                self.mention(place)
                self.say(" is the plate in front of ")
                self.mention(toys[0])
                self.say(" and ")
                self.mention(toys[1])
                self.say(". ")
        elif narrative == "long_horizon":
            remaining = [g.object for g in task.goals if not on_plate(self.scene.world, g.object, g.target)[0]]
            placed = [g.object for g in task.goals if g.object not in remaining]
            plates = [n for n, o in self.scene.world.objects.items() if o.kind == "plate"]
            self.describe_views([place] + remaining + placed + list(task.must_stay) + [p for p in plates if p != place])
            self.say("The yellow objects still outside the plates are ")
            for k, name in enumerate(remaining):
                if k:
                    self.say(" and ")
                self.mention(name)
            self.say(". ")
            for name in task.must_stay:
                self.mention(name)
                self.say(" is already on a plate, so it stays. ")
            if wrong and task.must_stay:
                pick = task.must_stay[0]
                self.injected.append("wrong target")
            self.say("Next I move ")
            self.mention(pick)
            self.say(" into ")
            self.mention(place)
            self.say(". ")
        else:
            self.describe_views([target, place])
            if wrong:
                others = [n for n, o in self.scene.world.objects.items() if o.graspable and n != target]
                if others:
                    pick = others[0]
                    self.injected.append("wrong target")
            self.say("I pick ")
            self.mention(pick)
            self.say(" and place it on ")
            self.mention(place)
            self.say(". ")
        self.answer_pick(pick)
        # A move the task plans (its own instruction, or one naming a goal of it, as a plan's action or an
        # R^3 step does) is released at the task's planned spot: objects sharing a plate each have their own
        # spot on a ring, so a second one is not aimed at the centre where the first one lies.
        planned = (target, place) in {(g.object, g.target) for g in self.scene.task.goals}
        spot = place_points(self.scene).get(target) if planned else _top_centre(self.scene, place)
        if spot is None:
            candidates = [self.scene.world.object_center(place)]
        elif pick == target:
            candidates = free_spots(self.scene, place, pick, spot)
        else:
            candidates = [spot]
        self.answer_place(place, candidates)

    def decline(self, failure: GroundingError) -> None:
        """The instruction cannot be grounded: say why and answer no point (a careful model's refusal).

        An ambiguous reference pins every candidate it could mean (the operator sees which ones) and asks
        which one; a reference to nothing says the scene does not show it.
        """
        # The reason quotes the instruction, which may hold '<' or '>' (an arrow); PinCoT's free text may not.
        why = str(failure).replace("<", "‹").replace(">", "›")
        if failure.kind == "ambiguous":
            self.describe_views([n for n in failure.candidates if n in self.sightings])
        self.say(f"I looked for what the instruction names. {why[0].upper()}{why[1:]}. ")
        if failure.kind == "ambiguous":
            self.say("I will not guess which one is meant, so I give no target. ")
        elif failure.kind == "unreadable":
            self.say("I cannot tell what to move where, so I give no target. ")
        else:
            self.say("I cannot point at something the scene does not show, so I give no target. ")
        self.declined = why

    def finish(self) -> None:
        """Every goal holds: say so and answer ``done``."""
        goals = self.oracle.goals()
        self.describe_views([t for _, t in goals][:1] + [o for o, _ in goals])
        self.say("Every object the task names is already where it should be, so the task is complete. ")
        self.done = True

    def result(self) -> OracleTrace:
        think = self.writer.think_text()
        answer = "done" if self.done else "[]" if self.declined else format_answer_json(self.writer.answer_points)
        think, answer = self._inject(think, answer)
        text = format_trace(think, answer)
        return OracleTrace(
            text, len(self.rendered), self.pick, self.place, self.done, tuple(self.injected), dict(self.ids)
        )

    def _inject(self, think: str, answer: str) -> tuple[str, str]:
        errors, rng = self.oracle.errors, self.oracle.rng
        if errors.wrong_id_probability and rng.random() < errors.wrong_id_probability:
            used = set(self.ids.values())
            references = [m for m in re.finditer(r"(?<![\w\"])obj_\d{2}(?![\w\"])", think)]
            if references:
                match = references[int(rng.integers(len(references)))]
                unknown = next(f"obj_{k:02d}" for k in range(90, 100) if f"obj_{k:02d}" not in used)
                think = think[: match.start()] + unknown + think[match.end() :]
                self.injected.append(f"wrong id {match.group(0)}->{unknown}")
        if errors.malformed_tag_probability and rng.random() < errors.malformed_tag_probability:
            tags = list(re.finditer(r'<(obj|space) [^>]*">', think))
            if tags:
                tag = tags[int(rng.integers(len(tags)))]
                broken = tag.group(0)[:-2]  # drop the closing quote and '>'
                think = think[: tag.start()] + broken + think[tag.end() :]
                self.injected.append("malformed tag")
        if errors.missing_views:
            self.injected.append(f"missing views {list(errors.missing_views)}")
        return think, answer


def _top_centre(scene: Scene, target: str) -> NDArray[np.float64]:
    """The release point on ``target`` for a goal the task does not plan: its top centre (as ``place_points``)."""
    world = scene.world
    centre = world.object_center(target)
    top = centre[2] + world.object(target).height_m / 2 if world.object(target).kind == "plate" else 0.0
    return np.array([centre[0], centre[1], top])
