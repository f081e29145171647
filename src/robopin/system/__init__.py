"""System files: one YAML per deployment (``config/*.yaml``) naming the nodes, backends and parameters.

- :mod:`robopin.system.schema` — :class:`SystemFile`, key-by-key parsing, launch-style arguments
  (``robot_ip:=...``), export to a ROS 2 parameters file.
- :mod:`robopin.system.checks` — cross-node checks (views, robot, arm-pose topic, simulated world).
- :mod:`robopin.system.loading` — :func:`load_system`: a file parsed, then checked.
- :mod:`robopin.system.timing` — the per-stage timing of a task from its feedback, and the summary.

No rclpy here: ``robopin_ros.bringup`` runs a system, ``launch/robopin.launch.py`` launches one.
"""

from robopin.system import schema
from robopin.system.loading import load_system, system_from_dict
from robopin.system.schema import *  # noqa: F403 -- the package exports what the schema exports

__all__ = [*schema.__all__, "load_system", "system_from_dict"]  # noqa: PLE0604
