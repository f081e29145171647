"""Run and record one dry-run pointing trial in the simulator: views → reasoning loop → 3D targets → bag + log.

The step runs through :class:`robopin.reasoning.loop.ReasoningLoop` with the planner-replay stages
(:class:`~robopin.bags.task_replay.RecordedObserver` / ``RecordedProjector`` / ``DryRunActor``) on
exactly the data the bag stores (16UC1 depth, poses through quaternions), so replaying the bag with
the same backend reproduces the step bit for bit. It writes what a live trial records — camera
topics, ``/tf_static`` with the camera mounts, arm pose and joint states, ``PinnedReasoning`` and
``Target3D`` — through :class:`~robopin.bags.recorder.TrialRecorder`, and the step and summary
through :class:`~robopin.trials.log.TrialLog`. The arm does not move; success is the loop's verdict.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from robopin.bags.recorder import StaticTransform, TrialRecorder
from robopin.bags.task_replay import TrialTopics
from robopin.cameras.images import (
    camera_info_message,
    color_image_fields,
    decode_depth_m,
    depth_image_fields,
    depth_m_to_16uc1,
    image_message,
)
from robopin.interfaces import JOINT_STATES
from robopin.messages import header_msg, point_msg, pose_msg, pose_to_matrix, vector3_msg
from robopin.system.names import absolute_name
from robopin.trials.log import TrialLog, TrialStep, TrialSummary, trace_to_json

__all__ = ["record_sim_trial"]


def record_sim_trial(scene: Any, backend: Any, root: str | Path, trial_id: str, *, method: str = "",
                     topics: TrialTopics | None = None, frames_before: int = 2, stamp_s: float | None = None) -> Path:
    """Record one dry-run pointing step of ``scene`` planned by ``backend``; return the trial folder.

    The bag is ``<root>/<trial_id>/bag``; ``frames_before`` copies of each view are recorded before
    the reasoning (as a camera streaming at 30 Hz would) so replays have a schedule to keep.
    """
    from robopin.geometry.extrinsics import CameraMount, PoseBuffer
    from robopin.pincot.coords import normalized_to_pixels

    topics = topics or TrialTopics()
    world = scene.world
    log = TrialLog(root, trial_id)
    recorder = TrialRecorder(log.folder.parent / f".{trial_id}-recording")
    typestore = recorder.typestore
    types = typestore.types
    views = list(scene.camera_names)
    mounts: dict[str, CameraMount] = {}

    def as_recorded(T: np.ndarray) -> np.ndarray:
        return pose_to_matrix(pose_msg(types, T))

    # Mounts and arm poses reach a replay through quaternions in /tf_static and PoseStamped; project
    # with the same round-tripped matrices so the replay can reproduce the targets exactly.
    for name in views:
        camera = world.camera(name)
        if camera.mount == "ee":
            mounts[name] = CameraMount("wrist", as_recorded(camera.T_mount_cam), "ee", f"{name}_optical")
        else:
            mounts[name] = CameraMount("static", as_recorded(world.camera_pose(name)), "base", f"{name}_optical")
        recorder.add_static_transform(StaticTransform(mounts[name].parent_frame, f"{name}_optical",
                                                      mounts[name].T_parent_cam))
    t0 = time.time() if stamp_s is None else stamp_s
    started = time.perf_counter()
    recorder.start("bag", stamp_ns=round(t0 * 1e9))
    # The recorder wrote into a scratch root; the bag belongs inside the trial folder.
    writer_path = recorder.root / "bag"

    def record(topic: str, message: Any, stamp: float) -> None:
        recorder.record(topic, message.__msgtype__, typestore.serialize_cdr(message, message.__msgtype__),
                        round(stamp * 1e9))

    observe_start = time.perf_counter()
    rendered = {name: world.render(name) for name in views}
    # Project from exactly what the bag holds (16UC1 millimetres, 0 = no data), so a replay that reads
    # the bag back sees the same depth and can reproduce the targets bit for bit.
    depth_recorded = {name: decode_depth_m("16UC1", depth_m_to_16uc1(np.where(view.depth_m > 0, view.depth_m, np.nan)))
                      for name, view in rendered.items()}
    T_base_ee = as_recorded(world.ee_pose())
    q = world.joint_positions()
    observe_s = time.perf_counter() - observe_start
    period = 1.0 / 30.0
    for k in range(frames_before + 1):
        stamp = t0 + k * period
        record(topics.ee_pose, types["geometry_msgs/msg/PoseStamped"](header=header_msg(types, stamp, "base"),
                                                                      pose=pose_msg(types, T_base_ee)), stamp)
        joint_names = list(getattr(world.model, "joint_names", None) or [f"joint{i + 1}" for i in range(len(q))])
        record(absolute_name(JOINT_STATES), types["sensor_msgs/msg/JointState"](
            header=header_msg(types, stamp, ""), name=joint_names, position=np.asarray(q, np.float64),
            velocity=np.zeros(0), effort=np.zeros(0)), stamp)
        for name in views:
            _record_view(record, types, topics, name, rendered[name], depth_m=depth_recorded[name], stamp=stamp)
    snapshot_stamp = t0 + frames_before * period

    # The real reasoning loop plans the step (dry run) on exactly the data the bag holds, through the
    # same stages a planner replay uses, so replaying the bag with the same backend reproduces it.
    from robopin.bags.task_replay import (
        DryRunActor,
        RecordedObserver,
        RecordedProjector,
        RecordedStep,
        RecordedView,
    )
    from robopin.geometry.projection import ProjectionConfig
    from robopin.reasoning.config import ReasoningConfig
    from robopin.reasoning.loop import ReasoningLoop, TaskRequest

    poses = PoseBuffer()
    poses.add(snapshot_stamp, T_base_ee)
    live = RecordedStep(0, snapshot_stamp, scene.task.instruction, None,
                        [RecordedView(n, i, rendered[n].color, depth_recorded[n], rendered[n].model, snapshot_stamp)
                         for i, n in enumerate(views)],
                        {f"{n}_optical": mounts[n] for n in views}, poses)
    loop = ReasoningLoop(ReasoningConfig(mode="point", max_steps=1), backend, RecordedObserver(live),
                         RecordedProjector(ProjectionConfig()), DryRunActor())
    task = loop.run(TaskRequest(scene.task.instruction, mode="point", dry_run=True, max_steps=1, task_id=trial_id))
    if not task.reasoning:
        raise RuntimeError(f"trial {trial_id}: the reasoning loop produced no reasoning "
                           f"({task.reason}: {task.message})")
    step_record = task.reasoning[-1]
    text, trace = step_record.text, step_record.trace
    timings = task.steps[-1].timings_s if task.steps else {}
    reason_s = timings.get("model", 0.0) + timings.get("reason_overhead", 0.0)
    project_s = 0.0
    sizes = list(step_record.image_sizes)

    def pixels(x: float, y: float, img_idx: int | None) -> tuple[float, float]:
        if img_idx is None or not 0 <= img_idx < len(sizes):
            return float("nan"), float("nan")
        return normalized_to_pixels(x, y, sizes[img_idx])

    reasoning = types["robopin_interfaces/msg/PinnedReasoning"](
        header=header_msg(types, snapshot_stamp, "base"), task_id=trial_id, step=0, instruction=scene.task.instruction,
        model=step_record.model, raw_text=text, think=trace.think, answer=trace.answer,
        anchors=[types["robopin_interfaces/msg/Anchor"](
            kind=a.kind, name=a.name, id=a.id, img_idx=a.img_idx, x=float(a.x), y=float(a.y),
            u=float(pixels(a.x, a.y, a.img_idx)[0]), v=float(pixels(a.x, a.y, a.img_idx)[1]), char_offset=a.offset)
            for a in trace.anchors],
        references=[r.id for r in trace.references],
        answer_points=[types["robopin_interfaces/msg/AnswerPoint"](
            img_idx=-1 if p.img_idx is None else p.img_idx, x=float(p.x), y=float(p.y),
            u=float(pixels(p.x, p.y, p.img_idx)[0]), v=float(pixels(p.x, p.y, p.img_idx)[1]),
            label=p.label or "", id=p.id or "") for p in trace.answer_points],
        view_names=views, valid=trace.valid,
        errors=[types["robopin_interfaces/msg/ReasoningIssue"](code=e.code, message=e.message, is_error=True)
                for e in trace.errors],
        warnings=[types["robopin_interfaces/msg/ReasoningIssue"](code=w.code, message=w.message, is_error=False)
                  for w in trace.warnings],
        format_score=float(trace.metrics.get("format", 0.0)),
        identity_consistency=float(trace.metrics.get("consistency", 0.0)),
        anchor_coverage=float(trace.metrics.get("anchor_coverage", 0.0)),
        generation_time_s=float(step_record.generation_time_s),
        # The measures PinnedReasoning names, as the planner publishes them (NaN: no ground truth, not a plan).
        **{name: float(step_record.metrics.get(name, float("nan"))) for name in (
            "cross_step_id_coverage", "pin_accuracy", "answer_accuracy", "instruction_validity", "plan_accuracy")})
    record(topics.reasoning, reasoning, snapshot_stamp + reason_s)
    targets = list(task.steps[-1].targets) if task.steps else []
    for target in targets:
        record(topics.targets, types["robopin_interfaces/msg/Target3D"](
            header=header_msg(types, snapshot_stamp, "base"), id=target.id, name=target.name,
            point=point_msg(types, target.point), normal=vector3_msg(types, target.normal),
            source_view=target.source_view, img_idx=target.img_idx, u=float(target.u), v=float(target.v),
            depth_m=float(target.depth_m), depth_spread_m=float(target.depth_spread_m),
            depth_valid_fraction=float(target.depth_valid_fraction), valid=target.valid,
            reason=target.reason.value if target.reason is not None else "", detail=target.detail),
            snapshot_stamp + reason_s + project_s)
    recorder.stop()
    bag_path = log.folder / "bag"
    writer_path.rename(bag_path)
    recorder.root.rmdir()

    failure = "" if task.success else (task.reason or "failed")
    step = TrialStep(
        step=0, instruction=scene.task.instruction,
        views={name: log.save_view(0, name, rendered[name].color) for name in views},
        raw_output=text, trace=trace_to_json(trace, sizes), errors=[f"{e.code}: {e.message}" for e in trace.errors],
        targets=[{"id": t.id, "name": t.name, "view": t.source_view, "point": [float(c) for c in t.point]
                  if t.valid else None, "valid": t.valid, "reason": t.reason.value if t.reason else ""}
                 for t in targets],
        planner_status=task.steps[-1].motion.status if task.steps and task.steps[-1].motion else task.reason,
        execution="dry_run", model=step_record.model,
        durations_s={"observe": observe_s, "reason": reason_s},
        stage_starts_s={"observe": 0.0, "reason": observe_s})
    log.add_step(step)
    log.finish(TrialSummary(trial_id=trial_id, task=scene.spec.name, method=method or step_record.model,
                            success=not failure, failure=failure, steps=1,
                            duration_s=time.perf_counter() - started, instruction=scene.task.instruction,
                            bag="bag", extra={"scenario": scene.spec.name, "seed": scene.seed}))
    return log.folder


def _record_view(record: Any, types: Any, topics: TrialTopics, name: str, view: Any, *, depth_m: np.ndarray,
                 stamp: float) -> None:
    header = header_msg(types, stamp, f"{name}_optical")
    record(topics.info(name), camera_info_message(types, header, view.model), stamp)
    record(topics.color(name), image_message(types, header, color_image_fields(view.color)), stamp)
    record(topics.depth(name), image_message(types, header, depth_image_fields(depth_m)), stamp)
