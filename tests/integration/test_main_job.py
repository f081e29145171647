"""The main job end to end: the simulated workcell with every node, driven the way a user drives it.

Each test runs the real command line in its own process (``robopin trial``, ``robopin up``,
``robopin instruct``) in this test run's ROS domain: cameras (sim backend), projection, the motion
planner (CPU), the arm driver (sim backend), the planner with the ground-truth oracle as its model,
and the recorder. Nothing is mocked; the oracle stands in for a VLM because no GPU is here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from robopin.trials.log import read_trial
from tests.process_output import output_tail

pytestmark = [pytest.mark.ros, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
# One seed per task. The physics is deterministic per seed and seed 0 of every task succeeds with
# the oracle (multi-view since the motion planner sees the workspace cloud), so each must keep
# succeeding.
TASK_SEEDS = {"spatial": 0, "multi_view": 0, "long_horizon": 0}
MUST_SUCCEED = ("spatial", "multi_view", "long_horizon")
# Failures of the stack itself (as opposed to a plan or a grasp that did not work out).
CHAIN_FAILURES = {"bringup_failed", "not_ready", "task_timeout", "no_result", "instruct_rejected", "internal_error",
                  "projection_unavailable", "motion_unavailable", "stale_frame", "stale_state", "stale_pose"}
# One topic each node of the stack publishes: a bag holding all of them saw the whole chain work.
TOPIC_OF_NODE = {
    "camera_node (static)": "/cameras/static/color/image_raw",
    "camera_node (wrist)": "/cameras/wrist/aligned_depth_to_color/image_raw",
    "arm_driver_node": "/robopin/arm/follow_joint_trajectory/_action/feedback",
    "arm_driver_node (state)": "/robopin/arm/ee_pose",
    "projection_node": "/robopin/targets/markers",
    "motion_planner_node": "/robopin/motion/pick_place/_action/feedback",
    "task_node": "/robopin/reasoning",
}


def _robopin(*args: str, timeout_s: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "robopin.cli", *args], cwd=ROOT, env=dict(os.environ),
                          capture_output=True, text=True, timeout=timeout_s)


def test_one_trial_of_each_task_through_every_node(tmp_path):
    from robopin.bags import TrialBag

    out = tmp_path / "trials"
    result = _robopin("trial", *(f"{task}@{seed}" for task, seed in TASK_SEEDS.items()), "--out", str(out),
                      timeout_s=3000)
    log = output_tail(result.stdout, result.stderr, 6000)
    for task, seed in TASK_SEEDS.items():
        folder = out / f"panda-{task}-seed{seed:03d}"
        summary, steps = read_trial(folder)
        assert summary is not None, f"{task}: no summary\n{log}"
        assert summary.success or summary.failure not in CHAIN_FAILURES, \
            f"{task}: the stack itself failed: {summary.failure}: {summary.extra.get('detail')}\n{log}"
        if task in MUST_SUCCEED:
            assert summary.success, f"{task} failed with {summary.failure}: {summary.extra.get('detail')}\n{log}"
        assert summary.task == task and summary.method == "oracle / panda"
        assert steps and all(step.raw_output.count("<obj") >= 1 for step in steps), task
        assert set(steps[0].views) == {"static", "wrist"} and (folder / steps[0].views["static"]).is_file()
        assert "execute" in steps[0].durations_s and steps[0].durations_s["plan"] > 0, "the arm never moved"
        # Where the pinned pick and place points went in 3D (base frame, inside the workspace): pick and place,
        # then the other views' pins of those two IDs (the cross-view check, on in the shipped config).
        pick, place, *others = steps[0].targets
        assert all(t["valid"] for t in steps[0].targets), steps[0].targets
        assert {t["id"] for t in others} <= {pick["id"], place["id"]}, steps[0].targets
        assert all(0.1 < t["point"][0] < 0.95 and -0.05 < t["point"][2] < 0.8 for t in steps[0].targets)
        with TrialBag(folder / summary.bag) as bag:
            topics = bag.topics
        missing = {node: topic for node, topic in TOPIC_OF_NODE.items() if topic not in topics}
        assert not missing, f"{task}: the bag has nothing from {missing}; it has {sorted(topics)}"
    _, long_steps = read_trial(out / f"panda-long_horizon-seed{TASK_SEEDS['long_horizon']:03d}")
    assert len(long_steps) >= 3, "long-horizon: at least two pick-and-place steps and the final 'done' step"
    results = (out / "results.md").read_text()
    for title in ("| Spatial | 1/1 |", "| Multi-view | 1/1 |", "| Long-horizon | 1/1 |"):
        assert title in results, results
    assert "x RoboPIN's 0.281 s" in results and (out / "report.html").is_file()


def _read_lines(stream, lines: list[str]) -> None:
    for line in stream:
        lines.append(line)


def test_up_serves_instruct_to_another_process_and_stops_cleanly_on_sigterm():
    from tests.readme_examples import readme_instruction

    process = subprocess.Popen([sys.executable, "-m", "robopin.cli", "up", "config/sim_panda.yaml", "--ready-timeout",
                                "600"], cwd=ROOT, env=dict(os.environ), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=_read_lines, args=(process.stdout, lines), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 900
        while not any(line.strip() == "ready" for line in lines):
            assert process.poll() is None, "robopin up exited early:\n" + "".join(lines[-80:])
            assert time.monotonic() < deadline, "robopin up never became ready:\n" + "".join(lines[-80:])
            time.sleep(0.5)
        # The README's own example, as written there (`robopin up config/sim_panda.yaml` + `robopin instruct ...`).
        instruction = readme_instruction()
        # A dry run: the whole chain reasons, projects and plans, and the arm must not move.
        answer = _robopin("instruct", instruction, "--dry-run", "--wait", "120", timeout_s=1200)
        assert answer.returncode == 0, answer.stdout + answer.stderr + "".join(lines[-80:])
        assert "SUCCESS" in answer.stdout and "planning" in answer.stdout and "executing" not in answer.stdout
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
        reader.join(timeout=5)
    assert code == 0, "robopin up did not stop cleanly on SIGTERM:\n" + "".join(lines[-80:])


def test_simulated_systems_plan_against_the_workspace_cloud():
    # Regression: without the projection node's cloud the motion planner saw only the table and
    # carried the multi-view duck through the toys (goal_tolerance 0.8 rad on every seed).
    import yaml

    for name in ("sim_panda", "sim_xarm6"):
        nodes = yaml.safe_load((ROOT / "config" / f"{name}.yaml").read_text())["nodes"]
        assert nodes["projection_node"]["parameters"]["cloud_period_s"] > 0, name
        planner = nodes["motion_planner_node"]["parameters"]
        assert planner["require_cloud"] is True, name
        assert planner["max_cloud_age_s"] >= nodes["projection_node"]["parameters"]["cloud_period_s"], name
