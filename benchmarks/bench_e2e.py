"""The whole stack's timing per step: the simulated Panda system through every node vs the same loop in-process.

Stack: ``config/sim_panda.yaml`` brought up in this process (cameras, projection, motion planner,
arm driver, planner with the ground-truth oracle, recorder), then the spatial task given ``STEPS``
times through the ``Instruct`` service as a dry run (observe, reason, validate, project, plan; no
motion), each stage timed from the task's feedback as a client receives it. Baseline, measured in
the same run on the same scene: the same :class:`robopin.reasoning.ReasoningLoop` in-process, with
frames read from the same ``sim`` camera backend, projection by ``robopin.geometry`` and no planner.
Printed: bring-up time, each stage's median for both and their ratio, and the stack's non-model
overhead before planning as a ratio of RoboPIN's 0.281 s per-sample model time (a published
figure). The oracle's "model" time is its own rendering of both views. Nothing passes or fails.

Run: .venv/bin/python benchmarks/bench_e2e.py
"""

from __future__ import annotations

import statistics
import time

from robopin.env import apply_ros_environment, test_domain_id

STEPS = 3
STAGES = ("observe", "reason", "validate", "project", "plan")


def _in_process_baseline(scene, system) -> dict[str, list[float]]:
    """The loop with in-process stages on the scene's own sim cameras (no ROS, no planner)."""
    from robopin.bags.planner_replay import DryRunActor
    from robopin.cameras import MultiViewSnapshot, camera_config_from_dict, make_camera
    from robopin.geometry import CameraMount, ProjectionConfig, Projector, ViewConfig, WorkspaceBox
    from robopin.reasoning import ReasoningConfig, ReasoningLoop, TaskRequest
    from robopin.reasoning.inprocess import SnapshotObserver, SnapshotProjector
    from robopin.vlm import make_backend

    views = system.views
    cameras = {v: make_camera(camera_config_from_dict({"type": "sim", "name": v, "world": scene.world.name}))
               for v in views}
    for camera in cameras.values():
        camera.connect(warmup=False)

    def snapshot() -> MultiViewSnapshot:
        frames = {v: cameras[v].read() for v in views}
        pose = scene.world.ee_pose()
        return MultiViewSnapshot(tuple(views), frames, dict.fromkeys(views, pose), 0.0, 0.0)

    mounts = {}
    for v in views:
        spec = scene.world.camera(v)
        kind = "wrist" if spec.mount == "ee" else "static"
        mounts[v] = CameraMount(kind, spec.T_mount_cam, "ee" if kind == "wrist" else "base")
    projector = Projector([ViewConfig(v, i, mounts[v]) for i, v in enumerate(views)],
                          ProjectionConfig(workspace=WorkspaceBox((0.1, -0.6, -0.05), (0.95, 0.6, 0.6))))
    backend = make_backend({"type": "oracle", "world": scene.world.name, "views": list(views)})
    loop = ReasoningLoop(ReasoningConfig(mode="point", max_steps=1), backend, SnapshotObserver(snapshot),
                         SnapshotProjector(projector), DryRunActor())
    times: dict[str, list[float]] = {s: [] for s in (*STAGES, "model", "reason_overhead")}
    for _ in range(STEPS):
        result = loop.run(TaskRequest(scene.spec.instruction, mode="point", dry_run=True, max_steps=1))
        timing = result.steps[-1].timings_s if result.steps else {}
        times["observe"].append(timing.get("observe", 0.0))
        times["model"].append(timing.get("model", 0.0))
        times["reason_overhead"].append(timing.get("reason_overhead", 0.0))
        times["reason"].append(timing.get("model", 0.0) + timing.get("reason_overhead", 0.0))
        times["project"].append(timing.get("project", 0.0))
    for camera in cameras.values():
        camera.disconnect()
    return times


def main() -> None:
    import os

    os.environ.setdefault("ROS_DOMAIN_ID", str(test_domain_id()))
    apply_ros_environment()
    from robopin_ros.bringup import Bringup

    from robopin.system import load_system
    from robopin.system.timing import ROBOPIN_MODEL_TIME_S, summarize_timings

    system = load_system("sim_panda", {})
    system = system.with_parameters("recorder_node", output_dir="/tmp/robopin-bench-e2e-bags")
    started = time.perf_counter()
    with Bringup(system) as bringup:
        bringup.wait_ready(600)
        bringup_s = time.perf_counter() - started
        timings = []
        for _ in range(STEPS):
            run = bringup.client.run_task(bringup.scene.spec.instruction, dry_run=True, timeout_s=600)
            if not run.success:
                print(f"dry run failed: {run.reason}: {run.message}")
            timings += run.timings()
        baseline = _in_process_baseline(bringup.scene, system)
    stack = summarize_timings(timings)
    print(f"bring-up of {len(system.nodes)} nodes (scene, planner warm-up, first camera frames): {bringup_s:.1f} s")
    print(f"{'stage':<16}{'stack s':>10}{'in-process s':>14}{'ratio':>8}   (median of {STEPS} dry-run steps)")
    for stage in (*STAGES, "model", "reason_overhead"):
        ours = stack.median_s.get(stage)
        base = statistics.median(baseline[stage]) if baseline.get(stage) else None
        ratio = f"{ours / base:8.2f}" if ours is not None and base else "       –"
        print(f"{stage:<16}{ours if ours is not None else float('nan'):>10.3f}"
              f"{base if base is not None else float('nan'):>14.3f}{ratio}")
    base_overhead = (statistics.median(baseline["observe"]) + statistics.median(baseline["reason_overhead"])
                     + statistics.median(baseline["project"]))
    print(f"non-model overhead before planning: stack {stack.overhead_mean_s:.3f} s (mean), in-process "
          f"{base_overhead:.3f} s (median), ratio {stack.overhead_mean_s / max(base_overhead, 1e-9):.2f}")
    print(f"  = {stack.overhead_ratio:.2f} x RoboPIN's {ROBOPIN_MODEL_TIME_S} s model time per sample "
          f"(with planning: {stack.overhead_with_planning_ratio:.2f} x)")


if __name__ == "__main__":
    main()
