"""A recorded dry-run sim trial (oracle backend), shared by the bag and trial tests (one per module)."""

from __future__ import annotations

import itertools

import pytest

_names = itertools.count()


@pytest.fixture(scope="module")
def sim_trial(tmp_path_factory):
    """(scene, oracle backend, trials root, trial folder) of one recorded pointing trial."""
    from robopin.sim.tasks import build_scene
    from robopin.trials.sim_trial import record_sim_trial
    from robopin.vlm.base import make_backend

    world = f"bags-{next(_names)}"
    scene = build_scene("sanity_cube", 2, world_name=world)
    backend = make_backend({"type": "oracle", "world": world, "views": list(scene.camera_names)})
    root = tmp_path_factory.mktemp("trials")
    folder = record_sim_trial(scene, backend, root, "trial-000", method="oracle")
    yield scene, backend, root, folder
    scene.close()
