"""Pick-and-place sequencing on both robots: every phase planned, verified and in order."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from robopin.motion import pick_place
from robopin.motion.grasps import grasp_candidates
from robopin.motion.pick_place import (
    BLOCKED_PLACE_STATUSES,
    STAGES,
    PickPlaceConfig,
    plan_pick_place,
    world_without_target,
)
from robopin.motion.problems import box_surface_points
from robopin.motion.types import PlanResult, PlanStatus
from robopin.motion.verify import sampled_check, verify_trajectory
from robopin.motion.world import CollisionWorld

from .conftest import ROBOTS, planner, top_down


def _scene() -> CollisionWorld:
    world = CollisionWorld()
    world.add_table(-0.002)
    T = np.eye(4)
    T[:3, 3] = [0.45, 0.12, 0.025]
    world.add_box("cube", (0.05, 0.05, 0.05), T)
    T = np.eye(4)
    T[:3, 3] = [0.40, -0.05, 0.10]
    world.add_box("post", (0.04, 0.04, 0.20), T)
    return world


@pytest.mark.parametrize("robot", ROBOTS)
def test_pick_and_place_plans_every_phase(robot):
    p = planner("roboplan", robot)
    world = _scene()
    p.update_world(world)
    plan = plan_pick_place(p, p.robot.home, [0.45, 0.12, 0.05], [0.35, -0.22, 0.0])
    assert plan.success, plan.message
    assert p.world is world  # the caller's world is restored
    stages = [phase.stage for phase in plan.phases]
    assert stages == ["approaching", "grasping", "lifting", "placing", "placing", "retreating"]
    assert set(stages) <= set(STAGES)
    # Phases chain: each starts where the previous ended.
    for before, after in zip(plan.phases, plan.phases[1:], strict=False):
        np.testing.assert_allclose(before.result.trajectory.positions[-1], after.result.trajectory.positions[0])
    grasp_tcp = p.robot.forward_kinematics(plan.phases[1].result.trajectory.positions[-1])
    assert np.linalg.norm(grasp_tcp[:3, 3] - [0.45, 0.12, 0.05 - 0.02]) < 3e-3
    place_tcp = p.robot.forward_kinematics(plan.phases[4].result.trajectory.positions[-1])
    assert place_tcp[2, 3] == pytest.approx(0.0 + 0.05 + 0.01 - 0.02, abs=3e-3)
    assert [phase.gripper_after_m for phase in plan.phases] == [0.08, 0.0, None, None, 0.08, None]
    # The approach is collision-free against the full world (the cube is only removed for the final
    # descent onto it), and every phase against the world it names, by the verifier and by an
    # independent dense sampler.
    assert plan.phases[0].world is world
    assert all(phase.world is not None for phase in plan.phases)
    assert plan.phases[1].world.boxes.keys() == world.boxes.keys() - {"cube"}
    assert all(phase.world.attached is not None for phase in plan.phases[2:5])
    for phase in plan.phases:
        p.robot.set_world(phase.world, padding_m=0.0)
        positions = phase.result.trajectory.positions
        assert verify_trajectory(p.robot, phase.result.trajectory).collision_free, phase.stage
        assert sampled_check(p.robot, positions, max_step_rad=0.005), phase.stage
    p.update_world(world)
    assert plan.planning_time_s > 0.0


def test_unreachable_place_fails_in_the_placing_stage():
    p = planner("roboplan", "panda")
    p.update_world(_scene())
    plan = plan_pick_place(p, p.robot.home, [0.45, 0.12, 0.05], [1.8, 0.0, 0.0])
    assert not plan.success
    assert plan.failed_stage == "placing"
    assert plan.status in {PlanStatus.IK_FAIL, PlanStatus.GOAL_IN_COLLISION}
    assert [phase.stage for phase in plan.phases] == ["approaching", "grasping", "lifting"]


def test_world_without_target_keeps_the_table_under_the_object():
    world = CollisionWorld()
    rng = np.random.default_rng(0)
    object_points = box_surface_points([0.4, 0.0, 0.03], (0.05, 0.05, 0.06), 500, rng)
    table_points = np.column_stack([rng.uniform(0.3, 0.5, 500), rng.uniform(-0.1, 0.1, 500), np.zeros(500)])
    world.set_point_cloud(np.vstack([object_points, table_points]), voxel_size_m=0.01)
    stripped = world_without_target(world, np.array([0.4, 0.0, 0.06]), 0.06, 0.06)
    assert np.all(stripped.points[:, 2] < 0.01)  # only table points are left near the object
    assert len(stripped.points) >= 500  # every table point (and the object's bottom face, on the table) stays
    with pytest.raises(ValueError, match="object_size_m"):
        PickPlaceConfig(object_size_m=(0.05, 0.05, 0.0))


@pytest.mark.parametrize("backend", ["roboplan", "ompl"])
@pytest.mark.parametrize("robot", ROBOTS)
def test_transport_search_keeps_the_held_object_clear_of_the_world(backend, robot, caplog):
    # Regression: roboplan's search disabled collisions between the held object and every world
    # obstacle (it was listed among the obstacles), so it carried the duck through the multi-view
    # toys and the continuous check rejected every path (collision_in_result while placing).
    plan = planner(backend, robot)
    world = CollisionWorld()
    world.add_table(-0.002)
    T_wall = np.eye(4)
    T_wall[:3, 3] = [0.45, 0.0, 0.08]
    world.add_box("wall", (0.04, 0.4, 0.16), T_wall)  # the hand clears its top, the held box does not
    T_ee_object = np.eye(4)
    T_ee_object[2, 3] = 0.06  # the TCP z points down: the box hangs below the fingers
    world.attach("held", (0.05, 0.05, 0.10), T_ee_object)
    plan.update_world(world)
    try:
        plan.robot.reseed(0)
        start = plan.robot.inverse_kinematics(top_down(0.33, 0.0, 0.22), plan.robot.home, restarts=50)
        assert start is not None
        with caplog.at_level(logging.WARNING, logger="robopin.motion.planner"):
            result = plan.plan_to_pose(start, top_down(0.58, 0.0, 0.22))
        assert result.success, result.message
        # The search itself must see the held object: no path the continuous check has to reject. OMPL
        # checks motions at a discrete resolution, so it can clip the wall's corner once in a while; the
        # continuous check rejects that path and the planner plans again, so for OMPL the success above
        # (and the dense check below) is the requirement.
        rejected = [r.getMessage() for r in caplog.records if "rejected its own result" in r.getMessage()]
        if backend == "roboplan":
            assert not rejected
        assert verify_trajectory(plan.robot, result.trajectory, tolerance_m=0.001).collision_free
    finally:
        plan.update_world(CollisionWorld())


def _rejections(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "rejected its own result" in r.getMessage()]


def test_a_grasp_whose_hand_would_touch_the_world_is_not_planned_first(caplog, monkeypatch):
    # Regression (#37): on sim layouts (multi_view seeds 7-10, long_horizon 4 and 6) the first grasp's
    # hand reached into a neighbour's cloud points, 8 cm beside the pick point (outside the radius
    # cleared around the object): the approach was searched, the straight descent ended in contact,
    # the dense check rejected it ("rejected its own result"), and the next grasp was planned anew.
    # Here a column of cloud points 8 cm beside the cube in y stands where the hand spans at yaw 0.
    p = planner("roboplan", "panda")
    world = _scene()
    world.remove("post")
    column = np.mgrid[0.43:0.47:0.005, 0.19:0.21:0.005, 0.0:0.10:0.005].reshape(3, -1).T
    world.set_point_cloud(column, voxel_size_m=0.01)
    pick, place = [0.45, 0.12, 0.05], [0.35, -0.22, 0.0]
    p.update_world(world)
    try:
        first = grasp_candidates(np.asarray(pick), PickPlaceConfig().grasp, support_height_m=0.0)[0]
        free = world_without_target(world, np.asarray(pick), 0.06, 0.05)
        p.update_world(free)
        q = p.robot.inverse_kinematics(first.T_base_grasp, p.robot.home, collision_free=False)
        assert q is not None and p.robot.hand_world_contacts(q, margin_m=0.0)  # the first grasp is blocked
        p.update_world(world)
        # Without the look-ahead this layout plans the blocked grasp first and rejects its descent.
        with monkeypatch.context() as patched, caplog.at_level(logging.WARNING, logger="robopin.motion.planner"):
            patched.setattr(pick_place, "_hand_blocked", lambda *args: False)
            assert plan_pick_place(p, p.robot.home, pick, place).success
        assert _rejections(caplog)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="robopin.motion.planner"):
            plan = plan_pick_place(p, p.robot.home, pick, place)
        assert plan.success, plan.message
        assert not _rejections(caplog)  # every phase's first result passed the dense check
        assert plan.grasp.yaw_rad != pytest.approx(first.yaw_rad)
        for phase in plan.phases:  # and every returned trajectory was still checked densely
            p.robot.set_world(phase.world, padding_m=0.0)
            assert verify_trajectory(p.robot, phase.result.trajectory).collision_free, phase.stage
    finally:
        p.update_world(CollisionWorld())


def test_a_place_pose_whose_hand_would_touch_the_world_is_not_planned_first(caplog, monkeypatch):
    # The place side of the look-ahead above: on a plate already holding an object (a later step of a
    # long-horizon task), the first place pose's hand reached the neighbour's cloud points; the transport
    # was searched, the straight lowering ended in contact, the dense check rejected it, and the next place
    # pose's transport was searched anew. Here a column of cloud points stands 8 cm beside the place point
    # in y, where the hand spans at the held yaw.
    p = planner("roboplan", "panda")
    world = _scene()
    world.remove("post")
    column = np.mgrid[0.33:0.37:0.005, -0.15:-0.13:0.005, 0.0:0.10:0.005].reshape(3, -1).T
    world.set_point_cloud(column, voxel_size_m=0.01)
    pick, place = [0.45, 0.12, 0.05], [0.35, -0.22, 0.0]
    p.update_world(world)
    try:
        with monkeypatch.context() as patched, caplog.at_level(logging.WARNING, logger="robopin.motion.planner"):
            patched.setattr(pick_place, "_hand_blocked", lambda *args: False)
            unordered = plan_pick_place(p, p.robot.home, pick, place)
        assert unordered.success, unordered.message
        assert _rejections(caplog)  # without the look-ahead the first place pose's lowering is rejected
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="robopin.motion.planner"):
            plan = plan_pick_place(p, p.robot.home, pick, place)
        assert plan.success, plan.message
        assert not _rejections(caplog)  # every phase's first result passed the dense check
        held_yaw = plan.grasp.yaw_rad
        place_tcp = p.robot.forward_kinematics(plan.phases[4].result.trajectory.positions[-1])
        placed_yaw = np.arctan2(place_tcp[1, 0], place_tcp[0, 0])
        assert not np.isclose(np.cos(placed_yaw - held_yaw), 1.0, atol=1e-3)  # not the held yaw: it was blocked
        for phase in plan.phases:  # and every returned trajectory was still checked densely
            p.robot.set_world(phase.world, padding_m=0.0)
            assert verify_trajectory(p.robot, phase.result.trajectory).collision_free, phase.stage
    finally:
        p.update_world(CollisionWorld())


def test_grasp_clamps_to_the_world_table_when_no_height_is_given():
    # The support surface comes from the planner's table box; a pick point 0.5 mm under the table
    # (the xArm long-horizon `workspace` refusal) still grasps above it.
    from robopin.motion.grasps import GraspConfig
    from robopin.motion.pick_place import support_height

    world = CollisionWorld()
    world.add_table(-0.002)
    assert support_height(world, None) == pytest.approx(-0.002)
    assert support_height(world, 0.01) == pytest.approx(0.01)
    assert support_height(CollisionWorld(), None) is None
    plan = planner("roboplan", "xarm6")
    plan.update_world(world)
    try:
        result = plan_pick_place(plan, plan.robot.home, [0.45, -0.1, -0.0005], [0.45, 0.15, 0.0], PickPlaceConfig())
        assert result.success, result.message
        assert result.grasp.T_base_grasp[2, 3] >= -0.002 + GraspConfig().min_tcp_height_m - 1e-9
        for phase in result.phases:
            tcp_z = [plan.robot.forward_kinematics(q)[2, 3] for q in phase.result.trajectory.positions]
            assert min(tcp_z) >= 0.0, (phase.stage, min(tcp_z))
    finally:
        plan.update_world(CollisionWorld())


class _LiftCeiling:
    """A real planner whose straight-line moves above ``xy`` fail above ``ceiling_z`` (as IK does near the
    edge of the workspace): a reach limit at a chosen height; everything else is the real planner."""

    def __init__(self, inner, xy, ceiling_z: float) -> None:
        self._inner, self.xy, self.ceiling_z, self.lift_goals = inner, np.asarray(xy), ceiling_z, []

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def plan_linear(self, q_start, T_goal, **kwargs):
        from robopin.motion.types import PlanResult

        if np.linalg.norm(T_goal[:2, 3] - self.xy) > 0.02:
            return self._inner.plan_linear(q_start, T_goal, **kwargs)
        self.lift_goals.append(float(T_goal[2, 3]))
        if T_goal[2, 3] > self.ceiling_z:
            return PlanResult(PlanStatus.IK_FAIL, 0.0, message="straight line breaks (test ceiling)")
        return self._inner.plan_linear(q_start, T_goal, **kwargs)


def test_lift_goes_as_high_as_the_arm_reaches_straight_up():
    # Grasp TCP at 0.03 m; a full lift (0.12 m) ends at 0.15 m, 60 % at 0.102 m: the ceiling at 0.12 m
    # lets only the lower lift through, and the transport from there still plans and clears the world.
    real = planner("roboplan", "panda")
    world = _scene()
    real.update_world(world)
    p = _LiftCeiling(real, (0.45, 0.12), ceiling_z=0.12)
    plan = plan_pick_place(p, real.robot.home, [0.45, 0.12, 0.05], [0.35, -0.22, 0.0])
    assert plan.success, plan.message
    lift_tcp = real.robot.forward_kinematics(plan.phases[2].result.trajectory.positions[-1])
    assert lift_tcp[2, 3] == pytest.approx(0.03 + 0.6 * 0.12, abs=3e-3)
    assert any(z == pytest.approx(0.15, abs=1e-6) for z in p.lift_goals), "the full lift is tried first"
    real.update_world(world)
    assert verify_trajectory(real.robot, plan.phases[3].result.trajectory).collision_free
    # Below a third of the lift height it is a lifting failure, named.
    low = _LiftCeiling(real, (0.45, 0.12), ceiling_z=0.05)
    failed = plan_pick_place(low, real.robot.home, [0.45, 0.12, 0.05], [0.35, -0.22, 0.0])
    assert not failed.success and failed.failed_stage == "lifting", failed.message


def _plate_world(neighbours: list[tuple[float, float]], rng_seed: int = 0) -> CollisionWorld:
    """A table, a plate's top (cloud, 1.2 cm up, radius 9 cm at (0.45, 0.15)) and cubes standing on it."""
    rng = np.random.default_rng(rng_seed)
    world = CollisionWorld()
    world.add_table(0.0)
    radius = 0.09 * np.sqrt(rng.uniform(0, 1, 4000))
    angle = rng.uniform(0, 2 * np.pi, 4000)
    plate = np.column_stack([0.45 + radius * np.cos(angle), 0.15 + radius * np.sin(angle), np.full(4000, 0.012)])
    parts = [plate]
    for x, y in neighbours:
        parts.append(box_surface_points([x, y, 0.012 + 0.025], (0.05, 0.05, 0.05), 800, rng))
    world.set_point_cloud(np.vstack(parts), voxel_size_m=0.01)
    return world


def test_nearby_place_points_make_room_on_the_same_surface():
    from robopin.motion.pick_place import nearby_place_points

    world = _plate_world([(0.39, 0.15)])  # a cube 6 cm to the -x side of the requested point
    place = np.array([0.45, 0.15, 0.012])
    config = PickPlaceConfig()
    points = nearby_place_points(world, place, config, support_height_m=0.0)
    assert 1 <= len(points) <= config.place_search_points
    for point in points:
        assert point[2] == pytest.approx(0.012)
        assert 0.0 < np.linalg.norm(point[:2] - place[:2]) <= config.place_search_radius_m + 1e-9
        assert point[0] > place[0]  # away from the cube
    assert points[0][0] == pytest.approx(0.47)  # most room first: straight away from it, 2 cm
    # Near the plate's rim the surface ends: no point whose centre would leave what the cameras saw of it.
    rim = np.array([0.45, 0.15 + 0.08, 0.012])
    beside_rim = _plate_world([(0.45 - 0.06, 0.15 + 0.08)])  # a cube 6 cm to the -x side, past the rim
    beside = nearby_place_points(beside_rim, rim, config, support_height_m=0.0)
    assert beside, "room along the rim"
    for point in beside:  # along the rim, away from the cube, never outward over it
        assert point[0] > rim[0] and point[1] <= rim[1] + 1e-9
        assert np.linalg.norm(point[:2] - [0.45, 0.15]) <= 0.0825 + 1e-6
    # Without surface points beyond (a place point near the rim of a plate only) nothing moves outward.
    assert all(p[1] <= rim[1] + 1e-9 for p in nearby_place_points(_plate_world([(0.45, 0.17)]), rim, config, 0.0))
    # Nothing standing near, no cloud, or a zero radius: the point never moves.
    assert nearby_place_points(_plate_world([]), place, config, 0.0) == []
    assert nearby_place_points(CollisionWorld(), place, config, 0.0) == []
    assert nearby_place_points(world, place, PickPlaceConfig(place_search_radius_m=0.0), 0.0) == []
    with pytest.raises(ValueError, match="place_search_radius_m"):
        PickPlaceConfig(place_search_radius_m=-0.01)


@pytest.mark.parametrize("robot", ROBOTS)
def test_blocked_place_point_moves_beside_it_on_the_plate(robot):
    # Two cubes on the plate leave the requested spot 5.6 cm between their centres' line and it: no
    # place pose there is collision-free; 2 cm to the free side there is room.
    p = planner("roboplan", robot)
    world = _plate_world([(0.45 - 0.056, 0.15), (0.45, 0.15 + 0.056)])
    T = np.eye(4)
    T[:3, 3] = [0.42, -0.12, 0.025]
    world.add_box("cube", (0.045, 0.045, 0.045), T)
    p.update_world(world)
    try:
        pick, place = [0.42, -0.12, 0.045], [0.45, 0.15, 0.012]
        fixed = plan_pick_place(p, p.robot.home, pick, place, PickPlaceConfig(place_search_radius_m=0.0))
        assert not fixed.success and fixed.failed_stage == "placing", fixed.message
        assert fixed.status in BLOCKED_PLACE_STATUSES, fixed.message
        moved = plan_pick_place(p, p.robot.home, pick, place, PickPlaceConfig())
        assert moved.success, moved.message
        assert 0.0 < moved.place_offset_m <= 0.02 + 1e-9
        assert moved.place_point[0] > 0.45 and moved.place_point[1] < 0.15  # away from both cubes
        assert "place point moved" in moved.message
        place_tcp = p.robot.forward_kinematics(moved.phases[4].result.trajectory.positions[-1])
        np.testing.assert_allclose(place_tcp[:2, 3], moved.place_point[:2], atol=3e-3)
    finally:
        p.update_world(CollisionWorld())


def test_a_place_pose_whose_straight_retreat_breaks_is_passed_over(monkeypatch):
    # A Panda place configuration measured in a trial (a cube set down beside a duck on a plate): from it the
    # chained IK of the straight 10 cm rise drifts toward a singular posture and breaks in its last centimetre.
    p = planner("roboplan", "panda")
    q_place = np.array([0.699, 0.422, -0.717, -2.554, 0.824, 2.765, 0.366])
    T_up = p.robot.forward_kinematics(q_place)
    T_up[2, 3] += 0.10
    p.update_world(CollisionWorld())
    rise = p.plan_linear(q_place, T_up)
    assert rise.status is PlanStatus.IK_FAIL, rise.message
    # A place pose whose retreat breaks so is passed over for the next one at the same point.
    broken: list[np.ndarray] = []
    linear = pick_place._Request.linear

    def first_retreat_breaks(self, world, q, T):
        retreating = world.attached is None and T[2, 3] > self.planner.robot.forward_kinematics(q)[2, 3] + 0.05
        if retreating and not broken:
            broken.append(np.array(q))
            return PlanResult(PlanStatus.IK_FAIL, 0.0, message=rise.message)
        return linear(self, world, q, T)

    monkeypatch.setattr(pick_place._Request, "linear", first_retreat_breaks)
    world = _scene()
    world.remove("post")
    p.update_world(world)
    try:
        plan = plan_pick_place(p, p.robot.home, [0.45, 0.12, 0.05], [0.35, -0.22, 0.0])
    finally:
        p.update_world(CollisionWorld())
    assert broken and plan.success, plan.message
    assert [phase.stage for phase in plan.phases][-1] == "retreating"
    assert not np.allclose(plan.phases[-1].result.trajectory.positions[0], broken[0])  # placed in another pose
