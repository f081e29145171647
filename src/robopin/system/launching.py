"""What ``robopin_ros``'s ``launch/robopin.launch.py`` starts for a system file, computed without the launch packages.

The launch file only turns these entries into ``launch_ros`` Nodes and ``ExecuteProcess`` actions,
so everything that can be wrong (a missing node, a bad parameter, an unknown argument) is decided
and tested here. A real system becomes one process per node sharing one generated ROS 2 parameters
file; a simulated system becomes one ``robopin up`` process, because the pybullet world the sim
camera, arm and oracle backends share cannot span processes.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping
from pathlib import Path

import yaml

from robopin.system.loading import in_namespace, load_system
from robopin.system.schema import SystemFile, resolve_system_path

__all__ = ["COMMON_LAUNCH_ARGUMENTS", "NAMESPACE_ARGUMENT", "DeclaredArgument", "LaunchEntry", "declared_arguments",
           "launch_entries", "show_arguments"]

COMMON_LAUNCH_ARGUMENTS = {
    "robot_ip": "address of the arm's controller (xArm) or control unit (Franka)",
    "vlm_url": "base URL of the OpenAI-compatible VLM server, e.g. http://gpu-server:8000/v1",
    "dry_run": "true: validate every arm command without moving",
    "static_serial": "serial number of the static camera",
    "wrist_serial": "serial number of the wrist camera",
}
"""Arguments the launch file declares up front (isaac_ros_cumotion style); a system may declare more,
and any argument the chosen system declares can be given on the command line."""
NAMESPACE_ARGUMENT = "namespace"
"""The launch file's own ``namespace:=``, as nav2_bringup declares ``namespace`` (default '', navigation2
nav2_bringup/launch/navigation_launch.py) and xarm_ros2's driver ``ns`` (xarm_api/launch/xarm6_driver.launch.py):
every node of the system in that namespace; empty leaves the system file's ``namespace`` (root when it has none)."""


@dataclasses.dataclass(frozen=True)
class DeclaredArgument:
    """One launch argument as the launch file declares it (``DeclareLaunchArgument``)."""

    name: str
    default: str
    description: str


def _launch_text(value: object) -> str:
    """A system-file value as ``name:=value`` text that reads back as the same YAML scalar."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def declared_arguments(config_dir: str | Path, environ: Mapping[str, str] | None = None) -> list[DeclaredArgument]:
    """``system`` plus every argument any system file in ``config_dir`` declares, with its real default.

    The default is the value the system file gives (its ``env`` variable first, as ``robopin up``
    reads it). Where the systems disagree (``robot_ip``: one per arm) the declared default is empty,
    which leaves each system its own, and the description lists them.
    """
    environ = os.environ if environ is None else environ
    config_dir = Path(config_dir)
    systems = []
    for path in sorted(config_dir.glob("*.yaml")):
        try:
            systems.append(load_system(path))
        except Exception:
            continue
    names = [s.name for s in systems]
    default_system = "sim_panda" if "sim_panda" in names else (names[0] if names else "")
    result = [DeclaredArgument("system", default_system,
                               f"system file (a path, or a name in {config_dir}: {', '.join(names)})"),
              DeclaredArgument(NAMESPACE_ARGUMENT, "", "ROS namespace of every node of the system (two robots in one "
                               "graph); empty: the system file's namespace:, else the root namespace")]
    by_name: dict[str, list[tuple[str, str, str]]] = {}
    for system in systems:
        for argument in system.arguments:
            value = _launch_text(argument.value({}, environ))
            by_name.setdefault(argument.name, []).append((system.name, value, argument.description))
    for name, entries in by_name.items():
        values = {value for _, value, _ in entries}
        description = " / ".join(dict.fromkeys(text for _, _, text in entries))
        where = ", ".join(system for system, _, _ in entries)
        if len(values) == 1:
            result.append(DeclaredArgument(name, values.pop(), f"{description} (systems: {where})"))
        else:
            per_system = "; ".join(f"{system}: {text} (default {value!r})" for system, value, text in entries)
            result.append(DeclaredArgument(name, "", f"empty: the system's own. {per_system}"))
    return result


def show_arguments(config_dir: str | Path, environ: Mapping[str, str] | None = None) -> str:
    """What ``ros2 launch robopin_ros robopin.launch.py --show-args`` prints, in its layout."""
    lines = ["Arguments (pass arguments as '<name>:=<value>'):", ""]
    for argument in declared_arguments(config_dir, environ):
        lines += [f"    '{argument.name}':", f"        {argument.description}",
                  f"        (default: '{argument.default}')", ""]
    return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class LaunchEntry:
    """One thing to start: a robopin_ros node with its parameters file, or a command (``cmd``)."""

    name: str
    executable: str = ""
    parameters_file: str = ""
    cmd: tuple[str, ...] = ()
    namespace: str = ""  # the node's ROS namespace ('' root, '/left'); launch_ros Node(namespace=...)

    @property
    def is_node(self) -> bool:
        return not self.cmd


def launch_entries(system_path: str | Path, launch_configurations: Mapping[str, str], params_dir: str | Path,
                   config_dir: str | Path | None = None) -> tuple[SystemFile, list[LaunchEntry]]:
    """Load the system, apply the launch arguments it declares, and say what to start.

    ``launch_configurations`` holds every ``name:=value`` of the command line; values that are empty
    (the launch file's "not given") and names the system does not declare are left out. The
    parameters file is written into ``params_dir``. ``namespace:=`` (when not empty) puts every node in that
    namespace instead of the system file's. A system given by name (``real_xarm6``) is looked up
    in ``config_dir`` (the package share's config/ under ros2 launch), else in the checkout's config/.
    """
    path = resolve_system_path(system_path, Path(config_dir) if config_dir else None)
    system = load_system(path)
    namespace = str(launch_configurations.get(NAMESPACE_ARGUMENT, "") or "")
    if namespace:
        system = in_namespace(system, namespace)
    declared = {a.name for a in system.arguments}
    overrides = {k: str(v) for k, v in launch_configurations.items() if k in declared and str(v) != ""}
    if system.is_sim:
        arguments = [f"{k}:={v}" for k, v in overrides.items()]
        if namespace:
            arguments += ["--namespace", system.namespace]
        robopin = str(Path(sys.executable).with_name("robopin"))
        command = robopin if Path(robopin).is_file() else "robopin"
        system.with_arguments(overrides)  # fail here, in the launch, on a bad value
        return system, [LaunchEntry(f"robopin_up_{system.name}", cmd=(command, "up", str(path.resolve()), *arguments))]
    system = system.with_arguments(overrides)
    params = Path(params_dir) / f"{system.name}.params.yaml"
    params.parent.mkdir(parents=True, exist_ok=True)
    parameters = system.ros_parameters_file()
    # Nothing supervises a launch's processes: each task node waits for the others' ~/ready itself, so the
    # first task finds the arm enabled, a frame from every camera and the recorder hearing every topic.
    for node in system.nodes:
        if node.executable == "task_node":
            others = [n.name for n in system.nodes if n.name != node.name]
            parameters.setdefault(node.name, {}).setdefault("ros__parameters", {})["ready_nodes"] = others
    params.write_text(yaml.safe_dump(parameters, sort_keys=False), encoding="utf-8")
    return system, [LaunchEntry(n.name, n.executable, str(params), namespace=system.namespace) for n in system.nodes]
