"""A fixed set of tabletop planning problems shared by the benchmark, the GPU check and the tests.

Three worlds per robot — free space over a table, a box wall to reach over, and point-cloud clutter
(surface points of random boxes, seeded) — each with the same start/goal TCP pose pairs on either
side of the obstacles. Everything is deterministic, so numbers from different machines and backends
compare.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from robopin.motion.grasps import top_down_rotation
from robopin.motion.world import CollisionWorld

WORLDS = ("free", "box_wall", "cloud_clutter")


@dataclass
class PlanningProblem:
    """Start TCP pose and goal TCP pose in one world (start joints are found by IK at run time)."""

    name: str
    world_name: str
    world: CollisionWorld
    T_base_start: NDArray[np.float64]
    T_base_goal: NDArray[np.float64]


def _pose(x: float, y: float, z: float, yaw: float = 0.0) -> NDArray[np.float64]:
    T = np.eye(4)
    T[:3, :3] = top_down_rotation(yaw)
    T[:3, 3] = [x, y, z]
    return T


def box_surface_points(center, size, count: int, rng: np.random.Generator) -> NDArray[np.float64]:
    """``count`` points on the surface of an axis-aligned box (what a depth camera would see, and more)."""
    center, half = np.asarray(center, dtype=np.float64), np.asarray(size, dtype=np.float64) / 2.0
    points = rng.uniform(-1.0, 1.0, size=(count, 3))
    axis = rng.integers(0, 3, size=count)
    points[np.arange(count), axis] = np.sign(points[np.arange(count), axis])
    return center + points * half


def make_world(kind: str, *, seed: int = 0) -> CollisionWorld:
    """One of :data:`WORLDS`; the table top is at z = 0 (the robot base height)."""
    world = CollisionWorld()
    world.add_table(-0.002)
    if kind == "free":
        return world
    if kind == "box_wall":
        T = np.eye(4)
        T[:3, 3] = [0.45, 0.0, 0.175]
        world.add_box("wall", (0.4, 0.04, 0.35), T)
        return world
    if kind == "cloud_clutter":
        rng = np.random.default_rng(seed)
        clouds = []
        for _ in range(6):
            size = rng.uniform([0.04, 0.04, 0.06], [0.10, 0.10, 0.22])
            center = [rng.uniform(0.3, 0.62), rng.uniform(-0.14, 0.14), size[2] / 2.0]
            clouds.append(box_surface_points(center, size, 600, rng))
        world.set_point_cloud(np.vstack(clouds), voxel_size_m=0.01)
        return world
    raise ValueError(f"unknown world {kind!r}; expected one of {WORLDS}")


def tabletop_problems(worlds: tuple[str, ...] = WORLDS) -> list[PlanningProblem]:
    """Start/goal pairs from the y < 0 side of the table to the y > 0 side, in every world."""
    pairs = [
        ((0.30, -0.35, 0.12), (0.30, 0.35, 0.12)),
        ((0.45, -0.35, 0.10), (0.45, 0.35, 0.10)),
        ((0.55, -0.30, 0.15), (0.40, 0.35, 0.20)),
        ((0.35, -0.30, 0.25), (0.55, 0.30, 0.10)),
        ((0.50, -0.35, 0.25), (0.30, 0.30, 0.25)),
        ((0.40, -0.40, 0.15), (0.50, 0.40, 0.15)),
    ]
    problems = []
    for world_name in worlds:
        world = make_world(world_name)
        for k, (start, goal) in enumerate(pairs):
            problems.append(
                PlanningProblem(f"{world_name}/{k}", world_name, world, _pose(*start, yaw=0.3), _pose(*goal, yaw=-0.4))
            )
    return problems
