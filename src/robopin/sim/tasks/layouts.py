"""Seeded table layouts: where each object goes and which goals the layout sets.

Directions follow the static camera, which faces the robot from +x: "in front of" means nearer
the camera (larger x), "behind" means nearer the robot.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from robopin.sim.assets import asset
from robopin.sim.robot_models import robot_model
from robopin.sim.tasks.errors import LayoutError, ScenarioError
from robopin.sim.tasks.success import PlaceGoal

WORKSPACE_X = (0.32, 0.76)
WORKSPACE_Y = (-0.34, 0.34)
WORKSPACE_MAX_RADIUS_M = 0.72
"""Farthest object centre from the robot base for any robot (the camera views are framed for it);
a robot with a shorter top-down reach lowers it (see :func:`layout_reach_m`)."""
_CLEARANCE_M = 0.015


@dataclass(frozen=True)
class Placement:
    """One object a layout puts on the table."""

    name: str
    kind: str
    xy: tuple[float, float]
    yaw_rad: float = 0.0
    color: str | None = None
    radius_m: float | None = None


@dataclass(frozen=True)
class Layout:
    """A layout generator's output: what to place and the task over it."""

    placements: tuple[Placement, ...]
    goals: tuple[PlaceGoal, ...]
    must_stay: tuple[str, ...]
    roles: Mapping[str, str]


def layout_reach_m(robot: str) -> float:
    """Farthest object centre from the base (m) a layout may use for ``robot``.

    The shorter of the framed workspace (:data:`WORKSPACE_MAX_RADIUS_M`) and the robot's top-down
    reach, so every object a task names can be picked and every plate placed on by that robot.
    """
    return min(WORKSPACE_MAX_RADIUS_M, robot_model(robot).top_down_reach_m)


class _Sampler:
    """Rejection sampling of non-overlapping footprints on the table, inside ``reach_m`` of the base."""

    def __init__(self, rng: np.random.Generator, reach_m: float = WORKSPACE_MAX_RADIUS_M) -> None:
        self.rng = rng
        self.reach_m = reach_m
        self.discs: list[tuple[float, float, float]] = []

    def free(self, x: float, y: float, radius: float) -> bool:
        if not (WORKSPACE_X[0] <= x <= WORKSPACE_X[1] and WORKSPACE_Y[0] <= y <= WORKSPACE_Y[1]):
            return False
        if math.hypot(x, y) > self.reach_m:
            return False
        return all(math.hypot(x - a, y - b) >= radius + r + _CLEARANCE_M for a, b, r in self.discs)

    def take(self, x: float, y: float, radius: float) -> tuple[float, float]:
        self.discs.append((x, y, radius))
        return (x, y)

    def place(
        self, radius: float, region: tuple[tuple[float, float], tuple[float, float]] | None = None, tries: int = 400
    ) -> tuple[float, float]:
        (x0, x1), (y0, y1) = region or (WORKSPACE_X, WORKSPACE_Y)
        for _ in range(tries):
            x, y = self.rng.uniform(x0, x1), self.rng.uniform(y0, y1)
            if self.free(x, y, radius):
                return self.take(x, y, radius)
        raise LayoutError(f"no free spot of radius {radius:.3f} m in x {x0:.2f}..{x1:.2f}, y {y0:.2f}..{y1:.2f}")

    def jitter(self, x: float, y: float, radius: float, spread: float, tries: int = 60) -> tuple[float, float]:
        for _ in range(tries):
            cx, cy = x + self.rng.uniform(-spread, spread), y + self.rng.uniform(-spread, spread)
            if self.free(cx, cy, radius):
                return self.take(cx, cy, radius)
        raise LayoutError(f"no free spot of radius {radius:.3f} m near ({x:.2f}, {y:.2f})")


def _radius(kind: str, radius_m: float | None = None) -> float:
    return radius_m if radius_m is not None else asset(kind).footprint_radius_m


def _pick(rng: np.random.Generator, options: Sequence[Any]) -> Any:
    return options[int(rng.integers(len(options)))]


def _color(rng: np.random.Generator, kind: str, exclude: Sequence[str] = ()) -> str | None:
    spec = asset(kind)
    options = [c for c in spec.colors if c not in exclude]
    return _pick(rng, options) if options else spec.default_color


def _range(params: Mapping[str, Any], key: str, default: Sequence[float]) -> tuple[float, float]:
    low, high = params.get(key, default)
    if low > high:
        raise ScenarioError(f"layout parameter {key}: low {low} > high {high}")
    return float(low), float(high)


def _count(params: Mapping[str, Any], key: str, default: Sequence[int], rng: np.random.Generator) -> int:
    low, high = params.get(key, default)
    return int(rng.integers(int(low), int(high) + 1))


def _toy_pair(
    rng: np.random.Generator,
    sampler: _Sampler,
    params: Mapping[str, Any],
    placements: list[Placement],
    *,
    x: float,
    y: float,
) -> tuple[str, str]:
    """Two toys side by side (along y) centred on (x, y), facing the static camera."""
    kinds = params.get("toy_kinds", ["teddy"])
    names = []
    for k, side in enumerate((-1.0, 1.0)):
        kind = _pick(rng, kinds)
        radius = _radius(kind)
        gap = float(params.get("toy_gap_m", 0.0))
        # Toys stand shoulder to shoulder (their discs may touch): they are the landmark pair.
        half_width = 0.75 * radius if kind == "teddy" else radius
        spot = sampler.take(x + rng.uniform(-0.005, 0.005), y + side * (half_width + gap / 2), radius * 0.85)
        # The teddy mesh faces +y at yaw 0; turn it to face the static camera (+x) with a small wobble.
        yaw = (-math.pi / 2 if kind == "teddy" else 0.0) + rng.uniform(-0.2, 0.2)
        name = f"toy_{k}"
        placements.append(Placement(name, kind, spot, yaw, _color(rng, kind)))
        names.append(name)
    return names[0], names[1]


def _distractors(
    rng: np.random.Generator,
    sampler: _Sampler,
    params: Mapping[str, Any],
    placements: list[Placement],
    exclude_colors: Sequence[str] = (),
) -> None:
    kinds = params.get("distractor_kinds", ["cube", "mug", "lego", "ball"])
    for k in range(_count(params, "distractors", (1, 2), rng)):
        kind = _pick(rng, kinds)
        color = _color(rng, kind, exclude_colors)
        try:
            spot = sampler.place(_radius(kind))
        except LayoutError:
            continue  # a crowded table simply gets fewer distractors
        placements.append(Placement(f"{kind}_{k}", kind, spot, rng.uniform(-math.pi, math.pi), color))


def layout_spatial(
    rng: np.random.Generator, params: Mapping[str, Any], reach_m: float = WORKSPACE_MAX_RADIUS_M
) -> Layout:
    """Duck in front of two toys; a second duck elsewhere; three plates in a row, target = middle."""
    sampler = _Sampler(rng, reach_m)
    placements: list[Placement] = []
    side = 1.0 if rng.random() < 0.5 else -1.0
    toy_x = rng.uniform(*_range(params, "toy_x", (0.44, 0.50)))
    toy_y = side * rng.uniform(0.09, 0.14)
    toy_a, toy_b = _toy_pair(rng, sampler, params, placements, x=toy_x, y=toy_y)
    duck_r = _radius("duck")
    target = sampler.jitter(toy_x + 0.16, toy_y, duck_r, 0.015)
    placements.append(Placement("duck_0", "duck", target, rng.uniform(-math.pi, math.pi)))
    # The other duck is beside or behind the toys, never in front of them.
    # (Not straight behind them: there the static camera could not see it at all.)
    other_spots = [(toy_x + 0.02, toy_y + side * 0.2), (toy_x - 0.12, toy_y + side * 0.16)]
    order = rng.permutation(len(other_spots))
    for index in order:
        try:
            other = sampler.jitter(*other_spots[index], duck_r, 0.02)
            break
        except LayoutError:
            continue
    else:
        other = sampler.place(duck_r)
    placements.append(Placement("duck_1", "duck", other, rng.uniform(-math.pi, math.pi)))
    # Plates in a row along x on the other side; the middle one is the target.
    radii = [rng.uniform(*_range(params, "plate_radius_m", (0.06, 0.07))) for _ in range(3)]
    colors = list(rng.permutation(params.get("plate_colors", ["white", "red", "green", "blue", "pink"]))[:3])
    plate_y = -side * rng.uniform(0.16, 0.22)
    xs = [0.34, 0.34 + radii[0] + radii[1] + 0.015]
    xs.append(xs[1] + radii[1] + radii[2] + 0.015)
    shift = rng.uniform(-0.02, 0.02)
    plates = []
    for k, (x, r, c) in enumerate(zip(xs, radii, colors, strict=True)):
        spot = sampler.jitter(x + shift, plate_y, r, 0.008)
        placements.append(Placement(f"plate_{k}", "plate", spot, 0.0, str(c), r))
        plates.append(f"plate_{k}")
    _distractors(rng, sampler, params, placements)
    return _duck_layout(placements, plates[1], toy_a, toy_b, plate_first=plates[0], plate_last=plates[2])


def layout_multi_view(
    rng: np.random.Generator, params: Mapping[str, Any], reach_m: float = WORKSPACE_MAX_RADIUS_M
) -> Layout:
    """Duck hidden behind two toys (static view), another duck in plain view, plate in front of the toys."""
    sampler = _Sampler(rng, reach_m)
    placements: list[Placement] = []
    behind_m = float(params.get("duck_behind_m", 0.12))  # duck centre behind the toys' centre
    front_m = float(params.get("plate_front_m", 0.16))  # plate centre in front of it
    toy_low, toy_high = _range(params, "toy_x", (0.54, 0.58))
    toy_y_max = 0.08
    # The plate in front of the toys is the farthest thing the arm must reach: for a shorter arm the
    # whole group (duck, toys, plate) moves nearer the base, so the relations the task names hold.
    farthest_toy_x = math.sqrt(max(reach_m**2 - toy_y_max**2, 0.0)) - front_m - 0.01
    toy_x = rng.uniform(min(toy_low, farthest_toy_x), min(toy_high, farthest_toy_x))
    toy_y = rng.uniform(-toy_y_max, toy_y_max)
    toy_a, toy_b = _toy_pair(rng, sampler, params, placements, x=toy_x, y=toy_y)
    duck_r = _radius("duck")
    hidden = sampler.jitter(toy_x - behind_m, toy_y, duck_r, 0.01)
    placements.append(Placement("duck_0", "duck", hidden, rng.uniform(-math.pi, math.pi)))
    plate_r = rng.uniform(*_range(params, "plate_radius_m", (0.065, 0.075)))
    colors = list(rng.permutation(params.get("plate_colors", ["white", "red", "green", "blue", "pink"]))[:2])
    front = sampler.jitter(toy_x + front_m, toy_y, plate_r, 0.01)
    placements.append(Placement("plate_0", "plate", front, 0.0, str(colors[0]), plate_r))
    side = 1.0 if rng.random() < 0.5 else -1.0
    # The visible duck sits beside the toys, where a single-view reader would take it.
    visible = sampler.jitter(toy_x + 0.03, toy_y + side * 0.24, duck_r, 0.02)
    placements.append(Placement("duck_1", "duck", visible, rng.uniform(-math.pi, math.pi)))
    other_plate = sampler.jitter(toy_x - 0.12, toy_y - side * 0.24, plate_r, 0.03)
    placements.append(Placement("plate_1", "plate", other_plate, 0.0, str(colors[1]), plate_r))
    _distractors(rng, sampler, params, placements)
    return _duck_layout(placements, "plate_0", toy_a, toy_b, other_plate="plate_1")


def _duck_layout(placements: list[Placement], place: str, toy_a: str, toy_b: str, **roles: str) -> Layout:
    """A duck task's layout: ``duck_0`` goes onto ``place``; ``duck_1``, its look-alike, stays where it is."""
    roles = {"target": "duck_0", "other_duck": "duck_1", "toy_a": toy_a, "toy_b": toy_b, "place": place, **roles}
    return Layout(tuple(placements), (PlaceGoal("duck_0", place),), ("duck_1",), roles)


def layout_long_horizon(
    rng: np.random.Generator, params: Mapping[str, Any], reach_m: float = WORKSPACE_MAX_RADIUS_M
) -> Layout:
    """Yellow objects outside plates go into the yellow plate; a yellow one already on another plate stays."""
    sampler = _Sampler(rng, reach_m)
    placements: list[Placement] = []
    yellow_r = rng.uniform(*_range(params, "yellow_plate_radius_m", (0.095, 0.105)))
    yellow_plate = sampler.place(yellow_r, ((0.45, 0.62), (-0.2, 0.2)))
    placements.append(Placement("plate_yellow", "plate", yellow_plate, 0.0, "yellow", yellow_r))
    other_colors = [c for c in params.get("plate_colors", ["white", "red", "green", "blue", "pink"]) if c != "yellow"]
    plates = []
    for k in range(_count(params, "other_plates", (1, 2), rng)):
        r = rng.uniform(0.07, 0.085)
        plates.append((f"plate_{k}", sampler.place(r), r))
        placements.append(
            Placement(plates[-1][0], "plate", plates[-1][1], 0.0, str(other_colors[k % len(other_colors)]), r)
        )
    yellow_kinds = params.get("yellow_kinds", ["duck", "cube", "lego", "ball"])
    count = _count(params, "yellow_outside", (2, 3), rng)
    goals, names = [], []
    kinds = [_pick(rng, yellow_kinds) for _ in range(count)]
    if kinds.count("duck") > 1:  # two ducks do not fit on one plate beside a third object
        kinds = [kinds[0]] + [k if k != "duck" else "cube" for k in kinds[1:]]
    for k, kind in enumerate(kinds):
        name = f"yellow_{kind}_{k}"
        spot = sampler.place(_radius(kind))
        placements.append(
            Placement(name, kind, spot, rng.uniform(-math.pi, math.pi), "yellow" if kind != "duck" else None)
        )
        goals.append(PlaceGoal(name, "plate_yellow"))
        names.append(name)
    must_stay = []
    if plates and rng.random() < float(params.get("yellow_on_plate_probability", 0.6)):
        plate_name, (px, py), _ = plates[0]
        kind = _pick(rng, [k for k in yellow_kinds if k != "duck"])
        name = f"yellow_{kind}_on_{plate_name}"
        placements.append(Placement(name, kind, (px, py), rng.uniform(-math.pi, math.pi), "yellow"))
        must_stay.append(name)
    _distractors(
        rng,
        sampler,
        {**params, "distractor_kinds": params.get("distractor_kinds", ["cube", "lego", "ball"])},
        placements,
        exclude_colors=("yellow", "orange"),
    )
    roles = {"place": "plate_yellow", **{f"item_{k}": n for k, n in enumerate(names)}}
    return Layout(tuple(placements), tuple(goals), tuple(must_stay), roles)


def layout_pick_place(
    rng: np.random.Generator, params: Mapping[str, Any], reach_m: float = WORKSPACE_MAX_RADIUS_M
) -> Layout:
    """Sanity layout: one named object (kind/colour from params) onto one plate (or tray), few distractors."""
    sampler = _Sampler(rng, reach_m)
    placements: list[Placement] = []
    kind = str(params.get("object_kind", "cube"))
    color = params.get("object_color")
    target_kind = str(params.get("target_kind", "plate"))
    if target_kind not in ("plate", "tray"):
        raise ScenarioError(f"layout pick_place: target_kind must be 'plate' or 'tray', got {target_kind!r}")
    radius = float(params.get("plate_radius_m", 0.08)) if target_kind == "plate" else None
    target_spot = sampler.place(_radius(target_kind, radius), ((0.42, 0.62), (-0.25, 0.25)))
    placements.append(Placement("target_0", target_kind, target_spot, 0.0, params.get("target_color"), radius))
    spot = sampler.place(_radius(kind))
    placements.append(Placement("object_0", kind, spot, rng.uniform(-math.pi, math.pi), color))
    _distractors(rng, sampler, params, placements, exclude_colors=(color,) if color else ())
    roles = {"target": "object_0", "place": "target_0"}
    return Layout(tuple(placements), (PlaceGoal("object_0", "target_0"),), (), roles)


LAYOUTS: dict[str, Callable[[np.random.Generator, Mapping[str, Any], float], Layout]] = {
    "spatial": layout_spatial,
    "multi_view": layout_multi_view,
    "long_horizon": layout_long_horizon,
    "pick_place": layout_pick_place,
}
