"""SIMULATION MEASUREMENT — the multi-view cross-check's false refusals and its catch rate, per rule.

Scenes: the sim tasks (spatial, multi_view, long_horizon) on one sim arm, rendered once per seed. The
reasoning is the simulator's ground-truth oracle (its first step), optionally with every pin jittered
(``--jitter-px``, Gaussian, seeded per scene: an erring model's pin noise). A ``views_disagree`` on a
step whose answer points lie on the right objects (judged on the simulator's segmentation) is a
false refusal. For the catch rate, each anchor of the pick ID
pinned in a second view is moved onto another object's sighting in that view (a grounding error a
model makes) and the step should be refused. Each scene is projected with:

- ``object_extent``: the shipped rule (``robopin.geometry.crossview``, pins agree on one object);
- ``distance``: the earlier rule (pins agree only within ``fusion_tolerance_m`` = 2 cm);
- ``off``: no cross-view check (only the answer's own points projected).

Printed per rule: steps refused and why, false ``views_disagree`` refusals, fallbacks to another view,
caught perturbations, and the projection time per step. Nothing here passes or fails.

Run: .venv/bin/python benchmarks/bench_cross_view.py [--robot xarm6 --seeds 5 --scenarios spatial ...]
"""

from __future__ import annotations

import argparse
import collections
import time
from dataclasses import replace

from robopin.geometry import CrossViewConfig, PointRequest, ProjectionConfig, Projector
from robopin.reasoning import interpret_pointing
from robopin.reasoning.snapshot_stages import SnapshotProjector
from robopin.sim.tts_study import STUDY_WORKSPACE, StudyScene, judge_trace


def _projectors(study: StudyScene) -> dict[str, SnapshotProjector]:
    views = list(study.projector.projector.views.values())
    rules = {
        "object_extent": ProjectionConfig(workspace=STUDY_WORKSPACE),
        "distance": ProjectionConfig(workspace=STUDY_WORKSPACE, cross_view=CrossViewConfig(rule="distance")),
    }
    out = {}
    for name, config in rules.items():
        projector = Projector(views, config)
        projector.pose_buffer = study.projector.projector.pose_buffer
        out[name] = SnapshotProjector(projector)
    out["off"] = out["object_extent"]
    return out


def _other_object_pin(study: StudyScene, request: PointRequest, pick_object: str) -> PointRequest | None:
    """The pin moved onto the most visible other graspable object's sighting in the same view."""
    best = None
    for name, seen in study.sightings().items():
        if name == pick_object or not study.scene.world.object(name).graspable:
            continue
        for sighting in seen:
            if sighting.view == request.img_idx and (best is None or sighting.pixels > best.pixels):
                best = sighting
    return None if best is None else replace(request, u=best.u, v=best.v)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="xarm6")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--scenarios", nargs="+", default=["spatial", "multi_view", "long_horizon"])
    parser.add_argument("--jitter-px", type=float, default=0.0, help="Gaussian noise on every pin (pixels)")
    args = parser.parse_args()

    import open3d  # noqa: F401  # imported once before timing: the first import costs seconds

    from robopin.sim.oracle import GroundTruthOracle, OracleErrors
    from robopin.sim.tasks import build_scene

    refused: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    false_disagree = collections.Counter()
    fallbacks = collections.Counter()
    caught = collections.Counter()
    perturbed = 0
    checked = collections.Counter()
    wrong_executed = collections.Counter()
    wrong_refused = collections.Counter()
    wrong_steps = 0
    seconds: dict[str, float] = collections.defaultdict(float)
    steps = 0
    for scenario in args.scenarios:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            scene = build_scene(scenario, seed, world_name=f"bench-cross-view-{scenario}-{seed}", robot=args.robot)
            study = StudyScene(scene)
            try:
                errors = OracleErrors(point_jitter_px=args.jitter_px)
                oracle = GroundTruthOracle(scene, study.views, errors=errors, seed=seed)
                written = oracle.write(study.rendered)
                right = judge_trace(study, written.text)
                decision = interpret_pointing(written.text, study.observation)
                if decision.refusal is not None or decision.pick is None:
                    print(f"{scenario} seed {seed}: oracle answer refused ({decision.refusal})")
                    continue
                steps += 1
                wrong_steps += not right
                for rule, projector in _projectors(study).items():
                    requests = decision.requests() if rule != "off" else decision.requests()[:2]
                    start = time.perf_counter()
                    targets = projector.project(requests, study.observation)
                    seconds[rule] += time.perf_counter() - start
                    if len(requests) > 2:
                        checked[rule] += 1
                    bad = [t for t in targets[:2] if not t.valid]
                    for target in bad:
                        refused[rule][str(target.reason)] += 1
                    if any(str(t.reason) == "views_disagree" for t in bad) and right:
                        false_disagree[rule] += 1
                    if not right:
                        (wrong_refused if bad else wrong_executed)[rule] += 1
                    if bad:
                        print(f"{scenario} seed {seed} [{rule}]: refused {bad[0].reason}: {bad[0].detail}")
                    for target, request in zip(targets[:2], requests[:2], strict=True):
                        if target.valid and target.img_idx != request.img_idx:
                            fallbacks[rule] += 1
                            print(f"{scenario} seed {seed} [{rule}]: fallback: {target.detail}")
                # Catch rate: the pick ID's other-view pins moved onto another object.
                moved = [
                    _other_object_pin(study, r, written.pick_object or "") if r.id == decision.pick.id else r
                    for r in decision.support
                ]
                if any(m is None for m in moved) or not any(r.id == decision.pick.id for r in decision.support):
                    continue
                perturbed += 1
                requests = [decision.pick, decision.place, *moved]
                for rule in ("object_extent", "distance"):
                    targets = _projectors(study)[rule].project(requests, study.observation)
                    if not targets[0].valid and str(targets[0].reason) == "views_disagree":
                        caught[rule] += 1
            finally:
                study.close()
    print(
        f"\n{steps} oracle steps ({args.robot}; {', '.join(args.scenarios)}; seeds {args.first_seed}.."
        f"{args.first_seed + args.seeds - 1})"
    )
    for rule in ("object_extent", "distance", "off"):
        line = (
            f"{rule:>14}: false views_disagree {false_disagree[rule]}/{checked[rule] or steps} checked steps "
            f"(answer on the right objects); "
            f"refusals {dict(refused[rule]) or 'none'}; fallbacks {fallbacks[rule]}; "
            f"{1000 * seconds[rule] / max(steps, 1):.0f} ms projection per step; "
            f"of {wrong_steps} steps with an answer point off its object: refused {wrong_refused[rule]}, "
            f"executed {wrong_executed[rule]}"
        )
        if rule != "off":
            line += f"; caught {caught[rule]}/{perturbed} pins moved to another object"
        print(line)


if __name__ == "__main__":
    main()
