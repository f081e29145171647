"""Task scenarios for the simulated workcell: YAML specs, seeded layouts, and success checks.

A scenario file (``scenarios/*.yaml`` next to this module) names an instruction, a layout
generator and its parameters, the robot and the cameras. :func:`build_scene` turns it plus a seed
into a populated :class:`~robopin.sim.world.SimWorld` and a machine-checkable :class:`TaskSpec`
(which object goes onto which plate, what must stay put). :func:`check_success` judges the final
world state against that spec. The three RoboPIN real-robot tasks (seed 000 §4.3) are layouts
``spatial``, ``multi_view`` and ``long_horizon``; ``pick_place`` serves simple sanity scenarios.

Directions follow the static camera, which faces the robot from +x: "in front of" means nearer
the camera (larger x), "behind" means nearer the robot.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from numpy.typing import NDArray

from robopin.sim.assets import CATALOG, asset
from robopin.sim.render import DepthNoiseConfig, SimCameraSpec
from robopin.sim.robot_models import robot_model
from robopin.sim.world import TABLE_TOP_Z, SimWorld, look_at

SCENARIO_DIR = Path(__file__).with_name("scenarios")
"""Where the packaged scenario YAML files live."""

TASK_TYPES = ("spatial", "multi_view", "long_horizon", "pick_place")

WORKSPACE_X = (0.32, 0.76)
WORKSPACE_Y = (-0.34, 0.34)
WORKSPACE_MAX_RADIUS_M = 0.72
"""Farthest object centre from the robot base for any robot (the camera views are framed for it);
a robot with a shorter top-down reach lowers it (see :func:`layout_reach_m`)."""
_CLEARANCE_M = 0.015


class ScenarioError(ValueError):
    """A scenario file or request that is invalid (missing key, bad value, unknown layout)."""


class LayoutError(RuntimeError):
    """A layout generator could not place everything without overlaps for this seed."""


# ---------------------------------------------------------------------------- specs
@dataclass(frozen=True)
class StaticCameraConfig:
    """Static camera: optical centre ``eye`` looking at ``target`` (base frame, m)."""

    eye: tuple[float, float, float] = (1.25, 0.0, 0.40)
    target: tuple[float, float, float] = (0.50, 0.0, 0.0)
    vertical_fov_deg: float = 43.0
    """L515 color stream at 640x480 is about 70°x43°."""


@dataclass(frozen=True)
class WristCameraConfig:
    """Wrist camera and the observation pose the arm takes so it sees the workspace."""

    observe_eye: tuple[float, float, float] = (0.28, 0.0, 0.55)
    observe_target: tuple[float, float, float] = (0.58, 0.0, 0.0)
    vertical_fov_deg: float = 42.0
    """D435 color stream is about 69°x42°."""


@dataclass(frozen=True)
class ScenarioSpec:
    """One scenario file, validated."""

    name: str
    task_type: str
    instruction: str
    layout: str
    layout_params: Mapping[str, Any] = field(default_factory=dict)
    robot: str = "panda"
    max_steps: int = 1
    static_camera: StaticCameraConfig = field(default_factory=StaticCameraConfig)
    wrist_camera: WristCameraConfig = field(default_factory=WristCameraConfig)
    depth_noise: bool = False
    description: str = ""

    def __post_init__(self) -> None:
        if self.task_type not in TASK_TYPES:
            raise ScenarioError(
                f"scenario {self.name!r}: task_type must be one of {TASK_TYPES}, got {self.task_type!r}"
            )
        if self.layout not in LAYOUTS:
            raise ScenarioError(
                f"scenario {self.name!r}: unknown layout {self.layout!r}; expected one of {sorted(LAYOUTS)}"
            )
        if not self.instruction.strip():
            raise ScenarioError(f"scenario {self.name!r}: instruction is empty")
        if self.max_steps < 1:
            raise ScenarioError(f"scenario {self.name!r}: max_steps must be >= 1, got {self.max_steps}")


def _triple(value: Any, label: str) -> tuple[float, float, float]:
    try:
        x, y, z = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ScenarioError(f"{label} must be three numbers, got {value!r}") from None
    return (x, y, z)


def scenario_from_dict(data: Mapping[str, Any], *, source: str = "<dict>") -> ScenarioSpec:
    """Build a :class:`ScenarioSpec` from parsed YAML, naming ``source`` in errors."""
    if not isinstance(data, Mapping):
        raise ScenarioError(f"{source}: a scenario must be a mapping, got {type(data).__name__}")
    known = {
        "name",
        "task_type",
        "instruction",
        "layout",
        "layout_params",
        "robot",
        "max_steps",
        "cameras",
        "depth_noise",
        "description",
    }
    unknown = set(data) - known
    if unknown:
        raise ScenarioError(f"{source}: unknown keys {sorted(unknown)}; expected some of {sorted(known)}")
    for key in ("name", "task_type", "instruction", "layout"):
        if key not in data:
            raise ScenarioError(f"{source}: missing required key {key!r}")
    cameras = data.get("cameras") or {}
    static = cameras.get("static") or {}
    wrist = cameras.get("wrist") or {}
    static_cfg = StaticCameraConfig(
        eye=_triple(static.get("eye", StaticCameraConfig.eye), f"{source}: cameras.static.eye"),
        target=_triple(static.get("target", StaticCameraConfig.target), f"{source}: cameras.static.target"),
        vertical_fov_deg=float(static.get("vertical_fov_deg", StaticCameraConfig.vertical_fov_deg)),
    )
    wrist_cfg = WristCameraConfig(
        observe_eye=_triple(wrist.get("observe_eye", WristCameraConfig.observe_eye), f"{source}: observe_eye"),
        observe_target=_triple(
            wrist.get("observe_target", WristCameraConfig.observe_target), f"{source}: observe_target"
        ),
        vertical_fov_deg=float(wrist.get("vertical_fov_deg", WristCameraConfig.vertical_fov_deg)),
    )
    return ScenarioSpec(
        name=str(data["name"]),
        task_type=str(data["task_type"]),
        instruction=" ".join(str(data["instruction"]).split()),
        layout=str(data["layout"]),
        layout_params=dict(data.get("layout_params") or {}),
        robot=str(data.get("robot", "panda")),
        max_steps=int(data.get("max_steps", 1)),
        static_camera=static_cfg,
        wrist_camera=wrist_cfg,
        depth_noise=bool(data.get("depth_noise", False)),
        description=str(data.get("description", "")),
    )


def list_scenarios(directory: Path = SCENARIO_DIR) -> list[str]:
    """Names of the scenario files in ``directory`` (without ``.yaml``)."""
    return sorted(path.stem for path in directory.glob("*.yaml"))


def load_scenario(name_or_path: str | Path) -> ScenarioSpec:
    """Load a packaged scenario by name (``spatial``) or any scenario YAML by path."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = SCENARIO_DIR / f"{name_or_path}.yaml"
        if not path.is_file():
            raise ScenarioError(f"no scenario named {str(name_or_path)!r}; available: {list_scenarios()}")
    if not path.is_file():
        raise ScenarioError(f"scenario file {path} does not exist")
    with path.open(encoding="utf-8") as stream:
        data = yaml.safe_load(stream)
    return scenario_from_dict(data, source=str(path.name))


# ---------------------------------------------------------------------------- task
@dataclass(frozen=True)
class PlaceGoal:
    """``object`` must end resting on plate ``target``."""

    object: str
    target: str


@dataclass(frozen=True)
class TaskSpec:
    """The machine-checkable task of one scene.

    ``goals`` must all hold at the end (any order unless ``ordered``); ``must_stay`` objects may
    move at most ``stay_tolerance_m`` (the wrong duck, a yellow object already on a plate);
    ``roles`` names the entities the instruction talks about (``target``, ``toy_a``, ``place``…),
    which the oracle pins.
    """

    instruction: str
    task_type: str
    goals: tuple[PlaceGoal, ...]
    must_stay: tuple[str, ...] = ()
    roles: Mapping[str, str] = field(default_factory=dict)
    ordered: bool = False
    stay_tolerance_m: float = 0.05


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
    roles = {
        "target": "duck_0",
        "other_duck": "duck_1",
        "toy_a": toy_a,
        "toy_b": toy_b,
        "place": plates[1],
        "plate_first": plates[0],
        "plate_last": plates[2],
    }
    return Layout(tuple(placements), (PlaceGoal("duck_0", plates[1]),), ("duck_1",), roles)


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
    roles = {
        "target": "duck_0",
        "other_duck": "duck_1",
        "toy_a": toy_a,
        "toy_b": toy_b,
        "place": "plate_0",
        "other_plate": "plate_1",
    }
    return Layout(tuple(placements), (PlaceGoal("duck_0", "plate_0"),), ("duck_1",), roles)


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


# ---------------------------------------------------------------------------- scenes
@dataclass
class Scene:
    """A built scenario: the world, its task, and where everything started."""

    spec: ScenarioSpec
    seed: int
    world: SimWorld
    task: TaskSpec
    layout: Layout
    initial_positions: dict[str, NDArray[np.float64]]
    observe_q: NDArray[np.float64]
    camera_names: tuple[str, ...] = ("static", "wrist")

    def close(self) -> None:
        with _SCENES_LOCK:
            if _SCENES.get(self.world.name) is self:
                del _SCENES[self.world.name]
        self.world.close()

    def __enter__(self) -> Scene:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_SCENES: dict[str, Scene] = {}
_SCENES_LOCK = threading.Lock()


def get_scene(world_name: str) -> Scene:
    """The scene built (registered) on the world called ``world_name``: how the oracle backend finds its task."""
    with _SCENES_LOCK:
        try:
            return _SCENES[world_name]
        except KeyError:
            raise ScenarioError(f"no scene registered on world {world_name!r}; registered: {sorted(_SCENES)}") from None


def build_scene(
    spec: ScenarioSpec | str,
    seed: int,
    *,
    world_name: str | None = None,
    robot: str | None = None,
    register: bool = True,
    max_layout_attempts: int = 20,
) -> Scene:
    """Build ``spec`` with ``seed``: same (spec, seed) always gives the same scene.

    The arm starts at the wrist camera's observation pose. A layout that runs out of room, or
    whose goal already holds once objects settle, is redrawn with a seed derived from the first,
    deterministically.
    """
    if isinstance(spec, str):
        spec = load_scenario(spec)
    reach_m = layout_reach_m(robot or spec.robot)
    for attempt in range(max_layout_attempts):
        rng = np.random.default_rng([int(seed), attempt])
        try:
            layout = LAYOUTS[spec.layout](rng, spec.layout_params, reach_m)
        except LayoutError:
            continue
        scene = _populate(spec, int(seed), layout, world_name=world_name, robot=robot, register=register)
        if not any(on_plate(scene.world, g.object, g.target)[0] for g in scene.task.goals):
            if register:
                with _SCENES_LOCK:
                    _SCENES[scene.world.name] = scene
            return scene
        scene.close()
    raise LayoutError(f"scenario {spec.name!r} seed {seed}: no layout fits after {max_layout_attempts} attempts")


def _populate(
    spec: ScenarioSpec, seed: int, layout: Layout, *, world_name: str | None, robot: str | None, register: bool
) -> Scene:
    world = SimWorld(world_name or f"{spec.name}-{seed}", robot or spec.robot, seed=seed, register=register)
    try:
        for placement in layout.placements:
            if placement.kind not in CATALOG:
                raise ScenarioError(f"layout {spec.layout!r} placed unknown kind {placement.kind!r}")
            # Objects resting on a plate start just above its top surface.
            z = None
            for other in layout.placements:
                if (
                    other.kind == "plate"
                    and other is not placement
                    and placement.kind != "plate"
                    and (
                        math.hypot(placement.xy[0] - other.xy[0], placement.xy[1] - other.xy[1]) < (other.radius_m or 0)
                    )
                ):
                    z = TABLE_TOP_Z + asset("plate").size_m[2] + 0.002
            world.add_object(
                placement.kind,
                placement.name,
                placement.xy,
                placement.yaw_rad,
                color=placement.color,
                radius_m=placement.radius_m,
                z_m=z,
            )
        noise = DepthNoiseConfig.realsense() if spec.depth_noise else DepthNoiseConfig()
        static = spec.static_camera
        world.add_camera(
            SimCameraSpec(
                "static",
                look_at(static.eye, static.target),
                vertical_fov_deg=static.vertical_fov_deg,
                depth_noise=noise,
            )
        )
        world.add_camera(
            SimCameraSpec(
                "wrist",
                world.model.T_ee_wrist_camera,
                mount="ee",
                vertical_fov_deg=spec.wrist_camera.vertical_fov_deg,
                depth_noise=noise,
            )
        )
        observe_q = observation_configuration(world, spec.wrist_camera)
        world.reset_arm(observe_q)
        world.settle(2.0)
        initial = {name: world.object_center(name) for name in world.objects}
    except Exception:
        world.close()
        raise
    task = TaskSpec(spec.instruction, spec.task_type, layout.goals, layout.must_stay, dict(layout.roles))
    return Scene(spec, seed, world, task, layout, initial, observe_q)


def observation_configuration(world: SimWorld, wrist: WristCameraConfig) -> NDArray[np.float64]:
    """Joint positions that put the wrist camera at ``observe_eye`` looking at ``observe_target``.

    Image 'up' points away from the robot, so the hand keeps its usual yaw (ee x forward).
    """
    T_base_cam = look_at(wrist.observe_eye, wrist.observe_target, up=(1.0, 0.0, 0.0))
    T_base_ee = T_base_cam @ np.linalg.inv(world.model.T_ee_wrist_camera)
    q = world.inverse_kinematics(T_base_ee, q_seed=world.model.home_q, iterations=500)
    reached = world.forward_kinematics(q)
    if np.linalg.norm(reached[:3, 3] - T_base_ee[:3, 3]) > 0.02:
        raise ScenarioError(f"{world.model.name} cannot reach the wrist observation pose at {wrist.observe_eye}")
    return q


# ---------------------------------------------------------------------------- success
@dataclass(frozen=True)
class GoalResult:
    """One goal judged: ``ok`` and why not."""

    goal: PlaceGoal
    ok: bool
    reason: str = ""


@dataclass(frozen=True)
class SuccessReport:
    """The verdict on a final world state."""

    success: bool
    goals: tuple[GoalResult, ...]
    violations: tuple[str, ...]

    def __str__(self) -> str:
        if self.success:
            return "success"
        problems = [f"{g.goal.object}->{g.goal.target}: {g.reason}" for g in self.goals if not g.ok]
        return "failure: " + "; ".join(problems + list(self.violations))


def on_plate(world: SimWorld, object_name: str, plate_name: str) -> tuple[bool, str]:
    """Whether ``object_name`` rests on ``plate_name``: centre over the plate, bottom at its top, not held."""
    plate = world.object(plate_name)
    low, high = world.object_aabb(object_name)
    center = (low + high) / 2
    plate_center = world.object_center(plate_name)
    distance = math.hypot(center[0] - plate_center[0], center[1] - plate_center[1])
    plate_top = plate_center[2] + plate.height_m / 2
    if plate.kind == "tray":
        plate_top = TABLE_TOP_Z
    if distance > plate.radius_m:
        return False, f"centre {distance:.3f} m from the {plate_name} centre (radius {plate.radius_m:.3f} m)"
    if low[2] > plate_top + 0.03:
        return False, f"bottom {low[2]:.3f} m is above the {plate_name} top {plate_top:.3f} m (not resting on it)"
    if world.grasped_object() == object_name:
        return False, "still held by the gripper"
    return True, ""


def check_success(scene: Scene) -> SuccessReport:
    """Judge the scene's current state against its task."""
    world, task = scene.world, scene.task
    results = []
    for goal in task.goals:
        ok, reason = on_plate(world, goal.object, goal.target)
        results.append(GoalResult(goal, ok, reason))
    violations = []
    for name in task.must_stay:
        moved = float(np.linalg.norm(world.object_center(name)[:2] - scene.initial_positions[name][:2]))
        if moved > task.stay_tolerance_m:
            violations.append(f"{name} moved {moved:.3f} m (must stay within {task.stay_tolerance_m} m)")
    goal_objects = {g.object for g in task.goals}
    for goal in task.goals:
        for obj in world.objects.values():
            if obj.graspable and obj.name not in goal_objects and obj.name not in task.must_stay:
                ok, _ = on_plate(world, obj.name, goal.target)
                was = scene.initial_positions[obj.name]
                if ok and np.linalg.norm(world.object_center(obj.name)[:2] - was[:2]) > task.stay_tolerance_m:
                    violations.append(f"{obj.name} was put on {goal.target} but is not part of the task")
    success = all(r.ok for r in results) and not violations
    return SuccessReport(success, tuple(results), tuple(dict.fromkeys(violations)))
