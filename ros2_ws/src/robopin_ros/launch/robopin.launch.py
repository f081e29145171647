# ruff: noqa: I001  -- ruff takes launch/ (this folder) for the ROS 2 launch package
"""Launch a robopin system file with ROS 2 launch: one process per node, all reading one parameters file.

    ros2 launch launch/robopin.launch.py system:=config/real_xarm6.yaml robot_ip:=192.168.1.200 \
        vlm_url:=http://gpu-server:8000/v1 static_serial:="'f1230000'" wrist_serial:="'123456789012'"
    ros2 launch launch/robopin.launch.py system:=config/sim_panda.yaml     # runs `robopin up` (one process)

``system:=`` names the system file (config/*.yaml, or just its name). Every argument that system file
declares (``robot_ip``, ``vlm_url``, ``dry_run``, camera serials, ...) can be given as ``name:=value``;
the common ones are declared here so ``--show-args`` lists them. What to start is decided by
``robopin.system.launching.launch_entries``, the same system file ``robopin up`` reads.
"""

import tempfile

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, ExecuteProcess, LogInfo, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from robopin.system.launching import COMMON_LAUNCH_ARGUMENTS, launch_entries


def _launch_system(context, *args, **kwargs):
    """Read the system file named by system:= and turn its entries into launch actions."""
    system_file = LaunchConfiguration("system").perform(context)
    params_dir = tempfile.mkdtemp(prefix="robopin-launch-")
    system, entries = launch_entries(system_file, dict(context.launch_configurations), params_dir)
    actions = [LogInfo(msg=f"robopin system {system.name}: {', '.join(e.name for e in entries)}")]
    for entry in entries:
        if entry.is_node:
            actions.append(Node(package="robopin_ros", executable=entry.executable, name=entry.name,
                                parameters=[entry.parameters_file], output="screen", emulate_tty=True))
        else:
            # Simulated systems: the shared pybullet world must live in one process.
            actions.append(ExecuteProcess(cmd=list(entry.cmd), name=entry.name, output="screen",
                                          sigterm_timeout="15"))
    return actions


def generate_launch_description():
    arguments = [DeclareLaunchArgument("system", default_value="sim_panda",
                                       description="system file (config/*.yaml) or its name")]
    arguments += [DeclareLaunchArgument(name, default_value="", description=f"{text} (empty: the system file's)")
                  for name, text in COMMON_LAUNCH_ARGUMENTS.items()]
    return LaunchDescription([*arguments, OpaqueFunction(function=_launch_system)])
