"""The shipped cuRobo robot configs read by cuRobo v0.7.8's own rules, held against robopin's pinocchio
model and mesh checker (no GPU, no cuRobo: the robot YAML is the contract)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import yaml

from robopin.motion.curobo import planner as curobo_planner
from robopin.motion.curobo.config import CuroboPlannerConfig
from robopin.motion.curobo.conversions import status_from_curobo, tcp_goal_to_link_goal
from robopin.motion.curobo.planner import time_dilation_for
from robopin.motion.curobo.robot_config import (
    CuroboKinematics,
    check_robot_config,
    prepare_robot_config,
    read_urdf_tree,
)
from robopin.motion.curobo.spheres import (
    OVERHANGS_M,
    link_placements,
    load_robot_config,
    robot_config_path,
    surface_samples,
)
from robopin.motion.errors import MotionConfigError
from robopin.motion.planner import make_planner, planner_config_from_dict
from robopin.motion.types import PlanStatus

from .conftest import robot_model

ROBOTS = ("panda", "fr3", "xarm6")
# A self-collision this deep (hull penetration) must be reported by the spheres; shallower ones may be
# missed by cuRobo and are caught by robopin's mesh check of every trajectory.
DEEP_M = 0.02
REPO = Path(__file__).resolve().parents[2]


def _kinematics(robot: str) -> dict:
    return copy.deepcopy(load_robot_config(robot)["robot_cfg"]["kinematics"])


def _urdf(robot: str) -> Path:
    model = robot_model(robot)
    return model.spec.resolve(_kinematics(robot)["urdf_path"])


@pytest.mark.parametrize("robot", ROBOTS)
def test_shipped_config_loads_by_curobos_rules(robot):
    kinematics = _kinematics(robot)
    check_robot_config(kinematics, _urdf(robot))
    joints = read_urdf_tree(_urdf(robot)).joints
    for name in kinematics["lock_joints"]:
        assert joints[name].mimic_of is None  # cuRobo knows a mimic joint only by its leader's name
    # Every gripper joint robopin holds still is either locked or the mimic of a locked one.
    held = set(robot_model(robot).spec.locked_joints)
    covered = {
        n for n, j in joints.items() if n in kinematics["lock_joints"] or j.mimic_of in kinematics["lock_joints"]
    }
    assert held <= covered


def test_locking_a_mimic_joint_is_refused_by_name():
    kinematics = _kinematics("xarm6")
    kinematics["lock_joints"]["left_finger_joint"] = 0.0
    with pytest.raises(MotionConfigError, match=r"mimic joint .left_finger_joint.*.drive_joint."):
        check_robot_config(kinematics, _urdf("xarm6"))


def test_attached_object_away_from_the_ee_link_is_refused():
    kinematics = _kinematics("xarm6")
    kinematics["extra_links"]["attached_object"]["fixed_transform"] = [0.0, 0.0, 0.172, 1.0, 0.0, 0.0, 0.0]
    with pytest.raises(MotionConfigError, match="attached_object"):
        check_robot_config(kinematics, _urdf("xarm6"))


def test_misspelled_ignore_entry_is_refused():
    kinematics = _kinematics("panda")
    kinematics["self_collision_ignore"]["panda_link1"] = ["panda_link_2"]
    with pytest.raises(MotionConfigError, match="panda_link_2"):
        check_robot_config(kinematics, _urdf("panda"))


@pytest.mark.parametrize("robot", ROBOTS)
def test_spheres_in_link_frames_cover_each_collision_mesh(robot):
    """Spheres placed the way cuRobo places them (URDF-chain FK, link frames) cover the meshes as
    pinocchio places them, at the home pose and random poses."""
    model = robot_model(robot)
    kin = CuroboKinematics(_kinematics(robot), _urdf(robot))
    meshes = model.link_meshes()
    rng = np.random.default_rng(3)
    for q in [model.home, *rng.uniform(model.lower, model.upper, size=(2, model.dof))]:
        placed = kin.world_spheres(q)
        frames = model.geometry_frames(q)
        for name, (vertices, triangles) in meshes.items():
            link = name.rsplit("_", 1)[0]
            T = frames[name]
            samples = surface_samples(vertices, triangles, 1500, seed=11) @ T[:3, :3].T + T[:3, 3]
            centers, radii = placed[link]
            gaps = np.min(np.linalg.norm(samples[:, None] - centers[None], axis=2) - radii[None], axis=1)
            assert np.mean(gaps > 0.002) < 0.002, (robot, link, float(np.mean(gaps > 0.002)))
            assert gaps.max() < 0.004, (robot, link, float(gaps.max()))


class _Hulls:
    """Each collision mesh's convex hull as coal builds it from the vertices (qhull), placed by pinocchio:
    the exact geometry robopin's mesh check holds the robot to, measured pair by pair."""

    def __init__(self, model) -> None:
        import coal

        self.model = model
        self.links = {}
        for name, (vertices, _) in model.link_meshes().items():
            points = coal.StdVec_Vec3s()
            for v in vertices:
                points.append(np.asarray(v, dtype=np.float64))
            self.links.setdefault(name.rsplit("_", 1)[0], []).append((name, coal.Convex.convexHull(points, False, "")))

    def distances(self, q, pairs) -> dict[frozenset, float]:
        """Signed distance (negative: penetration depth) of each link pair's hulls at ``q``."""
        import coal

        frames = self.model.geometry_frames(q)
        placed = {
            link: [(g, coal.Transform3s(frames[n][:3, :3], frames[n][:3, 3])) for n, g in parts]
            for link, parts in self.links.items()
        }
        result = {}
        for pair in pairs:
            a, b = sorted(pair)
            best = np.inf
            for ga, Ta in placed[a]:
                for gb, Tb in placed[b]:
                    best = min(best, coal.distance(ga, Ta, gb, Tb, coal.DistanceRequest(), coal.DistanceResult()))
            result[frozenset(pair)] = best
        return result


def _link_pairs(kinematics) -> tuple[list[frozenset], set[frozenset]]:
    """Every pair of sphere-carrying links, and those cuRobo checks (not in self_collision_ignore)."""
    links = [link for link in kinematics["collision_link_names"] if kinematics["collision_spheres"].get(link)]
    ignored = {frozenset((a, b)) for a, values in kinematics["self_collision_ignore"].items() for b in values}
    pairs = [frozenset((a, b)) for i, a in enumerate(links) for b in links[i + 1 :]]
    return pairs, {p for p in pairs if p not in ignored}


@pytest.mark.parametrize("robot", ROBOTS)
def test_self_collision_spheres_lie_inside_each_links_hull(robot):
    """cuRobo adds ``self_collision_buffer`` to every sphere's radius for self-collision
    (cuda_robot_generator.py): shrunk by it, each sphere lies inside its link's convex hull, so two
    links' spheres can overlap only where their hulls do. Unshrunk, no sphere reaches farther out of
    the hull than the buffer's size (the world sees that much padding at most)."""
    from scipy.spatial import ConvexHull

    model = robot_model(robot)
    kinematics = _kinematics(robot)
    kin = CuroboKinematics(kinematics, _urdf(robot))
    buffers = kinematics["self_collision_buffer"]
    frames = model.geometry_frames(model.home)
    placed = kin.world_spheres(model.home)
    hulls: dict[str, list] = {}
    for name, (vertices, _) in model.link_meshes().items():
        T = frames[name]
        hulls.setdefault(name.rsplit("_", 1)[0], []).append(ConvexHull(vertices @ T[:3, :3].T + T[:3, 3]).equations)
    worst = {}
    for link, (centers, radii) in placed.items():
        shrink = -float(buffers[link])
        assert 0.0 < shrink <= max(OVERHANGS_M) + 0.0002, (link, shrink)  # 0.2 mm for the 4-decimal rounding
        # Depth inside the hull (of the link's meshes) that holds each centre; negative: outside every hull.
        depth = np.max([-np.max(centers @ eq[:, :3].T + eq[:, 3], axis=1) for eq in hulls[link]], axis=0)
        assert np.all(radii - shrink <= depth + 1e-9), (link, float(np.max(radii - shrink - depth)))
        assert np.all(radii - depth <= shrink + 1e-9), (link, float(np.max(radii - depth)))
        worst[link] = round(shrink, 4)
    print(f"{robot}: self-collision shrink (= largest overhang out of the hull) per link, m: {worst}")


@pytest.mark.parametrize("robot", ROBOTS)
def test_curobo_checks_every_pair_the_mesh_check_can_tell_apart(robot):
    """cuRobo checks a link pair unless robopin's exact mesh check cannot judge it either: the links
    move rigidly together (the locked hand), sit on adjacent joints, or touch at home. Measured on the
    hulls and the kinematic tree, not read from the generator."""
    model = robot_model(robot)
    kinematics = _kinematics(robot)
    pairs, checked = _link_pairs(kinematics)
    joint = {link: j for link, (j, _) in link_placements(model).items()}  # the hand hangs off the last joint
    at_home = _Hulls(model).distances(model.home, pairs)
    rigid = {p for p in pairs if len({joint[link] for link in p}) == 1}
    adjacent = {p for p in pairs if p not in rigid and abs(joint[min(p)] - joint[max(p)]) == 1}
    touching = {p for p in pairs if at_home[p] <= 0.0} - rigid - adjacent
    must = set(pairs) - rigid - adjacent - touching
    assert must - checked == set(), sorted(tuple(sorted(p)) for p in must - checked)
    print(
        f"{robot}: cuRobo checks {len(checked)} of {len(pairs)} link pairs; not checked: {len(rigid)} rigid "
        f"(locked hand), {len(adjacent)} on adjacent joints, {len(touching)} touching at home"
    )
    # cuRobo's fast self-collision kernel takes at most 32 * 512 sphere pairs
    # (cuda_robot_generator.py _create_self_collision_thread_data); more falls back to a slower one.
    spheres = kinematics["collision_spheres"]
    sphere_pairs = sum(len(spheres[a]) * len(spheres[b]) for a, b in (sorted(p) for p in checked))
    print(f"{robot}: {sphere_pairs} sphere pairs checked, {sum(len(v) for v in spheres.values())} spheres")
    assert sphere_pairs <= 32 * 512


@pytest.mark.parametrize("robot", ROBOTS)
def test_no_self_collision_reports_where_the_mesh_checker_sees_none(robot):
    model = robot_model(robot)
    kin = CuroboKinematics(_kinematics(robot), _urdf(robot))
    rng = np.random.default_rng(2024)  # not the generator's seed
    free = 0
    reports = []
    while free < 300:
        q = rng.uniform(model.lower, model.upper)
        if model.in_collision(q, margin_m=0.0):
            continue
        free += 1
        hits = kin.self_collisions(q)
        if hits:
            reports.append((np.round(q, 3).tolist(), hits))
    assert not kin.self_collisions(model.home)
    assert reports == []


@pytest.mark.parametrize("robot", ROBOTS)
def test_real_self_collisions_are_reported_by_the_spheres(robot):
    """Poses where robopin's mesh check finds the hulls of a pair cuRobo checks intersecting: the
    sphere model reports the deep ones, and only pairs whose hulls really intersect."""
    model = robot_model(robot)
    kinematics = _kinematics(robot)
    kin = CuroboKinematics(kinematics, _urdf(robot))
    _, checked = _link_pairs(kinematics)
    hulls = _Hulls(model)
    rng = np.random.default_rng(77)
    colliding = reported = 0
    missed = []
    while colliding < 40:
        q = rng.uniform(model.lower, model.upper)
        if not model.in_collision(q, margin_m=0.0):
            continue
        distances = hulls.distances(q, checked)
        depth = -min(distances.values())
        if depth <= 0.0:
            continue  # a pair only the mesh check looks at (or the table)
        colliding += 1
        hits = {frozenset(h) for h in kin.self_collisions(q)}
        assert all(distances[h] < 0.0 for h in hits), [tuple(h) for h in hits if distances[h] >= 0.0]
        if hits:
            reported += 1
        else:
            missed.append(round(depth, 4))
    print(f"{robot}: {reported} of {colliding} self-colliding poses reported; penetration of those missed, m: {missed}")
    assert all(depth < DEEP_M for depth in missed), missed
    assert reported >= 0.6 * colliding


@pytest.mark.parametrize("robot", ROBOTS)
def test_goal_link_pose_times_tool_offset_is_robopins_tcp(robot, tmp_path):
    model = robot_model(robot)
    prepared = prepare_robot_config(robot_config_path(robot), model, work_dir=tmp_path)
    # cuRobo's reading of the prepared config (the URDF it will load), not pinocchio's.
    kin = CuroboKinematics(prepared.robot_cfg["kinematics"], prepared.urdf_path)
    rng = np.random.default_rng(5)
    for q in [model.home, *rng.uniform(model.lower, model.upper, size=(10, model.dof))]:
        T_tcp = model.forward_kinematics(q)
        T_ee = kin.link_poses(q, [prepared.ee_link])[prepared.ee_link]
        np.testing.assert_allclose(T_ee @ prepared.T_ee_tcp, T_tcp, atol=1e-6)
        np.testing.assert_allclose(tcp_goal_to_link_goal(T_tcp, prepared.T_ee_tcp), T_ee, atol=1e-6)
    if robot == "xarm6":
        np.testing.assert_allclose(prepared.T_ee_tcp[:3, 3], [0.0, 0.0, 0.172], atol=1e-9)


def test_a_hand_link_goal_gets_the_grasp_target_offset(tmp_path):
    """cuRobo's own franka.yml plans panda_hand; a config with that ee_link gets the 0.105 m to the
    grasp target instead of sending the grasp pose as the hand pose."""
    model = robot_model("panda")
    document = load_robot_config("panda")
    kinematics = document["robot_cfg"]["kinematics"]
    kinematics["ee_link"] = "panda_hand"
    kinematics["extra_links"]["attached_object"]["parent_link_name"] = "panda_hand"
    path = tmp_path / "hand.yml"
    path.write_text(yaml.safe_dump(document))
    prepared = prepare_robot_config(path, model, work_dir=tmp_path)
    assert np.linalg.norm(prepared.T_ee_tcp[:3, 3]) == pytest.approx(0.105, abs=1e-6)


def test_fr3_plans_inside_its_own_limits(tmp_path):
    """cuRobo reads limits from the URDF: the one it loads carries FR3's (stricter than the Panda URDF's)."""
    model = robot_model("fr3")
    prepared = prepare_robot_config(robot_config_path("fr3"), model, work_dir=tmp_path)
    joints = read_urdf_tree(prepared.urdf_path).joints
    for name, lower, upper in zip(model.joint_names, model.lower, model.upper, strict=True):
        assert (joints[name].lower, joints[name].upper) == pytest.approx((lower, upper))
    assert joints["panda_joint6"].lower > 0.4  # FR3 datasheet: 0.4398 rad (the Panda URDF: -0.0873)


def test_velocity_scale_becomes_curobos_time_dilation():
    config = CuroboPlannerConfig(robot="panda")
    assert time_dilation_for(config, None) == 0.5
    assert time_dilation_for(config, 0.2) == 0.2
    with pytest.raises(MotionConfigError, match="velocity_scale"):
        time_dilation_for(config, 1.5)


def test_invalid_query_is_not_reported_as_no_path():
    assert status_from_curobo("MotionGenStatus.INVALID_QUERY", False) is PlanStatus.START_IN_COLLISION


@pytest.mark.parametrize("system", ["real_franka", "real_xarm6"])
def test_real_system_planner_builds_until_the_curobo_import_which_is_mocked(system, monkeypatch):
    """The motion planner node's planner config of each real system file, built as the node builds it:
    everything but cuRobo itself (the mocked edge: its import) is real."""
    nodes = yaml.safe_load((REPO / "config" / f"{system}.yaml").read_text())["nodes"]
    parameters = nodes["motion_planner_node"]["parameters"]
    values = dict(parameters["planner"])
    values["robot"] = parameters["robot"]
    config = planner_config_from_dict(values)
    assert isinstance(config, CuroboPlannerConfig)
    prepared = []

    class _ReachedCuroboImportError(Exception):
        pass

    def mocked_import():
        raise _ReachedCuroboImportError

    original = curobo_planner.prepare_robot_config

    def recording(*args, **kwargs):
        prepared.append(original(*args, **kwargs))
        return prepared[-1]

    monkeypatch.setattr(curobo_planner, "_import_curobo", mocked_import)
    monkeypatch.setattr(curobo_planner, "prepare_robot_config", recording)
    with pytest.raises(_ReachedCuroboImportError):
        make_planner(config, robot_model(config.robot))  # the shared model only saves the load time
    assert len(prepared) == 1 and prepared[0].robot_cfg["kinematics"]["cspace"]["joint_names"]


class _Recorder:
    """Stands in for cuRobo's classes (the mocked edge): records what the planner hands cuRobo."""

    calls: ClassVar[list] = []

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs
        _Recorder.calls.append((type(self).__name__, args, kwargs))


def _mocked_curobo(plan_status: str):
    import types

    class MotionGenPlanConfig(_Recorder):
        pass

    class Pose(_Recorder):
        pass

    class Cuboid(_Recorder):
        pass

    class WorldConfig:
        @staticmethod
        def from_dict(mapping):
            _Recorder.calls.append(("WorldConfig.from_dict", (mapping,), {}))
            return mapping

    class JointState:
        @staticmethod
        def from_position(position, joint_names):
            return ("joint_state", position, tuple(joint_names))

    class Result:
        success = None
        status = types.SimpleNamespace(name=plan_status)

    class MotionGen:
        def __init__(self, config):
            cspace = config.kwargs["robot_cfg"]["kinematics"]["cspace"]
            self.kinematics = types.SimpleNamespace(joint_names=list(cspace["joint_names"]))

        def clear_world_cache(self):
            _Recorder.calls.append(("clear_world_cache", (), {}))

        def update_world(self, world):
            _Recorder.calls.append(("update_world", (world,), {}))

        def plan_single(self, start, goal, plan_config):
            _Recorder.calls.append(("plan_single", (start, goal, plan_config), {}))
            return Result()

    class MotionGenConfig:
        @staticmethod
        def load_from_robot_config(robot_cfg, world, tensor_args, **kwargs):
            return types.SimpleNamespace(kwargs={"robot_cfg": robot_cfg, **kwargs})

    class TensorDeviceType:
        def __init__(self, device):
            self.device = device

        @staticmethod
        def to_device(array):
            return np.asarray(array)

    torch = types.SimpleNamespace(device=lambda name: name)
    return {
        "torch": torch,
        "CollisionCheckerType": {"PRIMITIVE": "PRIMITIVE", "MESH": "MESH", "VOXEL": "VOXEL", "BLOX": "BLOX"},
        "Cuboid": Cuboid,
        "WorldConfig": WorldConfig,
        "TensorDeviceType": TensorDeviceType,
        "Pose": Pose,
        "JointState": JointState,
        "MotionGen": MotionGen,
        "MotionGenConfig": MotionGenConfig,
        "MotionGenPlanConfig": MotionGenPlanConfig,
    }


def test_planner_wiring_with_curobo_mocked_clears_the_world_scales_speed_and_sends_the_ee_goal(monkeypatch):
    from robopin.motion.problems import make_world

    from .conftest import top_down

    monkeypatch.setattr(curobo_planner, "_import_curobo", lambda: _mocked_curobo("INVALID_QUERY"))
    _Recorder.calls.clear()
    model = robot_model("xarm6")
    planner = make_planner(CuroboPlannerConfig(robot="xarm6", warmup_on_start=False), model)
    planner.update_world(make_world("box_wall"))
    planner.update_world(make_world("box_wall").__class__())  # an empty world: the old boxes must go
    names = [name for name, *_ in _Recorder.calls]
    updates = [k for k, name in enumerate(names) if name == "update_world"]
    assert len(updates) == 2 and all(names[k - 2] == "clear_world_cache" for k in updates)
    start = model.inverse_kinematics(top_down(0.35, -0.2, 0.2), model.home, restarts=30)
    goal = top_down(0.35, 0.2, 0.2)
    result = planner.plan_to_pose(start, goal, velocity_scale=0.3)
    assert result.status is PlanStatus.START_IN_COLLISION and "INVALID_QUERY" in result.message
    _, (_, pose, plan_config), _ = next(c for c in _Recorder.calls if c[0] == "plan_single")
    assert plan_config.kwargs["time_dilation_factor"] == 0.3
    # cuRobo gets link6 0.172 m behind the TCP goal (the TCP points down, so the flange is above it).
    np.testing.assert_allclose(pose.kwargs["position"][0], [0.35, 0.2, 0.2 + 0.172], atol=1e-6)
