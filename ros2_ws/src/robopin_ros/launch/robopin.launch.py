
"""Launch a robopin system file with ROS 2 launch: one process per node, all reading one parameters file.

    ros2 launch robopin_ros robopin.launch.py system:=real_xarm6 robot_ip:=192.168.1.200 \
        vlm_url:=http://gpu-server:8000/v1 static_serial:="'f1230000'" wrist_serial:="'123456789012'"
    ros2 launch robopin_ros robopin.launch.py system:=sim_panda      # runs `robopin up` (one process)
    ros2 launch robopin_ros robopin.launch.py system:=sim_xarm6 namespace:=right   # a second robot, same graph
    ros2 launch robopin_ros robopin.launch.py --show-args

``system:=`` names a system file: a path, or a name in the config/ beside the robopin library (a checkout, or
/opt/robopin/config in the image, where compose mounts the site's files), else in this package's share
``config/`` (setup.py installs the repository's config/ there). Every argument any installed system file
declares is declared here with its real default and description
(``robopin.system.launching.declared_arguments``); what to start is decided by
``robopin.system.launching.launch_entries``, from the same file ``robopin up`` reads.
"""

import contextlib
import tempfile
from pathlib import Path

from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, ExecuteProcess, LogInfo, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from robopin.system.launching import declared_arguments, launch_entries


def _config_dir():
    """Where system names are looked up: the library's config/ (site-edited), else the package share's."""
    from robopin.env import REPO_ROOT

    candidates = [REPO_ROOT / "config"]
    with contextlib.suppress(PackageNotFoundError):
        candidates.append(Path(get_package_share_directory("robopin_ros")) / "config")
    return next((c for c in candidates if any(c.glob("*.yaml"))), candidates[0])


def _launch_system(context, *args, **kwargs):
    """Read the system file named by system:= and turn its entries into launch actions."""
    system_file = LaunchConfiguration("system").perform(context)
    params_dir = tempfile.mkdtemp(prefix="robopin-launch-")
    system, entries = launch_entries(system_file, dict(context.launch_configurations), params_dir,
                                     config_dir=_config_dir())
    if any(entry.is_node for entry in entries):
        # One stack per namespace and domain: refused before any node starts (robopin up checks its own).
        from robopin_ros.bringup import refuse_other_stack

        refuse_other_stack(system)
    actions = [LogInfo(msg=f"robopin system {system.name}: {', '.join(e.name for e in entries)}")]
    for entry in entries:
        if entry.is_node:
            # Relative names under namespace:= (nav2_bringup's way; robopin.system.names says which stay global).
            actions.append(Node(package="robopin_ros", executable=entry.executable, name=entry.name,
                                namespace=entry.namespace or "", parameters=[entry.parameters_file], output="screen",
                                emulate_tty=True))
        else:
            # Simulated systems: the shared pybullet world must live in one process.
            actions.append(ExecuteProcess(cmd=list(entry.cmd), name=entry.name, output="screen",
                                          sigterm_timeout="15"))
    return actions


def generate_launch_description():
    arguments = [DeclareLaunchArgument(a.name, default_value=a.default, description=a.description)
                 for a in declared_arguments(_config_dir())]
    return LaunchDescription([*arguments, OpaqueFunction(function=_launch_system)])
