"""The parameters each robopin_ros executable declares, and the refusal of a system file that names any other.

A ROS 2 node silently ignores a parameter it does not declare, so a misspelled key in a system file
(``workspcae:``) used to be dropped and the node ran on its default. :data:`NODE_PARAMETERS` lists, per
executable, the top-level parameter names its node declares (``tests/ros/test_node_parameter_table.py``
starts every node of both simulated systems and compares this table with the live nodes' parameters);
:data:`NESTED_SETTINGS` the ones declared as nested settings (``robopin_ros.parameters.declare_nested``),
whose keys are checked against the config dataclass that reads them (a backend's, through its registry).

:func:`check_parameter_names` refuses a system before any node starts, one line per bad key with the node,
the key, its line in the file and the nearest valid name. No rclpy here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from robopin.errors import nearest_name
from robopin.system.nested import NESTED_PARAMETERS
from robopin.system.node_settings import NODE_SETTINGS, node_settings, settings_parameters
from robopin.system.schema import NodeSpec, SystemFile, SystemFileError

__all__ = ["NESTED_SETTINGS", "NODE_PARAMETERS", "ROS_OWN_PARAMETERS", "VIEW_TOPIC_PREFIX", "ParameterProblem",
           "UnknownParameterError", "check_parameter_names", "nested_config", "parameter_problems"]

class _ParameterTable(Mapping[str, frozenset[str]]):
    """Executable -> its parameter names, read from the fields of its settings dataclasses (:data:`NODE_SETTINGS`),
    imported on first use (the motion configs are not needed to load a system file)."""

    def __getitem__(self, executable: str) -> frozenset[str]:
        if executable not in NODE_SETTINGS:
            raise KeyError(executable)
        return frozenset().union(*(settings_parameters(c) for c in node_settings(executable)))

    def __iter__(self) -> Iterator[str]:
        return iter(NODE_SETTINGS)

    def __len__(self) -> int:
        return len(NODE_SETTINGS)


NODE_PARAMETERS: Mapping[str, frozenset[str]] = _ParameterTable()
"""Executable -> the top-level parameters its node declares (a nested setting by its own name, ``vlm``), besides
rclpy's own (:data:`ROS_OWN_PARAMETERS`) and the ``cameras.<view>.<key>`` topic settings of its views."""

NESTED_SETTINGS: dict[str, tuple[str, ...]] = {executable: NESTED_PARAMETERS.get(executable, ())
                                              for executable in NODE_PARAMETERS}
# task_node's ground_truth is declared nested too, though a system file hands it as one YAML string.
NESTED_SETTINGS["task_node"] += ("ground_truth",)
"""Executable -> every setting its node declares with ``declare_nested`` (dotted ``name.key`` parameters);
:data:`robopin.system.nested.NESTED_PARAMETERS` names those a system file hands in the dotted form."""

VIEW_TOPIC_PREFIX = "cameras"
"""``cameras.<view>.<key>``: each view's topics, declared per view by the nodes that use camera topics."""

ROS_OWN_PARAMETERS = frozenset({"use_sim_time", "start_type_description_service"})
"""Parameters rclpy's Node declares itself."""


class UnknownParameterError(SystemFileError):
    """A system file names a parameter or setting key that its node does not declare (``problems``: one per key)."""

    def __init__(self, message: str, problems: Sequence[ParameterProblem] = ()) -> None:
        super().__init__(message)
        self.problems = tuple(problems)


@dataclasses.dataclass(frozen=True)
class ParameterProblem:
    """One key a node would ignore (or refuse at start): where it is and what was meant."""

    node: str
    executable: str
    path: tuple[str, ...]  # parameter name, then the keys below it (options, safety, state_max_age)
    owner: str  # what the key was looked up in: "motion_planner_node", "SafetyConfig (options.safety)"
    known: frozenset[str]
    line: int | None = None  # 1-based line in the system file, when known
    argument: str = ""  # the launch argument whose 'sets' target names the key
    parameters: frozenset[str] = frozenset()  # the node's parameters, suggested when no key of owner is close

    @property
    def key(self) -> str:
        return self.path[-1]

    @property
    def suggestion(self) -> str | None:
        return nearest_name(self.key, self.known)

    def message(self) -> str:
        where = f"line {self.line}: " if self.line is not None else ""
        dotted = ".".join(self.path)
        if len(self.path) == 1:
            what = f"parameter {self.key!r} is not declared by {self.owner}"
        else:
            what = f"key {self.key!r} of {'.'.join(self.path[:-1])} is not a field of {self.owner}"
        if self.argument:
            what += f" (set by argument {self.argument!r}: {self.node}.{dotted})"
        best = self.suggestion
        parameter = nearest_name(self.key, self.parameters) if best is None else None
        if best is not None:
            hint = f"; did you mean {best!r}?"
        elif parameter is not None:
            hint = f"; did you mean the node parameter {parameter!r} (beside {self.path[0]}, not in it)?"
        elif len(self.known) <= 16:
            hint = f"; expected one of {sorted(self.known)}"
        else:
            hint = f"; none of its {len(self.known)} names is close (robopin.system.node_parameters lists them)"
        return f"{where}node {self.node!r} ({self.executable}): {what}{hint}"


# ------------------------------------------------------------------ nested settings


def _mapping(value: Any) -> Mapping[str, Any] | None:
    """A nested setting's mapping, whether written as a mapping or as YAML text (None: not a mapping)."""
    if isinstance(value, str):
        try:
            value = yaml.safe_load(value) if value.strip() else {}
        except yaml.YAMLError:
            return None  # the schema's own checks name bad YAML
    return value if isinstance(value, Mapping) else None


def _registry(family: str) -> Any:
    if family == "camera":
        from robopin.cameras.base import CAMERAS

        return CAMERAS
    if family == "arm":
        from robopin.robots.base import ARMS

        return ARMS
    if family == "planner":
        from robopin.motion.planner import PLANNERS

        return PLANNERS
    from robopin.vlm.base import VLM_BACKENDS

    return VLM_BACKENDS


def _backend_class(family: str, type_name: Any) -> type | None:
    """The config dataclass of a backend type, or None when it cannot be known here (an unknown type is
    named by the node's own refusal; a config module that cannot be imported here leaves the keys unchecked)."""
    try:
        return _registry(family).config_class(type_name)
    except Exception:
        return None


@dataclasses.dataclass(frozen=True)
class _Schema:
    """How one nested setting's keys are checked: the config class that reads it, and keys it takes besides."""

    # (setting, node parameters) -> (config class, how to name it, the names that would have chosen its type
    # when it was assumed: a key misspelling one of those is why the class may be the wrong one)
    config: Callable[[Mapping[str, Any], Mapping[str, Any]], tuple[type | None, str, frozenset[str]]]
    extra: frozenset[str] = frozenset()


def _backend(family: str, default_type: str, type_parameter: str = "") -> Callable[..., Any]:
    def config(setting: Mapping[str, Any], parameters: Mapping[str, Any]) -> tuple[type | None, str, frozenset[str]]:
        given = setting.get("type") or (parameters.get(type_parameter) if type_parameter else None)
        type_name = given or default_type
        cls = _backend_class(family, type_name)
        if cls is None:
            return None, "", frozenset()
        if given:
            return cls, f"{cls.__name__} ({family} type {type_name!r})", frozenset()
        selectors = frozenset({"type", type_parameter} - {""})
        return cls, f"{cls.__name__} ({family} type {type_name!r}, assumed: none given)", selectors
    return config


def _fixed(module: str, name: str) -> Callable[..., Any]:
    def config(setting: Mapping[str, Any], parameters: Mapping[str, Any]) -> tuple[type | None, str, frozenset[str]]:
        import importlib

        cls = getattr(importlib.import_module(module), name)
        return cls, cls.__name__, frozenset()
    return config


_WORKSPACE = _Schema(_fixed("robopin.geometry.workspace", "WorkspaceBox"))
_SCHEMAS: dict[tuple[str, str], _Schema] = {
    ("task_node", "vlm"): _Schema(_backend("VLM backend", "openai"), frozenset({"type"})),
    ("task_node", "reasoning"): _Schema(_fixed("robopin.reasoning.config", "ReasoningConfig")),
    ("task_node", "workspace"): _WORKSPACE,
    ("motion_planner_node", "workspace"): _WORKSPACE,
    ("projection_node", "workspace"): _WORKSPACE,
    # The node sets planner.robot from its robot parameter; a type picks the backend (roboplan by default).
    ("motion_planner_node", "planner"): _Schema(_backend("planner", "roboplan"), frozenset({"type"})),
    # camera_node: options.<key> go over the backend's config (type: the backend parameter, or options.type).
    ("camera_node", "options"): _Schema(_backend("camera", "realsense", "backend"), frozenset({"type"})),
    # arm_driver_node: the type is the backend parameter (an options.type would be overwritten).
    ("arm_driver_node", "options"): _Schema(_backend("arm", "sim", "backend")),
    ("calibration_node", "arm"): _Schema(_backend("arm", "sim"), frozenset({"type"})),
    ("calibration_node", "planner"): _Schema(_backend("planner", "roboplan"), frozenset({"type"})),
    ("calibration_node", "board"): _Schema(_fixed("robopin.calibration.board", "BoardConfig")),
    ("calibration_node", "detection"): _Schema(_fixed("robopin.calibration.board", "DetectionConfig")),
}
"""Nested settings whose keys are checked, and the config class each is read into. The others (camera
mounts by view name, ground_truth's factory settings) are checked where the node reads them."""


def nested_config(settings: type, setting: str, value: Mapping[str, Any], parameters: Mapping[str, Any]
                  ) -> type | None:
    """The config dataclass that the nested setting ``setting`` of the node reading ``settings`` (its settings
    dataclass) is read into, given its ``value`` and the node's other ``parameters`` (a ``backend`` parameter picks
    a camera's or an arm's); None where its keys are free-form or the config cannot be known here. A node declares
    its keys with that config's descriptions and ranges (``robopin_ros.parameters.declare_nested``)."""
    path = f"{settings.__module__}:{settings.__qualname__}"
    for executable, paths in NODE_SETTINGS.items():
        schema = _SCHEMAS.get((executable, setting))
        if path in paths and schema is not None:
            return schema.config(value, parameters)[0]
    return None


def _nested_problems(node: NodeSpec, setting: str) -> list[ParameterProblem]:
    from robopin.registry import unknown_keys

    schema = _SCHEMAS.get((node.executable, setting))
    value = _mapping(node.parameters.get(setting))
    if schema is None or not value:
        return []
    cls, owner, selectors = schema.config(value, node.parameters)
    if cls is None:
        return []
    given = {k: v for k, v in value.items() if k not in schema.extra}
    problems = []
    for path, inner, known in unknown_keys(cls, given):
        top_level = inner is cls
        problems.append(ParameterProblem(
            node.name, node.executable, (setting, *path),
            owner if top_level else f"{inner.__name__} ({setting}.{'.'.join(path[:-1])})",
            frozenset(known | schema.extra) if top_level else frozenset(known),
            # A node parameter written inside the setting (camera options: {backedn: sim}) is suggested too.
            parameters=NODE_PARAMETERS.get(node.executable, frozenset()) if top_level else frozenset()))
    # The type was assumed (no backend given) and a key misspells what would have given it (options: {backedn: sim}):
    # that key is the mistake; the others were judged against a backend nobody asked for.
    chosen = [p for p in problems if len(p.path) == 2 and nearest_name(p.key, selectors) is not None]
    return chosen or problems


def parameter_problems(system: SystemFile) -> list[ParameterProblem]:
    """Every parameter and nested-setting key of ``system``'s nodes that the node would not take.

    A node with an unknown top-level parameter is not searched further: which backend its options are for
    may hinge on the misspelled one (``backedn: sim`` leaves the camera on its default, realsense).
    """
    problems: list[ParameterProblem] = []
    for node in system.nodes:
        declared = NODE_PARAMETERS.get(node.executable)
        if declared is None:
            continue
        top = [ParameterProblem(node.name, node.executable, (key,), node.executable, declared)
               for key in node.parameters if key not in declared]
        problems += top
        if not top:
            for setting in NESTED_SETTINGS.get(node.executable, ()):
                problems += _nested_problems(node, setting)
    return problems


# ------------------------------------------------------------------ the refusal


def _key_lines(path: Path) -> dict[tuple[str, ...], int]:
    """The 1-based line of every mapping key of a YAML file, by its path of keys from the top."""
    try:
        root = yaml.compose(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    except (OSError, yaml.YAMLError):
        return {}
    lines: dict[tuple[str, ...], int] = {}

    def walk(node: Any, prefix: tuple[str, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    lines[(*prefix, str(key.value))] = key.start_mark.line + 1
                    walk(value, (*prefix, str(key.value)))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, (*prefix, str(i)))

    if root is not None:
        walk(root, ())
    return lines


def _argument_problems(system: SystemFile, found: Iterable[ParameterProblem]) -> list[ParameterProblem]:
    """Keys that only the launch arguments' targets add (``sets: [arm_driver.options.dry_rn]``), named by argument."""
    seen = {(p.node, p.path) for p in found}
    try:
        applied = system.with_arguments({}, environ={})
    except SystemFileError:
        return []  # a target naming no node is refused when the arguments are applied
    problems = []
    for problem in parameter_problems(applied):
        if (problem.node, problem.path) in seen:
            continue
        target = ".".join((problem.node, *problem.path))
        argument = next((a for a in system.arguments for t in a.sets
                         if t == target or t.startswith(f"{target}.") or target.startswith(f"{t}.")), None)
        problems.append(dataclasses.replace(problem, argument=argument.name if argument else ""))
    return problems


def check_parameter_names(system: SystemFile) -> None:
    """Raise :class:`UnknownParameterError` when a node parameter, nested-setting key or backend option of
    ``system`` (its launch arguments' targets included) is one its node does not take, one line per key."""
    problems = parameter_problems(system)
    if system.arguments:
        problems += _argument_problems(system, problems)
    if not problems:
        return
    source = system.source
    lines = _key_lines(source) if source is not None and source.is_file() else {}
    located = []
    for problem in problems:
        if problem.argument:
            key: tuple[str, ...] = ("arguments", problem.argument, "sets")
        else:
            key = ("nodes", problem.node, "parameters", *problem.path)
        located.append(dataclasses.replace(problem, line=lines.get(key)))
    where = str(source) if source is not None else f"system {system.name!r}"
    header = (f"{where}: {len(located)} unknown parameter key(s), refused before any node starts "
              "(a node ignores a parameter it does not declare):")
    raise UnknownParameterError("\n".join([header, *(f"  {p.message()}" for p in located)]), located)
