"""What the operator is shown to set up: real-cell scenario files and simulated layouts in words."""

from __future__ import annotations

from pathlib import Path

import pytest

from robopin.trials.log import write_png
from robopin.trials.scenes import SceneError, describe_sim_scene, load_trial_scenario

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name, subgoals", [("spatial", 1), ("multi_view", 1), ("long_horizon", 3)])
def test_shipped_real_cell_scenarios_load(name, subgoals):
    scenario = load_trial_scenario(str(ROOT / "config" / "real_scenarios" / f"{name}.yaml"))
    assert scenario.sim is None and scenario.subgoals == subgoals and len(scenario.setup) >= 4
    assert scenario.name == name and scenario.instruction.startswith("Pick up")
    from robopin.sim.tasks import load_scenario

    assert scenario.instruction == load_scenario(name).instruction  # the same task as the simulator's


def test_real_cell_scenario_errors_name_the_key(tmp_path):
    path = tmp_path / "cell.yaml"
    path.write_text("name: spatial\ninstruction: pick the duck\nsetup: [{object: duck}]\n")
    with pytest.raises(SceneError, match="setup entry 1 must be"):
        load_trial_scenario(str(path))
    path.write_text("name: spatial\ninstruction: pick\nsetup: [{object: duck, place: front}]\nreference_image: x.png\n")
    with pytest.raises(SceneError, match="does not exist"):
        load_trial_scenario(str(path))
    import numpy as np

    write_png(tmp_path / "x.png", np.zeros((4, 4, 3), np.uint8))
    assert load_trial_scenario(str(path)).reference_image == (tmp_path / "x.png").resolve()
    path.write_text("name: spatial\ninstruction: pick\nsetup: [{object: duck, place: front}]\nsubgoals: 0\n")
    with pytest.raises(SceneError, match="subgoals"):
        load_trial_scenario(str(path))


def test_a_simulated_layout_in_words_names_the_roles():
    from robopin.sim.tasks import build_scene

    scenario = load_trial_scenario("spatial")
    assert scenario.sim is not None and scenario.setup == ()
    with build_scene(scenario.sim, 0, world_name="test-scenes-spatial", register=False) as scene:
        words = describe_sim_scene(scene)
    assert len(words) == len(scene.layout.placements)
    target = [thing for thing, _ in words if "target" in thing]
    assert len(target) == 1 and "duck" in target[0]
    assert all("m out from the robot base toward the static camera" in place for _, place in words)
