"""A simulated trial in one process: a system file's loop, projection, planner and sim arm, judged as a stack trial.

``robopin trial`` brings every node of a system up over DDS; on a busy 2-core machine that is 25-40 s a
trial, too slow for a batch of hundreds. This runs the same parts without ROS: the
:class:`~robopin.reasoning.loop.ReasoningLoop` with the task node's settings of the system file (VLM
backend, reasoning config, ground-truth source, workspace) after its arguments (``model:=``, ``mode:=``,
``tts:=``); frames from the ``sim`` camera backend (what the camera nodes publish); projection with
``robopin.geometry`` at ``projection_node``'s defaults and the simulator's true camera mounts (the sim
systems set ``ground_truth_calibration``); pick-and-place planned by ``robopin.motion`` with the system's
planner and the motion planner node's default grasp settings against the depth cloud of every view, and
executed phase by phase on the ``sim`` arm backend (the arm driver's backend), with the node's missed-grasp
check. The trial is judged like a stack trial: the loop's named reason, or the scenario's success check on
the settled world (``goal_not_met`` when the loop reported success on a world that disagrees:
executed-but-wrong) — :func:`robopin.trials.judging.sim_judgement` on a
:class:`~robopin.trials.judging.StackVerdict`. E-TTS (``tts:=etts``) without a seed of its own is seeded with
the layout seed (:meth:`~robopin.system.schema.SystemFile.with_layout_seeded_reasoner`, as the node path's
bring-up does), so a batch row runs the same again, and the same as through the nodes.

What this leaves out, against the node path: DDS transport and message conversion, the camera nodes'
frame timing and the stamp pairing, the projection node's frame history, the arm driver's safety layer
and the control_msgs actions. Each row of a batch says which path produced it.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import math
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import yaml

from robopin.motion.pick_place_task import DirectArm, PickPlaceRequest, PickPlaceSettings, PickPlaceTask
from robopin.reasoning.protocols import MotionOutcome

__all__ = ["InProcessTrial", "SimPickPlaceActor", "run_inprocess_trial"]

_worlds = itertools.count()


@dataclasses.dataclass
class InProcessTrial:
    """One judged in-process trial: the verdict, what the model did and what it measured."""

    task: str
    seed: int
    arguments: dict[str, str]
    success: bool
    failure: str
    detail: str
    loop_success: bool
    steps_executed: int
    goals_reached: int | None
    goals_total: int | None
    model_errors: dict[str, int]
    samples: int
    measures: list[dict[str, float]]
    duration_s: float
    path: str = "in-process"
    search: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """E-TTS's log of each step (``{"task_id", "step", "search"}``, as task_node publishes it); empty for one
    sample."""

    @property
    def executed_but_wrong(self) -> bool:
        """The loop carried the task out and said success, but the world says the goal is not met."""
        return self.failure == "goal_not_met"

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "executed_but_wrong": self.executed_but_wrong}


def _mapping(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        value = yaml.safe_load(value) or {}
    return dict(value or {})


class SimPickPlaceActor:
    """The loop's actor: the motion planner node's pick-and-place task (``PickPlaceTask``) on the sim arm.

    ``planner_params`` are the motion planner node's parameters from the system file (planner, table
    height, workspace); the grasp settings are the node's defaults.
    """

    def __init__(self, scene, robot: str, planner_params: Mapping[str, Any], views: tuple[str, ...],
                 arm_options: Mapping[str, Any] | None = None) -> None:
        from robopin.geometry import WorkspaceBox
        from robopin.motion import make_planner, planner_config_from_dict
        from robopin.motion.scene import SceneConfig, SceneKeeper
        from robopin.robots.base import make_arm, make_arm_config

        self.scene, self.views = scene, views
        planner = _mapping(planner_params.get("planner", {"type": "roboplan"}))
        planner.setdefault("type", "roboplan")
        planner["robot"] = robot
        self.planner = make_planner(planner_config_from_dict(planner))
        self.planner.warmup()
        table = float(planner_params.get("table_height_m", 0.0))
        workspace = _mapping(planner_params.get("workspace")) or None
        self.keeper = SceneKeeper(self.planner.robot, SceneConfig(
            workspace=WorkspaceBox.from_dict(workspace) if workspace else None,
            table_height_m=None if math.isnan(table) else table,
            require_cloud=bool(planner_params.get("require_cloud", False)),
            max_cloud_age_s=float(planner_params.get("max_cloud_age_s", 2.0))))
        options = {**_mapping(arm_options), "world": scene.world.name, "robot": robot}
        self.arm = make_arm(make_arm_config("sim", options))
        self.arm.connect()
        self.arm.enable()
        # motion_planner_node's pick-and-place defaults (PickPlaceSettings are its parameters' defaults).
        self.task = PickPlaceTask(self.planner, self.keeper, PickPlaceSettings(), clock=time.monotonic)

    def close(self) -> None:
        self.arm.disconnect()

    def _update_cloud(self) -> None:
        from robopin.geometry.pointcloud import depth_to_point_cloud

        clouds = []
        for name in self.views:
            view = self.scene.world.render(name)
            clouds.append(depth_to_point_cloud(view.depth_m, view.model, view.T_base_cam, voxel_size_m=0.01).points)
        # Rendered now, with the arm still (the loop acts only after observing): the cloud of this moment.
        self.keeper.update_cloud(np.vstack(clouds), self.arm.joint_state().positions, time.monotonic())

    def pick_place(self, pick, place, *, dry_run, on_stage, should_stop) -> MotionOutcome:
        self._update_cloud()
        request = PickPlaceRequest(np.asarray(pick.point, float), np.asarray(place.point, float),
                                   pick_normal=pick.normal, dry_run=dry_run)
        arm = DirectArm(self.arm, lambda stage: on_stage("executing", stage))
        outcome = self.task.pick_place(self.arm.joint_state().positions, request, arm, should_stop)
        if outcome.status == "canceled":
            self.arm.stop()
        return MotionOutcome(outcome.success, outcome.status, outcome.message, outcome.planning_time_s,
                             executed=outcome.executed)


def run_inprocess_trial(system, task: str, seed: int, arguments: Mapping[str, str] | None = None) -> InProcessTrial:
    """Run ``task`` (a scenario) with layout ``seed`` on ``system`` (a sim :class:`SystemFile`) in this process."""
    from robopin.cameras import MultiViewSnapshot, camera_config_from_dict, make_camera
    from robopin.geometry import CameraMount, ProjectionConfig, Projector, ViewConfig, WorkspaceBox
    from robopin.reasoning import ReasoningConfig, ReasoningLoop, TaskRequest
    from robopin.reasoning.ground_truth import make_ground_truth
    from robopin.reasoning.snapshot_stages import SnapshotObserver, SnapshotProjector
    from robopin.sim.model_errors import error_kind
    from robopin.sim.tasks import build_scene, check_success
    from robopin.trials.judging import StackVerdict, sim_judgement
    from robopin.vlm import make_backend

    started = time.monotonic()
    arguments = {k: str(v) for k, v in (arguments or {}).items()}
    # E-TTS without a seed of its own is seeded with the layout seed, as the node path does (Bringup).
    system = system.with_sim(scenario=task, seed=int(seed)).with_arguments(arguments).with_layout_seeded_reasoner()
    views = tuple(system.views)
    world_name = f"inprocess-{next(_worlds)}"
    scene = build_scene(system.scenario_path(), int(seed), world_name=world_name, robot=system.robot)
    planner = system.node("task_node").parameters
    cameras, actor, backend = {}, None, None
    try:
        vlm = {**_mapping(planner["vlm"]), "world": world_name}
        backend = make_backend(vlm)
        reasoning = _mapping(planner.get("reasoning"))
        workspace = _mapping(planner.get("workspace")) or None
        if workspace:
            reasoning["workspace"] = WorkspaceBox.from_dict(workspace)
        config = ReasoningConfig.from_dict(reasoning)
        truth = _mapping(planner.get("ground_truth"))
        ground_truth = make_ground_truth({**truth, "world": world_name} if truth else None)
        for view in views:
            cameras[view] = make_camera(camera_config_from_dict({"type": "sim", "name": view, "world": world_name}))
            cameras[view].connect(warmup=False)

        def snapshot() -> MultiViewSnapshot:
            frames = {v: cameras[v].read() for v in views}
            pose = scene.world.ee_pose()
            return MultiViewSnapshot(views, frames, dict.fromkeys(views, pose), 0.0, 0.0)

        mounts = {}
        for view in views:
            spec = scene.world.camera(view)
            kind = "wrist" if spec.mount == "ee" else "static"
            mounts[view] = CameraMount(kind, spec.T_mount_cam, "ee" if kind == "wrist" else "base")
        projection = system.node("projection_node").parameters
        box = _mapping(projection.get("workspace")) or None
        projector = Projector([ViewConfig(v, i, mounts[v]) for i, v in enumerate(views)],
                              ProjectionConfig(workspace=WorkspaceBox.from_dict(box) if box else None,
                                               pose_tolerance_s=math.inf))
        arm = next((n for n in system.nodes if n.executable == "arm_driver_node"), None)
        actor = SimPickPlaceActor(scene, system.robot, system.node("motion_planner_node").parameters, views,
                                  arm.parameters.get("options") if arm is not None else None)
        loop = ReasoningLoop(config, backend, SnapshotObserver(snapshot), SnapshotProjector(projector), actor,
                             ground_truth=ground_truth)
        instruction = system.task.instruction or scene.spec.instruction
        result = loop.run(TaskRequest(instruction, mode=system.task.mode or "auto", max_steps=system.task.max_steps))
        scene.world.settle(1.0)
        world = check_success(scene)
        verdict = StackVerdict(
            success=result.success, failure="" if result.success else result.reason,
            detail=result.message, task_id=result.task_id, steps_executed=result.steps_executed,
            world_success=world.success, world_detail=str(world),
            goals_reached=sum(g.ok for g in world.goals), goals_total=len(world.goals))
        judgement = sim_judgement(verdict)
        errors = collections.Counter(error_kind(name) for sample in backend.injected for name in sample)
        measures = [dict(r.metrics, step=r.step, kind=r.kind, valid=float(r.valid)) for r in result.reasoning]
        return InProcessTrial(
            task=task, seed=int(seed), arguments=arguments, success=judgement.success,
            failure=judgement.failure, detail=(judgement.note or result.message)[:300], loop_success=result.success,
            steps_executed=result.steps_executed, goals_reached=verdict.goals_reached,
            goals_total=verdict.goals_total, model_errors=dict(errors), samples=len(backend.injected),
            measures=measures, duration_s=time.monotonic() - started,
            search=[{"task_id": r.task_id, "step": r.step, "search": dict(r.search)}
                    for r in result.reasoning if r.search])
    finally:
        for camera in cameras.values():
            camera.disconnect()
        if actor is not None:
            actor.close()
        if backend is not None:
            backend.close()
        scene.close()


_MEASURE_KEYS = ("pin_accuracy", "answer_accuracy", "plan_accuracy", "format", "consistency", "anchor_coverage",
                 "cross_step_id_coverage", "instruction_validity")


def _mean(values: list[float]) -> str:
    values = [v for v in values if v is not None and math.isfinite(v)]
    return f"{sum(values) / len(values):.3f}" if values else "–"


def batch_markdown(trials: list[InProcessTrial], group_keys: tuple[str, ...] = ("model", "mode", "tts")) -> str:
    """Tables of a batch: success per task, named failures, executed-but-wrong vs refused, model errors, measures.

    Rows group trials by the values of ``group_keys`` among their system arguments (absent: ``default``).
    """
    def group(trial: InProcessTrial) -> tuple[str, ...]:
        return tuple(trial.arguments.get(k, "default") for k in group_keys)

    groups: dict[tuple[str, ...], list[InProcessTrial]] = collections.defaultdict(list)
    for trial in trials:
        groups[group(trial)].append(trial)
    tasks = sorted({t.task for t in trials}, key=["spatial", "multi_view", "long_horizon"].index
                   if all(t.task in ("spatial", "multi_view", "long_horizon") for t in trials) else str)
    head = " | ".join(group_keys)
    out = [f"| {head} | " + " | ".join(tasks) + " | all | executed but wrong | refused | named failures |",
           "|" + "---|" * (len(group_keys) + len(tasks) + 4)]
    for key in sorted(groups):
        rows = groups[key]
        cells = []
        for task in tasks:
            of_task = [t for t in rows if t.task == task]
            cells.append(f"{sum(t.success for t in of_task)}/{len(of_task)}" if of_task else "–")
        wrong = sum(t.executed_but_wrong for t in rows)
        refused = sum(1 for t in rows if not t.success and not t.executed_but_wrong)
        reasons = collections.Counter(t.failure for t in rows if t.failure)
        named = ", ".join(f"{r} {n}" for r, n in reasons.most_common()) or "–"
        out.append(f"| {' | '.join(key)} | " + " | ".join(cells)
                   + f" | {sum(t.success for t in rows)}/{len(rows)} | {wrong} | {refused} | {named} |")
    out += ["", "Model errors drawn (per batch row; samples = model calls that wrote PinCoT, R^3 or plan text):", ""]
    kinds = sorted({k for t in trials for k in t.model_errors})
    out += [f"| {head} | samples | " + " | ".join(kinds or ["none"]) + " |",
            "|" + "---|" * (len(group_keys) + 1 + max(len(kinds), 1))]
    for key in sorted(groups):
        rows = groups[key]
        counts = collections.Counter()
        for t in rows:
            counts.update(t.model_errors)
        cells = [str(counts.get(k, 0)) for k in kinds] or ["0"]
        out.append(f"| {' | '.join(key)} | {sum(t.samples for t in rows)} | " + " | ".join(cells) + " |")
    out += ["", "Run-time reasoning measures (mean over the model calls each applies to; pin, answer and plan "
            "accuracy against the simulator's ground truth):", ""]
    out += [f"| {head} | " + " | ".join(k.replace("_", " ") for k in _MEASURE_KEYS) + " |",
            "|" + "---|" * (len(group_keys) + len(_MEASURE_KEYS))]
    for key in sorted(groups):
        steps = [m for t in groups[key] for m in t.measures]
        out.append(f"| {' | '.join(key)} | " + " | ".join(_mean([m.get(k) for m in steps]) for k in _MEASURE_KEYS)
                   + " |")
    return "\n".join(out)
