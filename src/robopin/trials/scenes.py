"""What the operator sets up before a trial: the scenario's objects and their places in words, and a picture.

Two kinds of scenario feed a trial. A simulator scenario (``spatial``, a YAML with a ``layout``) is laid
out per seed; its placements are written out in words and its static view rendered as the reference
picture (on a sim system the simulated camera's own first frame). A real-cell scenario file names
the objects and places in words itself (``setup``), optionally a ``reference_image``; without one the
first trial's static photo becomes the reference for the rest of the batch::

    name: spatial                     # what the reports call the task
    task_type: spatial
    instruction: "Pick up the duck in front of two toys and place it to the middle plate among plates."
    description: randomise the toys, the plates' colours and every position between trials
    subgoals: 1                       # long-horizon: how many pick-and-place goals the task has
    reference_image: spatial.png      # optional, relative to this file
    setup:
      - {object: "yellow rubber duck", place: "10 cm in front of the two toys (toward the static camera)"}
      - {object: "three plates", place: "in a row on the far side of the table"}
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

__all__ = ["SceneError", "TrialScenario", "describe_sim_scene", "load_trial_scenario"]

_KEYS = {"name", "task_type", "instruction", "description", "setup", "reference_image", "subgoals"}


class SceneError(ValueError):
    """A real-cell scenario file that cannot be used (the message names the file and the key)."""


@dataclasses.dataclass(frozen=True)
class TrialScenario:
    """A task as the operator sets it up; ``sim`` is the simulator scenario it comes from, if any."""

    name: str
    instruction: str
    task_type: str = ""
    description: str = ""
    setup: tuple[tuple[str, str], ...] = ()
    reference_image: Path | None = None
    subgoals: int | None = None
    sim: Any = None  # robopin.sim.tasks.ScenarioSpec


def load_trial_scenario(name_or_path: str) -> TrialScenario:
    """A real-cell scenario file (it has ``setup``) or a simulator scenario by name or path."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and "setup" in data:
            return _real_cell(data, path)
    from robopin.sim.tasks import load_scenario

    spec = load_scenario(name_or_path)
    return TrialScenario(spec.name, spec.instruction, spec.task_type, " ".join(spec.description.split()), sim=spec)


def _real_cell(data: dict[str, Any], path: Path) -> TrialScenario:
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise SceneError(f"{path}: unknown key(s) {unknown}; a real-cell scenario has some of {sorted(_KEYS)}")
    for key in ("name", "instruction"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise SceneError(f"{path}: {key!r} must be a non-empty string")
    setup = []
    for index, item in enumerate(data.get("setup") or []):
        if not (isinstance(item, dict) and isinstance(item.get("object"), str) and isinstance(item.get("place"), str)):
            raise SceneError(f"{path}: setup entry {index + 1} must be {{object: <words>, place: <words>}}, "
                             f"got {item!r}")
        setup.append((item["object"].strip(), item["place"].strip()))
    if not setup:
        raise SceneError(f"{path}: setup must list the objects and their places")
    subgoals = data.get("subgoals", 1)
    if isinstance(subgoals, bool) or not isinstance(subgoals, int) or subgoals < 1:
        raise SceneError(f"{path}: subgoals must be a whole number >= 1, got {subgoals!r}")
    reference = None
    if data.get("reference_image"):
        reference = (path.parent / str(data["reference_image"])).resolve()
        if not reference.is_file():
            raise SceneError(f"{path}: reference_image {str(reference)!r} does not exist")
        if reference.read_bytes()[:8] != b"\x89PNG\r\n\x1a\n":
            raise SceneError(f"{path}: reference_image {str(reference)!r} is not a PNG file")
    return TrialScenario(str(data["name"]).strip(), " ".join(str(data["instruction"]).split()),
                         str(data.get("task_type", "")), " ".join(str(data.get("description", "")).split()),
                         tuple(setup), reference, subgoals)


def describe_sim_scene(scene: Any) -> tuple[tuple[str, str], ...]:
    """A simulated scene's placements as (object, place) in words, the task's roles named."""
    roles: dict[str, list[str]] = {}
    for role, name in scene.task.roles.items():
        roles.setdefault(name, []).append(role)
    items = []
    for placement in scene.layout.placements:
        thing = " ".join(part for part in (placement.color, placement.kind.replace("_", " ")) if part)
        label = f"{thing} ({placement.name}" + (f"; {', '.join(roles[placement.name])}" if placement.name in roles
                                                else "") + ")"
        x, y = placement.xy
        side = "left" if y > 0 else "right"
        items.append((label, f"{x:.2f} m out from the robot base toward the static camera, "
                             f"{abs(y):.2f} m to the robot's {side}"))
    return tuple(items)
