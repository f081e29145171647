"""The system file: one YAML per deployment naming its nodes, their backends and parameters.

A system file is the single source for both ways of starting the stack: the ROS 2 launch file
(``launch/robopin.launch.py``, one process per node) and the in-process runner (``robopin up``, every
node in one executor). It holds:

- ``name``, ``description``, ``robot`` (the arm description every node shares) and ``views``
  (camera views in ``img_idx`` order);
- ``namespace`` (optional, default empty: the root namespace): the ROS namespace every node of the system
  runs in, so two robots share one graph (``left``: ``/left/robopin/instruct``, ``/left/tf``; see
  :mod:`robopin.system.names`);
- ``cameras`` (optional): view -> ``{driver, prefix, qos, color, info, depth}``, where a view's topics
  are and the QoS they are published with (robopin.cameras.topics: ``driver: realsense`` reads
  realsense-ros's names), handed as ``cameras.<view>.<key>`` parameters to every node that uses them;
- ``nodes``: node name -> ``{executable, parameters}``; ``executable`` is a ``robopin_ros``
  console script (``camera_node``, ``task_node``, ...). Parameter values that are mappings become
  YAML strings when handed to ROS (the nodes parse ``vlm``, ``options``, ``workspace``... themselves);
- ``arguments``: launch arguments (``robot_ip``, ``vlm_url``, ``dry_run``, camera serials) with a
  default, an optional environment variable that overrides the default, and the node parameters
  (``node.parameter[.key...]``) each one sets;
- ``sim`` (simulated systems only): the scenario and seed of the workcell that the sim camera, arm
  and oracle backends of one process share, and whether camera mounts come from the simulator;
- ``task``: the instruction ``robopin up --demo`` and ``robopin trial`` give, and their time limit.

Nothing here imports rclpy; :mod:`robopin_ros.bringup` and the launch file consume the result.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from robopin.system.names import NamespaceError, normalize_namespace
from robopin.system.nested import NESTED_PARAMETERS, flatten_setting, plain

__all__ = [
    "NODE_EXECUTABLES",
    "Argument",
    "NodeSpec",
    "SimSpec",
    "SystemFile",
    "SystemFileError",
    "TaskSpec",
    "parse_argument_overrides",
    "parse_system",
    "resolve_system_path",
]

# The console scripts of robopin_ros a system may name (every *_node.py with a main()); checked
# against the package by the tests so this list cannot drift.
NODE_EXECUTABLES = (
    "arm_driver_node",
    "calibration_node",
    "camera_node",
    "motion_planner_node",
    "task_node",
    "projection_node",
    "recorder_node",
    "replay_node",
    "state_publisher_node",
)
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_ARGUMENT = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9_]*):=(?P<value>.*)$")
_TOP_LEVEL = {"name", "description", "robot", "views", "namespace", "cameras", "nodes", "arguments", "sim", "task"}
# Executables that read or write camera topics, and so take each view's cameras.<view>.* parameters;
# the ones naming a single view take only that view's (their ``name`` parameter).
_CAMERA_TOPIC_USERS = {"task_node": "views", "projection_node": "views", "recorder_node": "views",
                       "camera_node": "name", "calibration_node": "name"}


class SystemFileError(ValueError):
    """A system file that cannot be used: the message names the file, the key and what was expected."""


@dataclasses.dataclass(frozen=True)
class NodeSpec:
    """One node of a system: its ROS name, the robopin_ros executable and its parameters."""

    name: str
    executable: str
    parameters: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise SystemFileError(f"node name {self.name!r} is not a valid ROS node name (letters, digits, _)")
        if self.executable not in NODE_EXECUTABLES:
            raise SystemFileError(
                f"node {self.name!r}: executable {self.executable!r} is not a robopin_ros node; "
                f"expected one of {list(NODE_EXECUTABLES)}"
            )
        if not isinstance(self.parameters, Mapping):
            raise SystemFileError(f"node {self.name!r}: parameters must be a mapping, got {self.parameters!r}")
        for key in self.parameters:
            if not isinstance(key, str) or not key:
                raise SystemFileError(f"node {self.name!r}: parameter names must be strings, got {key!r}")

    def ros_parameters(self) -> dict[str, Any]:
        """Parameters as ROS takes them: a nested setting its node declares dotted (robopin.system.nested)
        becomes ``key.sub`` parameters; other mappings become YAML strings, lists of mappings too."""
        nested = NESTED_PARAMETERS.get(self.executable, ())
        parameters: dict[str, Any] = {}
        for key, value in self.parameters.items():
            where = f"{self.name}.{key}"
            if key in nested:
                try:
                    parameters.update(flatten_setting(key, _nested_mapping(value, where)))
                except ValueError as error:
                    raise SystemFileError(str(error)) from None
                continue
            parameters[key] = _to_ros_value(value, where)
        return parameters


def _nested_mapping(value: Any, where: str) -> Mapping[str, Any]:
    """A nested setting's mapping, given as a mapping or as YAML text; empty for "none" ('' or null)."""
    if isinstance(value, str):
        try:
            value = yaml.safe_load(value) if value.strip() else None
        except yaml.YAMLError as error:
            raise SystemFileError(f"parameter {where} is not valid YAML: {error}") from None
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SystemFileError(f"parameter {where} must be a mapping, got {value!r}")
    return value


def _to_ros_value(value: Any, where: str) -> Any:
    if isinstance(value, Mapping):
        return yaml.safe_dump(plain(value), default_flow_style=True, sort_keys=False, width=10**6).strip()
    if isinstance(value, (list, tuple)):
        items = list(value)
        if any(isinstance(v, (Mapping, list, tuple)) for v in items):
            return yaml.safe_dump(plain(items), default_flow_style=True, width=10**6).strip()
        if not items:
            # ROS cannot type an empty list; the nodes use [''] for "none" (filtered out on read).
            return [""]
        kinds = {type(v) for v in items}
        if len(kinds) > 1 and kinds != {int, float}:
            raise SystemFileError(f"parameter {where}: a list must hold one type for ROS, got {items!r}")
        return [float(v) for v in items] if kinds == {int, float} else items
    if value is None:
        return ""
    if isinstance(value, (bool, int, float, str)):
        return value
    raise SystemFileError(f"parameter {where}: {value!r} ({type(value).__name__}) is not a ROS parameter value")




@dataclasses.dataclass(frozen=True)
class Argument:
    """A launch argument: ``name:=value`` on the command line sets every parameter in ``sets``.

    The value used is, in order: the command line, the environment variable ``env`` (when set and
    not empty), ``default``. Values are read as YAML scalars (``true``, ``5``, ``'123'``).
    """

    name: str
    default: Any = ""
    description: str = ""
    env: str = ""
    sets: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise SystemFileError(f"argument name {self.name!r} must be letters, digits and _")
        if not self.sets:
            raise SystemFileError(f"argument {self.name!r}: 'sets' must name at least one node.parameter")
        for target in self.sets:
            if target.count(".") < 1:
                raise SystemFileError(f"argument {self.name!r}: target {target!r} must be node.parameter[.key...]")

    def value(self, overrides: Mapping[str, str], environ: Mapping[str, str]) -> Any:
        """The value this argument takes given command-line overrides and the environment."""
        if self.name in overrides:
            return _scalar(overrides[self.name])
        if self.env and environ.get(self.env):
            return _scalar(environ[self.env])
        return self.default


def _scalar(text: str) -> Any:
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    if isinstance(value, (Mapping, list)):
        return text  # only scalars are parsed; anything else stays the text it was
    return "" if value is None else value


@dataclasses.dataclass(frozen=True)
class SimSpec:
    """The simulated workcell of a sim system (shared in-process by the sim camera, arm and oracle).

    ``scenario`` is a packaged scenario name (``spatial``) or a path to a scenario YAML (relative
    paths are resolved against the system file's folder). ``real_time_factor`` 0 runs physics only
    while the arm moves, as fast as the CPU allows; 1 steps it in real time on a thread.
    ``ground_truth_calibration`` hands the projection node the simulator's camera mounts.
    """

    scenario: str = "spatial"
    seed: int = 0
    world: str = "workcell"
    real_time_factor: float = 0.0
    ground_truth_calibration: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.scenario, str) or not self.scenario:
            raise SystemFileError(f"sim.scenario must name a scenario or a YAML path, got {self.scenario!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise SystemFileError(f"sim.seed must be an integer >= 0, got {self.seed!r}")
        if not _NAME.match(str(self.world).replace("-", "_")):
            raise SystemFileError(f"sim.world must be a plain name, got {self.world!r}")
        if not (isinstance(self.real_time_factor, (int, float)) and self.real_time_factor >= 0):
            raise SystemFileError(f"sim.real_time_factor must be >= 0, got {self.real_time_factor!r}")


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """The task ``robopin up --demo`` and ``robopin trial`` give: instruction (empty: the scenario's)."""

    instruction: str = ""
    mode: str = ""
    dry_run: bool = False
    max_steps: int = 0
    timeout_s: float = 600.0

    def __post_init__(self) -> None:
        if self.mode not in ("", "auto", "point", "subtask", "plan"):
            raise SystemFileError(f"task.mode must be auto, point, subtask or plan, got {self.mode!r}")
        if not (isinstance(self.max_steps, int) and self.max_steps >= 0):
            raise SystemFileError(f"task.max_steps must be an integer >= 0, got {self.max_steps!r}")
        if not (isinstance(self.timeout_s, (int, float)) and self.timeout_s > 0):
            raise SystemFileError(f"task.timeout_s must be > 0 s, got {self.timeout_s!r}")


@dataclasses.dataclass(frozen=True)
class SystemFile:
    """A validated system (see the module docstring). ``source`` is the file it came from, if any."""

    name: str
    robot: str
    views: tuple[str, ...]
    nodes: tuple[NodeSpec, ...]
    description: str = ""
    arguments: tuple[Argument, ...] = ()
    sim: SimSpec | None = None
    task: TaskSpec = dataclasses.field(default_factory=TaskSpec)
    source: Path | None = None
    namespace: str = ""  # normalized: '' (root) or '/left'
    cameras: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "namespace", normalize_namespace(self.namespace))
        except NamespaceError as error:
            raise SystemFileError(f"system {self.name!r}: {error}") from None

    @property
    def is_sim(self) -> bool:
        return self.sim is not None

    def with_namespace(self, namespace: str) -> SystemFile:
        """A copy whose nodes run in ``namespace``, unchecked (callers use ``robopin.system.loading.in_namespace``)."""
        return dataclasses.replace(self, namespace=namespace)

    def node_fqn(self, name: str) -> str:
        """A node's fully qualified ROS name in this system's namespace (``/left/task_node``)."""
        return f"{self.namespace}/{name}"

    def node(self, name: str) -> NodeSpec:
        """The node called ``name`` (SystemFileError naming the known ones otherwise)."""
        for node in self.nodes:
            if node.name == name:
                return node
        raise SystemFileError(f"system {self.name!r} has no node {name!r}; nodes: {[n.name for n in self.nodes]}")

    def arguments_setting(self, node: str) -> list[Argument]:
        """The arguments that set a parameter of ``node`` (what a user can change from the command line)."""
        return [a for a in self.arguments if any(target.split(".", 1)[0] == node for target in a.sets)]

    def nodes_running(self, executable: str) -> list[NodeSpec]:
        """Every node of this system started from ``executable``."""
        return [n for n in self.nodes if n.executable == executable]

    def with_arguments(self, overrides: Mapping[str, str], environ: Mapping[str, str] | None = None) -> SystemFile:
        """A copy with every argument applied (command line > environment > default).

        Unknown argument names are refused, naming the ones the system declares.
        """
        known = {a.name for a in self.arguments}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise SystemFileError(f"system {self.name!r} has no argument(s) {unknown}; arguments: {sorted(known)}")
        environ = os.environ if environ is None else environ
        parameters = {n.name: copy.deepcopy(dict(n.parameters)) for n in self.nodes}
        for argument in self.arguments:
            value = argument.value(overrides, environ)
            for target in argument.sets:
                node, *path = target.split(".")
                if node not in parameters:
                    raise SystemFileError(f"argument {argument.name!r} sets {target!r}, but there is no node {node!r}")
                _set_path(parameters[node], path, value, f"argument {argument.name!r} target {target!r}")
        nodes = tuple(dataclasses.replace(n, parameters=parameters[n.name]) for n in self.nodes)
        return dataclasses.replace(self, nodes=nodes, arguments=())

    def with_sim(self, **changes: Any) -> SystemFile:
        """A copy whose simulated workcell has ``changes`` (scenario, seed, ...)."""
        if self.sim is None:
            raise SystemFileError(f"system {self.name!r} is not simulated (no 'sim' section); cannot set {changes}")
        return dataclasses.replace(self, sim=dataclasses.replace(self.sim, **changes))

    def with_layout_seeded_reasoner(self) -> SystemFile:
        """A sim system whose planners' E-TTS reasoner, when it has no seed of its own, has the layout seed.

        Unseeded, E-TTS leaves each request's sampling seed to the backend (the simulated model's configured
        seed, the same for every layout) and draws its exploration from the OS: a trial would not run the same
        twice, nor on a kept stack as on a fresh one. Real systems, and E-TTS with a seed, are unchanged.
        """
        if self.sim is None or self.arguments:
            return self
        system = self
        for node in self.nodes_running("task_node"):
            reasoning = node.parameters.get("reasoning")
            reasoning = (yaml.safe_load(reasoning) or {}) if isinstance(reasoning, str) else reasoning
            if not isinstance(reasoning, Mapping):
                continue
            reasoner = reasoning.get("reasoner")
            if isinstance(reasoner, Mapping) and reasoner.get("type") == "etts" and reasoner.get("seed") is None:
                seeded = {**reasoning, "reasoner": {**reasoner, "seed": int(self.sim.seed)}}
                system = system.with_parameters(node.name, reasoning=seeded)
        return system

    def with_parameters(self, node: str, **parameters: Any) -> SystemFile:
        """A copy with ``parameters`` set on ``node`` (nested keys as dotted names are not split)."""
        spec = self.node(node)
        updated = dataclasses.replace(spec, parameters={**spec.parameters, **parameters})
        return dataclasses.replace(self, nodes=tuple(updated if n.name == node else n for n in self.nodes))

    def ros_parameters_file(self) -> dict[str, Any]:
        """The ROS 2 parameters file of the whole system: ``{node: {ros__parameters: {...}}}``."""
        if self.arguments:
            raise SystemFileError(f"system {self.name!r}: apply its arguments (with_arguments) before exporting")
        # Keyed by the fully qualified name: rcl matches a parameters file's node keys against the node's
        # namespace and name, so a bare name would not reach a node in a namespace.
        # A simulated system runs on the simulator's clock: every node takes its time from /clock (rclpy's
        # use_sim_time), which the simulator publishes (robopin_ros.bringup.SimClockPublisher).
        sim_time = {"use_sim_time": True} if self.sim is not None else {}
        return {self.node_fqn(n.name) if self.namespace else n.name:
                {"ros__parameters": {**n.ros_parameters(), **self._camera_parameters(n), **sim_time}}
                for n in self.nodes}

    def view_topics(self) -> dict[str, Any]:
        """Each view's topics and QoS (robopin.cameras.topics.ViewTopics), as the nodes resolve them."""
        from robopin.cameras.topics import view_topics

        return {view: view_topics(view, **self.cameras.get(view, {})) for view in self.views}

    def _camera_parameters(self, node: NodeSpec) -> dict[str, Any]:
        """The ``cameras.<view>.<key>`` parameters (and a recorder's ``views``) of ``node`` from ``cameras:``."""
        which = _CAMERA_TOPIC_USERS.get(node.executable)
        if which is None or not self.cameras:
            return {}
        if which == "name":
            own = node.parameters.get("name")
            views = [own] if own in self.cameras else []
        else:
            views = [v for v in (node.parameters.get("views") or self.views) if v in self.cameras]
        parameters: dict[str, Any] = {f"cameras.{view}.{key}": value
                                      for view in views for key, value in self.cameras[view].items()}
        if node.executable == "recorder_node" and "views" not in node.parameters:
            parameters["views"] = list(self.views)
        return parameters

    def scenario_path(self) -> str:
        """The sim scenario as load_scenario takes it: a name, or a path resolved against the file."""
        if self.sim is None:
            raise SystemFileError(f"system {self.name!r} has no simulated workcell")
        scenario = self.sim.scenario
        if scenario.endswith((".yaml", ".yml")):
            path = Path(scenario)
            if not path.is_absolute() and self.source is not None:
                path = self.source.parent / path
            return str(path)
        return scenario


def _set_path(mapping: dict[str, Any], path: Sequence[str], value: Any, where: str) -> None:
    head, *rest = path
    if not rest:
        mapping[head] = value
        return
    child = mapping.get(head)
    if child is None:
        child = mapping[head] = {}
    elif isinstance(child, str):
        # A parameter written as a YAML string in the file: edit it as the mapping it holds.
        parsed = yaml.safe_load(child) or {}
        if not isinstance(parsed, dict):
            raise SystemFileError(f"{where}: {head!r} holds {child!r}, not a mapping")
        child = mapping[head] = parsed
    elif not isinstance(child, dict):
        raise SystemFileError(f"{where}: {head!r} holds {child!r}, not a mapping")
    _set_path(child, rest, value, where)


def _require(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], source: str) -> Any:
    if key not in data:
        raise SystemFileError(f"{source}: missing required key {key!r}")
    value = data[key]
    if not isinstance(value, kind):
        expected = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise SystemFileError(f"{source}: {key!r} must be a {expected}, got {value!r}")
    return value


def parse_system(data: Mapping[str, Any], *, source: str | Path = "<dict>") -> SystemFile:
    """Build a :class:`SystemFile` from parsed YAML, each key validated; errors name ``source`` and the key.

    The checks across nodes are :mod:`robopin.system.checks`'; :func:`robopin.system.load_system` runs both.
    """
    where = str(source)
    if not isinstance(data, Mapping):
        raise SystemFileError(f"{where}: a system file must be a mapping, got {type(data).__name__}")
    unknown = sorted(set(data) - _TOP_LEVEL)
    if unknown:
        raise SystemFileError(f"{where}: unknown key(s) {unknown}; expected some of {sorted(_TOP_LEVEL)}")
    name = _require(data, "name", str, where)
    robot = _require(data, "robot", str, where)
    views = tuple(_require(data, "views", list, where))
    if not views or len(set(views)) != len(views) or not all(isinstance(v, str) and _NAME.match(v) for v in views):
        raise SystemFileError(f"{where}: views must be distinct view names (img_idx order), got {list(views)}")
    raw_nodes = _require(data, "nodes", Mapping, where)
    nodes = []
    for node_name, body in raw_nodes.items():
        if not isinstance(body, Mapping):
            raise SystemFileError(f"{where}: node {node_name!r} must be a mapping with 'executable', got {body!r}")
        extra = sorted(set(body) - {"executable", "parameters"})
        if extra:
            raise SystemFileError(f"{where}: node {node_name!r} has unknown key(s) {extra}; expected executable, "
                                  "parameters")
        try:
            nodes.append(NodeSpec(str(node_name), str(body.get("executable", "")), dict(body.get("parameters") or {})))
        except SystemFileError as error:
            raise SystemFileError(f"{where}: {error}") from None
    if not nodes:
        raise SystemFileError(f"{where}: nodes must name at least one node")
    arguments = []
    for arg_name, body in (data.get("arguments") or {}).items():
        if not isinstance(body, Mapping):
            raise SystemFileError(f"{where}: argument {arg_name!r} must be a mapping with 'sets', got {body!r}")
        extra = sorted(set(body) - {"default", "description", "env", "sets"})
        if extra:
            raise SystemFileError(f"{where}: argument {arg_name!r} has unknown key(s) {extra}")
        sets = body.get("sets") or ()
        sets = (sets,) if isinstance(sets, str) else tuple(sets)
        try:
            arguments.append(Argument(str(arg_name), body.get("default", ""), str(body.get("description", "")),
                                      str(body.get("env", "") or ""), sets))
        except SystemFileError as error:
            raise SystemFileError(f"{where}: {error}") from None
    sim = None
    if data.get("sim") is not None:
        raw = data["sim"]
        if not isinstance(raw, Mapping):
            raise SystemFileError(f"{where}: sim must be a mapping, got {raw!r}")
        fields = {f.name for f in dataclasses.fields(SimSpec)}
        extra = sorted(set(raw) - fields)
        if extra:
            raise SystemFileError(f"{where}: sim has unknown key(s) {extra}; expected some of {sorted(fields)}")
        try:
            sim = SimSpec(**raw)
        except SystemFileError as error:
            raise SystemFileError(f"{where}: {error}") from None
    raw_task = data.get("task") or {}
    fields = {f.name for f in dataclasses.fields(TaskSpec)}
    if not isinstance(raw_task, Mapping) or set(raw_task) - fields:
        raise SystemFileError(f"{where}: task must be a mapping with some of {sorted(fields)}, got {raw_task!r}")
    try:
        task = TaskSpec(**raw_task)
    except SystemFileError as error:
        raise SystemFileError(f"{where}: {error}") from None
    from robopin.cameras.topics import CameraTopicsError, camera_topic_settings

    try:
        cameras = camera_topic_settings(data.get("cameras") or {}, views)
    except CameraTopicsError as error:
        raise SystemFileError(f"{where}: {error}") from None
    namespace = data.get("namespace") or ""
    if not isinstance(namespace, str):
        raise SystemFileError(f"{where}: namespace must be a ROS namespace (e.g. left), got {namespace!r}")
    try:
        return SystemFile(
            name=name, robot=robot, views=views, nodes=tuple(nodes), description=str(data.get("description", "")),
            arguments=tuple(arguments), sim=sim, task=task, source=Path(source) if isinstance(source, Path) else None,
            namespace=namespace, cameras=cameras,
        )
    except SystemFileError as error:
        raise SystemFileError(f"{where}: {error}") from None


def resolve_system_path(name_or_path: str | Path, config_dir: Path | None = None) -> Path:
    """A system file by path, or by name (``sim_panda``) in the repository's ``config/`` folder."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    if path.suffix not in (".yaml", ".yml") and not path.parent.parts:
        from robopin.env import REPO_ROOT

        candidate = (config_dir or REPO_ROOT / "config") / f"{path.name}.yaml"
        if candidate.is_file():
            return candidate
    raise SystemFileError(f"system file {str(name_or_path)!r} does not exist (give a path or a name in config/)")


def parse_argument_overrides(items: Sequence[str]) -> dict[str, str]:
    """``['robot_ip:=10.0.0.2', ...]`` -> ``{'robot_ip': '10.0.0.2'}`` (the ros2 launch syntax)."""
    overrides = {}
    for item in items:
        match = _ARGUMENT.match(item)
        if match is None:
            raise SystemFileError(f"argument {item!r} must look like name:=value")
        overrides[match["name"]] = match["value"]
    return overrides
