"""``robopin bag`` and ``robopin report`` on a recorded sim trial."""

from __future__ import annotations

import json

import pytest
import yaml

from robopin.cli import main


@pytest.mark.slow
def test_bag_info_step_and_replan(sim_trial, tmp_path, capsys):
    scene, _, root, folder = sim_trial
    assert main(["bag", "info", str(folder / "bag")]) == 0
    assert "/robopin/reasoning  [robopin_interfaces/msg/PinnedReasoning]" in capsys.readouterr().out
    assert main(["bag", "step", str(folder / "bag"), "--all"]) == 0
    assert capsys.readouterr().out.count("frame ") == 3
    backend = tmp_path / "oracle.yaml"
    backend.write_text(yaml.safe_dump({"type": "oracle", "world": scene.world.name, "views": list(scene.camera_names)}))
    assert main(["bag", "replan", str(folder / "bag"), "--backend", str(backend)]) == 0
    assert json.loads(capsys.readouterr().out)["identical"] is True
    backend.write_text(yaml.safe_dump({"type": "oracle", "world": scene.world.name, "views": list(scene.camera_names),
                                       "errors": {"point_jitter_px": 5.0}, "seed": 1}))
    assert main(["bag", "replan", str(folder / "bag"), "--backend", str(backend)]) == 1
    assert main(["report", str(root), "-o", str(tmp_path / "r.html")]) == 0
    assert (tmp_path / "r.json").exists()
