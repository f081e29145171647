"""What ``launch/robopin.launch.py`` starts for a system file, computed without the launch packages.

The launch file only turns these entries into ``launch_ros`` Nodes and ``ExecuteProcess`` actions,
so everything that can be wrong (a missing node, a bad parameter, an unknown argument) is decided
and tested here. A real system becomes one process per node sharing one generated ROS 2 parameters
file; a simulated system becomes one ``robopin up`` process, because the pybullet world the sim
camera, arm and oracle backends share cannot span processes.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from pathlib import Path

import yaml

from robopin.system.schema import SystemFile, load_system, resolve_system_path

__all__ = ["COMMON_LAUNCH_ARGUMENTS", "LaunchEntry", "launch_entries"]

COMMON_LAUNCH_ARGUMENTS = {
    "robot_ip": "address of the arm's controller (xArm) or control unit (Franka)",
    "vlm_url": "base URL of the OpenAI-compatible VLM server, e.g. http://gpu-server:8000/v1",
    "dry_run": "true: validate every arm command without moving",
    "static_serial": "serial number of the static camera",
    "wrist_serial": "serial number of the wrist camera",
}
"""Arguments the launch file declares up front (isaac_ros_cumotion style); a system may declare more,
and any argument the chosen system declares can be given on the command line."""


@dataclasses.dataclass(frozen=True)
class LaunchEntry:
    """One thing to start: a robopin_ros node with its parameters file, or a command (``cmd``)."""

    name: str
    executable: str = ""
    parameters_file: str = ""
    cmd: tuple[str, ...] = ()

    @property
    def is_node(self) -> bool:
        return not self.cmd


def launch_entries(system_path: str | Path, launch_configurations: Mapping[str, str], params_dir: str | Path,
                   ) -> tuple[SystemFile, list[LaunchEntry]]:
    """Load the system, apply the launch arguments it declares, and say what to start.

    ``launch_configurations`` holds every ``name:=value`` of the command line; values that are empty
    (the launch file's "not given") and names the system does not declare are left out. The
    parameters file is written into ``params_dir``.
    """
    path = resolve_system_path(system_path)
    system = load_system(path)
    declared = {a.name for a in system.arguments}
    overrides = {k: str(v) for k, v in launch_configurations.items() if k in declared and str(v) != ""}
    if system.is_sim:
        arguments = [f"{k}:={v}" for k, v in overrides.items()]
        robopin = str(Path(sys.executable).with_name("robopin"))
        command = robopin if Path(robopin).is_file() else "robopin"
        system.with_arguments(overrides)  # fail here, in the launch, on a bad value
        return system, [LaunchEntry(f"robopin_up_{system.name}", cmd=(command, "up", str(path.resolve()), *arguments))]
    system = system.with_arguments(overrides)
    params = Path(params_dir) / f"{system.name}.params.yaml"
    params.parent.mkdir(parents=True, exist_ok=True)
    params.write_text(yaml.safe_dump(system.ros_parameters_file(), sort_keys=False), encoding="utf-8")
    return system, [LaunchEntry(n.name, n.executable, str(params)) for n in system.nodes]
