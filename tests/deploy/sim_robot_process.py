"""One simulated robot as its own process, as on a robot PC: a pybullet world and the real arm_driver_node.

Run as ``python -m tests.deploy.sim_robot_process <robot> [ros args…]`` with ROS_DOMAIN_ID (and any
namespace remap) chosen by the caller; stops cleanly on SIGTERM through robopin_ros.runtime.
"""

from __future__ import annotations

import sys

from robopin.env import apply_ros_environment


def main(argv: list[str]) -> int:
    robot, ros_args = argv[0], argv[1:]
    apply_ros_environment()
    from robopin_ros.arm_driver_node import ArmDriverNode
    from robopin_ros.runtime import run_node

    from robopin.sim.world import SimWorld

    world = SimWorld(f"{robot}-cell", robot=robot)
    world.settle()
    options = f"{{robot: {robot}, world: {robot}-cell, safety: {{state_max_age_s: 3.0}}}}"
    args = [sys.argv[0], "--ros-args", "-p", "backend:=sim", "-p", f"options:='{options}'",
            "-p", "state_rate_hz:=10.0", *ros_args]  # fmt: skip
    return run_node(ArmDriverNode, args)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
