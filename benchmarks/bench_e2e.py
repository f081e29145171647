"""The whole stack's timing per step: the simulated Panda system through every node vs the same loop in-process.

Stack: ``config/sim_panda.yaml`` brought up in this process (cameras, projection, motion planner,
arm driver, planner with the ground-truth oracle, recorder), then the spatial task given ``--steps``
times through the ``Instruct`` service as a dry run (observe, reason, validate, project, plan; no
motion), each stage timed from the task's feedback as a client receives it. Baseline, measured in
the same run on the same scene: the same :class:`robopin.reasoning.ReasoningLoop` in-process, with
frames rendered by the same ``sim`` camera backend before each step (as the camera nodes render them
ahead of the stack's observe), projection by ``robopin.geometry`` and no planner.
Then pick-and-place planning through the nodes on the three tasks' layouts: the plan stage of one dry run
on each of the spatial, multi-view and long-horizon tasks' first ``--node-seeds`` seeds, each scene brought
up on its own as ``robopin trial`` runs a trial; in-process (``plan_pick_place`` with the node's planner, on
the first pick-and-place of the three tasks' ``--seeds``, posed as the node poses them); and a single
roboplan plan on ``bench_motion.py``'s tabletop problems, all in this run.
Printed: bring-up time, where the sim renders are drawn, each stage's median for both paths and their ratio
and how long the stack's interpreter stalled inside it (a thread that wakes every 2 ms records wake-ups
more than 20 ms late: a pybullet render keeps the GIL throughout), the non-model overhead
before planning (median and mean) and its ratio, that overhead as a ratio of RoboPIN's 0.281 s
per-sample model time (a published figure), and the planning times (median, p95) and their ratio.
The oracle's "model" time is its own rendering of both views.
Then E-TTS against one sample (``--etts-seeds`` per task, 0 skips it; ``--etts-only`` runs nothing else): real runs
through every node of ``config/sim_xarm6.yaml`` with the erring ``robopin`` preset and the simulated model as slow
as RoboPIN's 0.281 s per sample (``model_latency_s``; its yes/no verdicts at the oracle's own speed, for want of a
published figure), each trial in a bring-up of its own and E-TTS seeded by the layout, as ``robopin trial`` runs
them. Printed per reasoner: model time per step, the reason stage less its model calls (E-TTS's own work:
candidates, their depth segments and projection, selection) and its ratio to the model time, the non-model time
before motion; then what E-TTS adds to that against one sample, as a fraction of its model time (the plan check
is the step's own planning, so the plan stage counts on both sides), as a difference of medians and paired on
each layout's first step (the one scene both reasoners see). Nothing passes or fails; on a shared
machine every wall-clock figure grows with other load, so compare only figures from one run.

Run: .venv/bin/python benchmarks/bench_e2e.py [--steps 3] [--seeds 5] [--node-seeds 3] [--etts-seeds 1] [--etts-only]
"""

from __future__ import annotations

import argparse
import os
import time

from robopin.env import apply_ros_environment, test_domain_id
from robopin.stats import summarize

STAGES = ("observe", "reason", "validate", "project", "plan")


class StallMonitor:
    """A thread that asks for the interpreter every ``period_s`` and records how late it got it.

    A wake-up later than ``threshold_s`` is a stall: some thread held the GIL (a pybullet render keeps it
    for the whole TinyRenderer pass) or the CPU was taken. ``stalled_s(a, b)`` sums the lateness inside [a, b]
    on the monotonic clock the task client stamps feedback with.
    """

    def __init__(self, period_s: float = 0.002, threshold_s: float = 0.02) -> None:
        import threading

        self.period_s, self.threshold_s = period_s, threshold_s
        self.stalls: list[tuple[float, float]] = []  # (start, end) of each stall
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stall-monitor", daemon=True)

    def __enter__(self) -> StallMonitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.is_set():
            time.sleep(self.period_s)
            now = time.monotonic()
            if now - last - self.period_s > self.threshold_s:
                self.stalls.append((last + self.period_s, now))
            last = now

    def stalled_s(self, start: float, end: float) -> float:
        return sum(max(0.0, min(b, end) - max(a, start)) for a, b in self.stalls)


def _stage_stalls(run, monitor: StallMonitor) -> dict[str, float]:
    """Seconds of stall inside each stage of a task's feedback (windows as system.timing.step_timings cuts them)."""
    from robopin.system.timing import FEEDBACK_STAGES

    events = sorted(run.events, key=lambda e: e.time_s)
    stalls: dict[str, float] = {}
    for index, event in enumerate(events):
        stage = FEEDBACK_STAGES.get(event.stage)
        if stage is None:
            continue
        end = events[index + 1].time_s if index + 1 < len(events) else run.end_s
        stalls[stage] = stalls.get(stage, 0.0) + monitor.stalled_s(event.time_s, end)
    return stalls


def _in_process_baseline(scene, system, steps: int):
    """The loop with in-process stages on the scene's own sim cameras (no ROS, no planner), as StepTimings.

    Stages are cut from the loop's own stage callbacks exactly as the stack's are cut from its feedback
    (robopin.system.timing.step_timings), and the loop has the same ground truth the stack's task_node
    measures against (the sim's), so both paths do the same work per stage.
    """
    from robopin.bags.task_replay import DryRunActor
    from robopin.cameras import MultiViewSnapshot, camera_config_from_dict, make_camera
    from robopin.geometry import CameraMount, ProjectionConfig, Projector, ViewConfig, WorkspaceBox
    from robopin.reasoning import ReasoningConfig, ReasoningLoop, TaskRequest
    from robopin.reasoning.ground_truth import make_ground_truth
    from robopin.reasoning.snapshot_stages import SnapshotObserver, SnapshotProjector
    from robopin.system.timing import FeedbackEvent, step_timings
    from robopin.vlm import make_backend

    views = system.views
    cameras = {v: make_camera(camera_config_from_dict({"type": "sim", "name": v, "world": scene.world.name}))
               for v in views}
    for camera in cameras.values():
        camera.connect(warmup=False)

    # The stack's observe takes frames its camera nodes rendered beforehand: here too, each step's frames
    # are rendered before the step and only taken in the timed observe.
    latest: dict[str, object] = {}

    def snapshot() -> MultiViewSnapshot:
        pose = scene.world.ee_pose()
        return MultiViewSnapshot(tuple(views), dict(latest), dict.fromkeys(views, pose), 0.0, 0.0)

    mounts = {}
    for v in views:
        spec = scene.world.camera(v)
        kind = "wrist" if spec.mount == "ee" else "static"
        mounts[v] = CameraMount(kind, spec.T_mount_cam, "ee" if kind == "wrist" else "base")
    projector = Projector([ViewConfig(v, i, mounts[v]) for i, v in enumerate(views)],
                          ProjectionConfig(workspace=WorkspaceBox((0.1, -0.6, -0.05), (0.95, 0.6, 0.6))))
    backend = make_backend({"type": "oracle", "world": scene.world.name, "views": list(views)})
    loop = ReasoningLoop(ReasoningConfig(mode="point", max_steps=1), backend, SnapshotObserver(snapshot),
                         SnapshotProjector(projector), DryRunActor(),
                         ground_truth=make_ground_truth({"type": "sim", "world": scene.world.name}))
    timings = []
    for _ in range(steps):
        latest.update({v: cameras[v].read() for v in views})
        events: list[FeedbackEvent] = []
        start = time.monotonic()
        result = loop.run(TaskRequest(scene.spec.instruction, mode="point", dry_run=True, max_steps=1),
                          on_stage=lambda stage, step, detail, events=events: events.append(
                              FeedbackEvent(time.monotonic(), stage, step, detail)))
        models = {s.step: s.timings_s.get("model", 0.0) for s in result.steps}
        timings += step_timings(events, start, time.monotonic(), models)
    for camera in cameras.values():
        camera.disconnect()
    return timings


def _pick_place_planning(seeds: int) -> tuple[list[float], int]:
    """Planning time of each case of ``pick_place_cases.sim_cases`` (Panda, the node's planner), successes."""
    from pick_place_cases import sim_cases

    from robopin.motion import plan_pick_place
    from robopin.motion.planner import RoboplanPlannerConfig, make_planner

    planner = make_planner(RoboplanPlannerConfig(robot="panda", timeout_s=3.0))  # config/sim_panda.yaml
    planner.warmup()
    times, planned = [], 0
    for case in sim_cases(planner.robot, "panda", range(seeds)):
        planner.update_world(case.world)
        plan = plan_pick_place(planner, case.q_start, case.pick, case.place, case.config,
                               object_points=case.object_points)
        times.append(plan.planning_time_s)
        planned += plan.success
    return times, planned


def _node_pick_place(system, seeds: int) -> tuple[list[float], int]:
    """Plan stage through the nodes of a dry run on each of the three tasks' first ``seeds`` layouts; how many
    of those dry runs planned (each scene in a bring-up of its own, as ``robopin trial`` runs a trial)."""
    from robopin_ros.bringup import Bringup

    times, planned = [], 0
    for task in ("spatial", "multi_view", "long_horizon"):
        for seed in range(seeds):
            with Bringup(system.with_sim(scenario=task, seed=seed)) as bringup:
                bringup.wait_ready(600)
                run = bringup.client.run_task(bringup.scene.spec.instruction, dry_run=True, timeout_s=600)
            if not run.success:
                print(f"{task} seed {seed}: dry run failed: {run.reason}: {run.message}")
            planned += bool(run.success)
            times += [t.durations_s["plan"] for t in run.timings() if "plan" in t.durations_s]
    return times, planned


def _etts_steps(seeds: int, latency_s: float) -> dict[str, tuple[list, int, int]]:
    """Every step of real runs through the nodes of the xArm 6 sim system with the erring ``robopin`` preset, one
    sample (``tts:=single``) and E-TTS (``tts:=etts``), the simulated model at ``latency_s`` per sample; the three
    tasks' first ``seeds`` layouts, a bring-up each and E-TTS seeded by the layout, as ``robopin trial`` runs them.
    Returns per reasoner: the steps (timing, E-TTS's part times, (task, seed)), trials that succeeded, trials."""
    from robopin_ros.bringup import Bringup

    from robopin.system import load_system

    found: dict[str, tuple[list, int, int]] = {}
    for tts in ("single", "etts"):
        system = load_system("sim_xarm6", {"model": "robopin", "tts": tts, "model_latency_s": str(latency_s)})
        system = system.with_parameters("recorder_node", output_dir="/tmp/robopin-bench-e2e-bags")
        steps, succeeded, trials = [], 0, 0
        for task in ("spatial", "multi_view", "long_horizon"):
            for seed in range(seeds):
                with Bringup(system.with_sim(scenario=task, seed=seed).with_layout_seeded_reasoner()) as bringup:
                    bringup.wait_ready(600)
                    run = bringup.client.run_task(bringup.scene.spec.instruction, timeout_s=600)
                    # E-TTS's own log of each step (the task node's REASONING_SEARCH messages): its parts' times.
                    searches = {int(e["step"]): e["search"].get("timings_s", {})
                                for node in bringup.nodes.values() if callable(getattr(node, "search_logs", None))
                                for e in node.search_logs(run.task_id)}
                trials += 1
                succeeded += bool(run.success)
                if not run.success:
                    print(f"{tts} {task} seed {seed}: {run.reason}: {run.message}")
                steps += [(t, searches.get(t.step, {}), (task, seed)) for t in run.timings()]
        found[tts] = (steps, succeeded, trials)
    return found


def _print_etts(found: dict[str, tuple[list, int, int]], latency_s: float) -> None:
    """E-TTS's own work per step (reason stage less its model calls) against its model time, and what E-TTS adds
    to a step's non-model time before motion against one sample."""
    def before_motion(step) -> float:
        return step.reason_overhead_s + sum(step.durations_s.get(s, 0.0) for s in ("validate", "project", "plan"))

    rows = {}
    for tts, (logged, succeeded, trials) in found.items():
        steps = [step for step, _, _ in logged]
        reasoned = [s for s in steps if "reason" in s.durations_s]
        planned = [s for s in reasoned if "plan" in s.durations_s]
        rows[tts] = (summarize([s.model_s for s in reasoned]), summarize([s.reason_overhead_s for s in reasoned]),
                     summarize([before_motion(s) for s in planned]))
        model, own, before = rows[tts]
        print(f"  {tts:<7} {succeeded}/{trials} trials, {len(reasoned)} steps: model calls median "
              f"{model.median:.3f} s; reason stage less model median {own.median:.3f} s (p95 {own.p95:.3f}) = "
              f"{own.median / model.median:.2f} of model time; non-model before motion (reason less model, "
              f"validate, project, plan) median "
              f"{before.median:.3f} s (p95 {before.p95:.3f})")
    searched = [(step, parts) for step, parts, _ in found.get("etts", ([], 0, 0))[0]
                if parts.get("sample_actions") and "reason" in step.durations_s]
    if searched:
        names = ("verify_reasoning", "sample_actions", "verify_actions", "project_actions")
        medians = {part: summarize([parts.get(part, 0.0) for _, parts in searched]).median for part in names}
        print("  E-TTS steps that scored actions, median s: " + ", ".join(f"{k} {v:.3f}" for k, v in medians.items())
              + " (the action verifier runs beside verify_reasoning, a model call)")
    if "single" in rows and "etts" in rows:
        model, _, etts_before = rows["etts"]
        added = etts_before.median - rows["single"][2].median
        print(f"  E-TTS adds {added:.3f} s of non-model time before motion per step (medians) = "
              f"{added / model.median:.2f} of its model time ({model.median:.3f} s at {latency_s} s per sample)")
        # Later steps of one layout differ between the two reasoners (another object picked, another scene), so
        # the difference of medians mixes E-TTS's cost with the scenes' planning times: each layout's first step
        # sees the same scene under both, and the median of those paired differences is E-TTS's cost alone.
        first = {tts: {trial: step for step, _, trial in logged if step.step == 0 and "plan" in step.durations_s}
                 for tts, (logged, _, _) in found.items()}
        pairs = [(first["etts"][trial], first["single"][trial]) for trial in first["etts"] if trial in first["single"]]
        if pairs:
            paired = summarize([before_motion(e) - before_motion(s) for e, s in pairs])
            model_first = summarize([e.model_s for e, _ in pairs]).median
            print(f"  paired on each layout's first step ({len(pairs)} layouts): E-TTS adds median "
                  f"{paired.median:.3f} s (p95 {paired.p95:.3f}) = {paired.median / model_first:.2f} of its model time "
                  f"({model_first:.3f} s)")


def _report_etts(seeds: int) -> None:
    from robopin.system.timing import ROBOPIN_MODEL_TIME_S

    found = _etts_steps(seeds, ROBOPIN_MODEL_TIME_S)
    print(f"E-TTS through the nodes, xArm 6, erring 'robopin' preset, model {ROBOPIN_MODEL_TIME_S} s per sample "
          f"(3 tasks x {seeds} seeds, real runs):")
    _print_etts(found, ROBOPIN_MODEL_TIME_S)


def _single_plans() -> list[float]:
    """Planning times of single roboplan plans on the Panda tabletop problems (bench_motion.py --quick)."""
    from bench_motion import run_candidate

    from robopin.motion.problems import tabletop_problems

    problems = [p for p in tabletop_problems() if p.name.endswith(("/0", "/1"))]
    result = run_candidate("roboplan", "panda", problems)
    return [result["median_ms"] / 1e3, result["p95_ms"] / 1e3]


def _ratio(ours: float | None, base: float | None) -> str:
    return f"{ours / base:8.2f}" if ours is not None and base else "       –"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="dry-run steps through the stack and in-process")
    parser.add_argument("--seeds", type=int, default=5, help="seeds per task, in-process pick-and-place planning")
    parser.add_argument("--node-seeds", type=int, default=3,
                        help="seeds per task for pick-and-place planning through the nodes (a bring-up each)")
    parser.add_argument("--etts-seeds", type=int, default=1,
                        help="seeds per task for E-TTS against one sample, real runs through the nodes (0: skip)")
    parser.add_argument("--etts-only", action="store_true", help="only the E-TTS comparison")
    args = parser.parse_args()
    os.environ.setdefault("ROS_DOMAIN_ID", str(test_domain_id()))
    apply_ros_environment()
    if args.etts_only:
        _report_etts(args.etts_seeds)
        return
    from robopin_ros.bringup import Bringup

    from robopin.system import load_system
    from robopin.system.timing import ROBOPIN_MODEL_TIME_S, summarize_timings

    system = load_system("sim_panda", {})
    system = system.with_parameters("recorder_node", output_dir="/tmp/robopin-bench-e2e-bags")
    started = time.perf_counter()
    with Bringup(system) as bringup:
        bringup.wait_ready(600)
        bringup_s = time.perf_counter() - started
        timings, stalls = [], []
        with StallMonitor() as monitor:
            for _ in range(args.steps):
                run = bringup.client.run_task(bringup.scene.spec.instruction, dry_run=True, timeout_s=600)
                if not run.success:
                    print(f"dry run failed: {run.reason}: {run.message}")
                timings += run.timings()
                stalls.append(_stage_stalls(run, monitor))
            steps_s = monitor.stalled_s(-1.0, time.monotonic())
        worker = getattr(bringup.scene.world, "_render_worker", None)
        renders_where = f"worker process {worker.pid}" if worker is not None else "this process"
        baseline = _in_process_baseline(bringup.scene, system, args.steps)
    node_pick_place_s, node_planned = _node_pick_place(system, args.node_seeds)
    pick_place_s, planned = _pick_place_planning(args.seeds)
    single_s = _single_plans()
    stack = summarize_timings(timings)
    base = summarize_timings(baseline)
    print(f"bring-up of {len(system.nodes)} nodes (scene, planner warm-up, first camera frames): {bringup_s:.1f} s")
    print(f"sim renders drawn in {renders_where}; interpreter stalls > 20 ms during the stack's steps: "
          f"{steps_s:.2f} s in all")
    print(f"{'stage':<16}{'stack s':>10}{'in-process s':>14}{'ratio':>8}{'stall s':>9}   "
          f"(median of {args.steps} dry-run steps; stall: the stack's interpreter stalled inside the stage)")
    for stage in (*STAGES, "model", "reason_overhead"):
        # The in-process loop plans nothing (a dry-run actor): its plan stage is no baseline.
        ours, theirs = stack.median_s.get(stage), None if stage == "plan" else base.median_s.get(stage)
        stall = summarize(s.get(stage, 0.0) for s in stalls).median if stage in STAGES else float("nan")
        print(f"{stage:<16}{ours if ours is not None else float('nan'):>10.3f}"
              f"{theirs if theirs is not None else float('nan'):>14.3f}{_ratio(ours, theirs)}{stall:>9.3f}")
    overheads = [t.overhead_s for t in timings if "project" in t.durations_s]
    base_steps = [t.overhead_s for t in baseline if "project" in t.durations_s]
    stack_median, base_median = summarize(overheads).median, summarize(base_steps).median
    print(f"non-model overhead before planning (observe + reason overhead + validate + project): stack median "
          f"{stack_median:.3f} s (mean {stack.overhead_mean_s:.3f} s), in-process median {base_median:.3f} s "
          f"(mean {base.overhead_mean_s:.3f} s), ratio of medians {stack_median / max(base_median, 1e-9):.2f}")
    print(f"  = {stack.overhead_ratio:.2f} x RoboPIN's {ROBOPIN_MODEL_TIME_S} s model time per sample "
          f"(with planning: {stack.overhead_with_planning_ratio:.2f} x)")
    in_process, through_nodes = summarize(pick_place_s), summarize(node_pick_place_s)
    median, p95 = in_process.median, in_process.p95
    node_median, node_p95 = through_nodes.median, through_nodes.p95
    print(f"pick-and-place planning through the nodes, {node_planned}/{3 * args.node_seeds} dry runs planned "
          f"(3 tasks x {args.node_seeds} seeds, plan stage): median {node_median:.3f} s, p95 {node_p95:.3f} s; "
          f"in-process, {planned}/{len(pick_place_s)} planned (3 tasks x {args.seeds} seeds): median {median:.3f} s, "
          f"p95 {p95:.3f} s; ratio of medians {node_median / median:.2f}")
    print(f"single roboplan plan (bench_motion.py --quick problems, Panda): median {single_s[0]:.3f} s, "
          f"p95 {single_s[1]:.3f} s; a pick-and-place is {median / single_s[0]:.1f} single plans (medians)")
    if args.etts_seeds:
        _report_etts(args.etts_seeds)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
