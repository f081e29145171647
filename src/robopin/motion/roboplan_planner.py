"""CPU backend: roboplan (C++ RRT-Connect and path shortcutting on pinocchio + coal).

roboplan keeps its own scene built from the same URDF; the self-collision pairs and locked gripper
come from :class:`~robopin.motion.robot.RobotModel` so both judge the robot alike, and the dense
verifier in the shared pipeline still checks every result with the robopin model. Obstacles are
inflated by ``padding_m`` (boxes grow, the cloud is dilated) unless the start or goal sits inside the
padding (grasp and place poses do), in which case the search runs on the true geometry.
"""

from __future__ import annotations

import collections
import hashlib

import numpy as np

from robopin.motion.errors import BackendUnavailableError
from robopin.motion.planner import MotionPlanner, RoboplanPlannerConfig
from robopin.motion.robot import RobotModel
from robopin.motion.types import PlanStatus

_GROUP = "arm"
_COLOR = np.array([0.8, 0.2, 0.2, 1.0])
_OCTREES_CACHED = 4  # a pick-and-place's two clouds (with and without the object) at two paddings


def _import_roboplan():
    try:
        from roboplan import core, rrt
    except ImportError as exc:  # pragma: no cover - only without the wheel
        raise BackendUnavailableError(f"the 'roboplan' planner needs roboplan==0.7.0: {exc}") from exc
    return core, rrt


class RoboplanPlanner(MotionPlanner):
    """roboplan RRT-Connect + shortcutting behind the robopin planner contract."""

    config_class = RoboplanPlannerConfig
    config: RoboplanPlannerConfig

    def __init__(self, config: RoboplanPlannerConfig, robot: RobotModel | None = None) -> None:
        super().__init__(config, robot)
        core, rrt = _import_roboplan()
        self._core, self._rrt = core, rrt
        spec = self.robot.spec
        description = core.loadUrdfSceneDescription(str(spec.resolve(spec.urdf)), [str(spec.resolve(spec.package_dir))])
        self._scene = core.Scene(spec.name, description)
        self._scene.addGroup(_GROUP, list(self.joint_names))
        scene_joints = self._scene.getJointNames()
        self._full_q = np.zeros(len(scene_joints))
        self._arm_index = [scene_joints.index(name) for name in self.joint_names]
        for name, value in spec.locked_joints.items():
            if name in scene_joints:
                self._full_q[scene_joints.index(name)] = value
        self._scene.setJointPositions(self._full_q)
        self._scene.setCollisions(self.robot.ignored_self_collision_links(), False)
        self._base_links = self.robot.static_links()
        self._obstacle_names: list[str] = []
        self._scene_state: tuple[int, float] | None = None
        self._octrees: collections.OrderedDict[tuple, object] = collections.OrderedDict()
        self._planner = rrt.RRT(self._scene, self._options(config.timeout_s))
        self.reseed()

    def reseed(self) -> None:
        super().reseed()
        self._planner.setRngSeed(self.config.seed)
        # The shortcutter takes its seed with its options only: a new one restarts its stream.
        self._shortcutter = self._core.PathShortcutter(
            self._scene,
            self._core.PathShortcuttingOptions(
                _GROUP, self.config.collision_check_step_rad, self.config.shortcut_iterations, self.config.seed
            ),
        )

    def _options(self, timeout_s: float):
        options = self._rrt.RRTOptions()
        options.group_name = _GROUP
        options.rrt_connect = True
        options.max_planning_time = float(timeout_s)
        options.max_connection_distance = self.config.max_connection_distance_rad
        options.collision_check_step_size = self.config.collision_check_step_rad
        return options

    def _sync_scene(self, padding_m: float) -> None:
        """Mirror the robopin world into the roboplan scene when it or the padding changed."""
        state = (self.world.version, padding_m, id(self.world))
        if state == self._scene_state:
            return
        core = self._core
        for name in self._obstacle_names:
            self._scene.removeGeometry(name)
        self._obstacle_names = []
        for box in self.world.boxes.values():
            name = f"world_{box.name}"
            size = np.asarray(box.size_m) + 2.0 * padding_m
            self._scene.addBoxGeometry(name, "universe", core.Box(*size), np.asfortranarray(box.T_base_box), _COLOR)
            self._obstacle_names.append(name)
        if self.world.points is not None and len(self.world.points):
            self._scene.addOcTreeGeometry(
                "world_point_cloud",
                "universe",
                self._octree(self.world.points, self.world.voxel_size_m, padding_m),
                np.eye(4, order="F"),
                _COLOR,
            )
            self._obstacle_names.append("world_point_cloud")
        if self.world.attached is not None:
            attached = self.world.attached
            spec = self.robot.spec
            # Like pinocchio, roboplan places geometry relative to the parent joint, not the named frame.
            T = np.asfortranarray(self.robot.T_joint_tcp() @ attached.T_ee_object)
            self._scene.addBoxGeometry("attached_object", spec.tcp_link, core.Box(*attached.size_m), T, _COLOR)
            self._obstacle_names.append("attached_object")
            for link in self.robot.hand_links():
                if link == spec.tcp_link:
                    continue  # roboplan counts geometry on a frame as part of that link's body already
                self._scene.setCollisions(link, "attached_object", False)
        world_obstacles = [name for name in self._obstacle_names if name != "attached_object"]
        for name in self._obstacle_names:
            for link in self._base_links:
                self._scene.setCollisions(link, name, False)
        # Obstacles touching each other (a box on the table) are not a robot collision. The held
        # object is not an obstacle here: it moves with the hand and must clear the world, or the
        # search plans through the world and the continuous check rejects every path it finds.
        for i, name in enumerate(world_obstacles):
            for other in world_obstacles[i + 1 :]:
                self._scene.setCollisions(name, other, False)
            if self.world.attached is not None:
                self._scene.setCollisions("attached_object", name, True)
        self._scene_state = state

    def _octree(self, points, voxel_size_m: float, padding_m: float):
        """roboplan's octree of ``points`` (dilated by ``padding_m``), cached by content.

        A pick-and-place searches the same cloud (or the same minus the picked object) in several
        worlds and at two paddings; building the octree is most of a scene sync.
        """
        import coal

        points = np.ascontiguousarray(points, dtype=np.float64)
        key = (hashlib.blake2b(points.tobytes(), digest_size=16).digest(), len(points), voxel_size_m, padding_m)
        octree = self._octrees.get(key)
        if octree is not None:
            self._octrees.move_to_end(key)
            return octree
        if padding_m > 0.0:
            # roboplan's octree takes the resolution, not per-box sizes: dilate the cloud instead.
            offsets = padding_m * np.vstack([np.zeros(3), np.eye(3), -np.eye(3)])
            points = (points[:, None, :] + offsets[None]).reshape(-1, 3)
        boxes = [np.asarray(b, dtype=np.float64) for b in coal.makeOctree(points, voxel_size_m).toBoxes()]
        octree = self._octrees[key] = self._core.OcTree(boxes, voxel_size_m)
        while len(self._octrees) > _OCTREES_CACHED:
            self._octrees.popitem(last=False)
        return octree

    def _full(self, q):
        full = self._full_q.copy()
        full[self._arm_index] = q
        return full

    def _solve_path(self, start, goal, timeout_s):
        # Search on the padded world unless an endpoint sits inside the padding.
        padded = not (self.robot.in_collision(start) or self.robot.in_collision(goal))
        self._sync_scene(self.config.padding_m if padded else 0.0)
        self._scene.setJointPositions(self._full(start))
        self._planner.setOptions(self._options(timeout_s))
        core = self._core
        names = list(self.joint_names)
        try:
            path = self._planner.plan(core.JointConfiguration(names, start), core.JointConfiguration(names, goal))
        except RuntimeError as exc:
            text = str(exc)
            status = PlanStatus.TIMEOUT if "time" in text.lower() else PlanStatus.NO_PATH
            return None, status, f"roboplan: {text}"
        path = self._shortcutter.shortcut(path)
        waypoints = np.asarray(path.positions, dtype=np.float64)
        if waypoints.ndim != 2 or len(waypoints) < 2:
            return None, PlanStatus.NO_PATH, "roboplan returned an empty path"
        waypoints[0], waypoints[-1] = start, goal
        return waypoints, PlanStatus.SUCCESS, ""
