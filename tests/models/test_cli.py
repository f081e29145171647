"""``robopin models …`` through the real command-line entry point."""

from __future__ import annotations

import shlex
from pathlib import Path

import yaml

from robopin.cli import main
from robopin.vlm import config_from_dict
from tests.models.test_fetch import write_fake_model

REGISTRY = str(Path(__file__).resolve().parents[2] / "models" / "registry.yaml")


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["models", "--registry", REGISTRY, *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_list_shows_every_model_and_what_is_local(tmp_path, capsys):
    write_fake_model(tmp_path / "models" / "robopin-4b")
    code, out, _ = run(capsys, "--models-dir", str(tmp_path / "models"), "list")
    assert code == 0
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:-1]}
    assert rows["robopin-4b"][-2] == "yes"
    assert rows["qwen3-vl-8b-instruct"][-2] == "no"
    assert rows["openai-endpoint"][1] == "endpoint"


def test_show_vlm_config_is_a_planner_parameter(capsys):
    code, out, _ = run(capsys, "show", "embodied-r1-3b", "--vlm-config", "--base-url", "http://gpu:8000/v1")
    assert code == 0
    config = config_from_dict(yaml.safe_load(out)["vlm"])
    assert config.point_convention == "pixels_resized" and config.base_url == "http://gpu:8000/v1"


def test_fetch_from_a_folder_then_serve_prints_a_runnable_command(tmp_path, capsys):
    write_fake_model(tmp_path / "usb")
    models = tmp_path / "models"
    code, out, err = run(capsys, "--models-dir", str(models), "fetch", "robopin-4b", "--from", str(tmp_path / "usb"))
    assert code == 0, err
    assert f"at {models / 'robopin-4b'}" in out
    code, out, err = run(capsys, "--models-dir", str(models), "serve", "robopin-4b", "--port", "8100")
    assert code == 0, err
    command = shlex.split(out.strip())
    assert command[:3] == ["vllm", "serve", str(models / "robopin-4b")]
    assert command[command.index("--port") + 1] == "8100"


def test_serve_without_weights_explains_how_to_get_them(tmp_path, capsys):
    code, _, err = run(capsys, "--models-dir", str(tmp_path), "serve", "robopin-4b")
    assert code == 1
    assert "robopin models fetch robopin-4b" in err and "--from-hub" in err


def test_serve_run_without_vllm_says_where_to_run_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    code, _, err = run(capsys, "serve", "robopin-4b", "--from-hub", "--run")
    assert code == 1
    assert "`vllm` is not installed here" in err and "compose" in err


def test_fetch_failure_is_one_line_and_exit_1(tmp_path, capsys):
    code, out, err = run(capsys, "--models-dir", str(tmp_path), "fetch", "robopin-4b", "--offline")
    assert code == 1 and out == ""
    assert err.startswith("robopin models fetch: cannot fetch QwQ2/RoboPIN-4B@main: offline mode is on")
