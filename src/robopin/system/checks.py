"""Cross-node checks of a system file: the nodes must agree before anything starts.

Each check catches a mistake that would otherwise surface only as a silent runtime failure: a view
the planner asks for that no camera publishes, a projection node reading the arm pose on a topic the
driver does not publish, the motion planner planning for a different robot than the one driven,
a simulated backend in a system without a simulated workcell (or one pointing at another world).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from robopin.interfaces import ARM, CAMERA_ROOT, JOINT_STATES, ROBOPIN_ROOT, ROBOT_DESCRIPTION, TF, arm_names
from robopin.system.names import absolute_name
from robopin.system.schema import NodeSpec, SystemFile, SystemFileError

__all__ = ["check_system", "mapping_parameter"]

# Names robopin's own nodes create (robopin.system.names): given absolute in a namespaced system they
# would reach the root namespace's robot instead of this one.
_OWN_PREFIXES = tuple(f"/{name}" for name in
                      (f"{ROBOPIN_ROOT}/", f"{CAMERA_ROOT}/", JOINT_STATES, TF, ROBOT_DESCRIPTION))


def mapping_parameter(node: NodeSpec, key: str) -> dict[str, Any]:
    """A parameter that holds a mapping, whether written as a mapping or as a YAML string."""
    value = node.parameters.get(key, {})
    if isinstance(value, str):
        try:
            value = yaml.safe_load(value) or {}
        except yaml.YAMLError as error:
            raise SystemFileError(f"node {node.name!r}: parameter {key!r} is not valid YAML: {error}") from None
    if not isinstance(value, Mapping):
        raise SystemFileError(f"node {node.name!r}: parameter {key!r} must be a mapping, got {value!r}")
    return dict(value)


def check_system(system: SystemFile) -> None:
    """Raise SystemFileError naming the first disagreement between the nodes of ``system``."""
    where = f"system {system.name!r}"
    sim_world = system.sim.world if system.sim is not None else None

    def fail(message: str) -> None:
        raise SystemFileError(f"{where}: {message}")

    def check_world(node: NodeSpec, backend_world: Any) -> None:
        if sim_world is None:
            fail(f"node {node.name!r} uses a simulated backend but the system has no 'sim' section")
        world = backend_world or "workcell"
        if world != sim_world:
            fail(f"node {node.name!r} uses simulated world {world!r}, but sim.world is {sim_world!r}")

    published_views: dict[str, str] = {}
    for camera in system.nodes_running("camera_node"):
        view = str(camera.parameters.get("name", "camera"))
        if view in published_views:
            fail(f"nodes {published_views[view]!r} and {camera.name!r} both publish view {view!r}")
        published_views[view] = camera.name
        if camera.parameters.get("backend") == "sim":
            check_world(camera, mapping_parameter(camera, "options").get("world"))
    replaying = bool(system.nodes_running("replay_node"))
    for node in (*system.nodes_running("task_node"), *system.nodes_running("projection_node")):
        views = [v for v in node.parameters.get("views", []) if v]
        if tuple(views) != system.views:
            fail(f"node {node.name!r} has views {views}, but the system's views (img_idx order) are "
                 f"{list(system.views)}")
    if not replaying:
        # A view whose topics another driver publishes (cameras: {view: {driver: realsense}}) needs no camera_node.
        external = {v for v, settings in system.cameras.items() if settings.get("driver", "robopin") != "robopin"}
        missing = [v for v in system.views if v not in published_views and v not in external]
        if missing:
            fail(f"no camera_node publishes view(s) {missing}; camera nodes publish {sorted(published_views)} "
                 "(a view published by another driver needs its cameras: entry)")

    ee_pose_topics = set()
    for driver in system.nodes_running("arm_driver_node"):
        options = mapping_parameter(driver, "options")
        robot = options.get("robot", "panda")
        if robot != system.robot:
            fail(f"node {driver.name!r} drives robot {robot!r}, but the system's robot is {system.robot!r}")
        if driver.parameters.get("backend", "sim") == "sim":
            check_world(driver, options.get("world"))
        names = arm_names(str(driver.parameters.get("prefix", ARM.prefix)))
        ee_pose_topics.add(absolute_name(str(driver.parameters.get("ee_pose_topic", names.ee_pose))))
    for motion in system.nodes_running("motion_planner_node"):
        robot = motion.parameters.get("robot", "panda")
        if robot != system.robot:
            fail(f"node {motion.name!r} plans for robot {robot!r}, but the system's robot is {system.robot!r}")
    for projection in system.nodes_running("projection_node"):
        topic = absolute_name(str(projection.parameters.get("ee_pose_topic", ARM.ee_pose)))
        if ee_pose_topics and topic not in ee_pose_topics:
            fail(f"node {projection.name!r} reads the arm pose on {topic!r}, but the arm driver publishes it on "
                 f"{sorted(ee_pose_topics)}")
    for planner in system.nodes_running("task_node"):
        vlm = mapping_parameter(planner, "vlm")
        if "type" not in vlm:
            fail(f"node {planner.name!r}: parameter vlm needs a 'type' (openai, transformers, oracle, ...), got {vlm}")
        if vlm["type"] in ("oracle", "imperfect"):
            check_world(planner, vlm.get("world"))
            views = tuple(vlm.get("views", ("static", "wrist")))
            if views != system.views:
                fail(f"node {planner.name!r}: the oracle answers for views {list(views)}, the system has "
                     f"{list(system.views)}")
    if system.namespace:
        for node in system.nodes:
            for key, value in node.parameters.items():
                for name in (value if isinstance(value, (list, tuple)) else [value]):
                    if isinstance(name, str) and name.startswith(_OWN_PREFIXES):
                        fail(f"node {node.name!r}: parameter {key!r} names {name!r}, outside the system's namespace "
                             f"{system.namespace!r} (another robot's, in one graph); write it relative: "
                             f"{name.lstrip('/')!r}")
    names = [n.name for n in system.nodes]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        fail(f"node name(s) {duplicates} appear more than once")
