"""Fixtures for the simulator tests: scenes built once per module (building costs ~1 s each)."""

from __future__ import annotations

import pytest

from robopin.sim.tasks import Scene, build_scene

from .helpers import unique_world_name


@pytest.fixture(scope="module")
def multi_view_scene() -> Scene:
    scene = build_scene("multi_view", 3, world_name=unique_world_name("mv"))
    yield scene
    scene.close()


@pytest.fixture(scope="module")
def spatial_scene() -> Scene:
    scene = build_scene("spatial", 5, world_name=unique_world_name("sp"))
    yield scene
    scene.close()
