"""Scenario files (``robopin/sim/scenarios/*.yaml``): instruction, layout, robot and cameras, validated."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from robopin.sim.tasks.errors import ScenarioError
from robopin.sim.tasks.layouts import LAYOUTS

SCENARIO_DIR = Path(__file__).parent.parent / "scenarios"
"""Where the packaged scenario YAML files live."""

TASK_TYPES = ("spatial", "multi_view", "long_horizon", "pick_place")


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
