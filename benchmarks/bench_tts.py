"""SIMULATION STUDY — embodied test-time scaling (E-TTS) on the simulated workcell. Not a robot result.

Scenes: RoboPIN's spatial and multi-view scenarios (pybullet, rendered once per scene). The policy is
the simulator's ground-truth oracle writing PinCoT with injected errors: each sample independently
answers the wrong duck with probability ``--error-rate`` and jitters every point by
``--jitter-px`` (Gaussian σ). The verifier knows the truth and reports it with probability
``--verifier-accuracy`` (a soft P(yes)). A chosen pick/place is judged by the success model of
``robopin.sim.tts_study.action_outcome`` (pick point on the goal object within 2.5 cm of its
centre, place point inside the target plate), not by running physics per candidate.

Methods, each at budgets M×N (pairs):
- ``off``: one sample, its answer as written (the loop's single-sample reasoner);
- ``best-of-N``: M×N traces in one request, the reasoning verifier's best (the paper's naive TTS);
- ``E-TTS``: up to M sequential batches of one trace × N actions, joint score Sc × Ŝa with the
  feasibility action verifier (depth, segment centrality and visibility, view agreement, answer
  view; no IK check: no planner is bound), ε = 0.1, η = 0.4, feedback on (the oracle ignores it:
  its benefit is not measured); ablations at 4×4: ε = 0, and no reasoning verifier (Sc = 1).

Every method sees the same scenes and the same policy seeds per trial. Printed: success rate with
its standard error, the ratio to ``off`` measured in the same run, traces and verifier calls per
step, the stack's own time per step (measured here; the oracle's and the study verifier's time
excluded) and a modelled model time (0.281 s per generated sample — RoboPIN's A800 figure — and an
assumed 0.05 s per yes/no verifier call, serial, no batching credit). Nothing here passes or fails.

Run: .venv/bin/python benchmarks/bench_tts.py [--seeds 3 --trials 10 --error-rate 0.3 ...]
"""

from __future__ import annotations

import argparse
import logging
import math
import statistics
import time
from dataclasses import dataclass, field

from robopin.pincot.prompts import View, pointing_prompt
from robopin.reasoning import ReasoningQuery, SingleSampleReasoner, interpret_pointing
from robopin.reasoning.tts import ETTSReasoner, TTSConfig
from robopin.sim.tts_study import StudyPolicyBackend, StudyScene, StudyVerifierBackend, action_outcome
from robopin.vlm.prompts import build_messages

GENERATION_S_PER_SAMPLE = 0.281  # RoboPIN, one A800 with vLLM
VERIFIER_S_PER_CALL = 0.05  # assumed: a prefill-only yes/no request
FEEDBACK_S_PER_CALL = 0.281


ABLATIONS: dict[str, dict] = {
    "E-TTS": {},
    "  eps=0": {"selection": {"epsilon": 0.0}},
    "  no Vc": {"reasoning_verifier": {"enabled": False}},
}
"""E-TTS and its ablations (the paper's Table 1 rows that this study can measure)."""


@dataclass
class Tally:
    successes: list[int] = field(default_factory=list)
    samples: list[int] = field(default_factory=list)
    verifier_calls: list[int] = field(default_factory=list)
    feedback_calls: list[int] = field(default_factory=list)
    stack_s: list[float] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)

    def rate(self) -> float:
        return statistics.fmean(self.successes) if self.successes else math.nan

    def stderr(self) -> float:
        n = len(self.successes)
        p = self.rate()
        return math.sqrt(p * (1 - p) / n) if n else math.nan

    def modelled_s(self) -> float:
        return statistics.fmean(
            GENERATION_S_PER_SAMPLE * s + VERIFIER_S_PER_CALL * v + FEEDBACK_S_PER_CALL * f
            for s, v, f in zip(self.samples, self.verifier_calls, self.feedback_calls, strict=True)
        )


def query_for(study: StudyScene) -> ReasoningQuery:
    views = [View(name) for name in study.observation.view_names]
    prompt = pointing_prompt(study.instruction, views)
    messages = tuple(build_messages(prompt, study.observation.views))
    observation = study.observation
    return ReasoningQuery(
        "pointing", study.instruction, prompt, messages, observation, lambda text: interpret_pointing(text, observation)
    )


class MethodRunner:
    """One method at one budget on one scene: the reasoner is built once and reseeded per trial, so
    per-observation caches (depth segments) persist as they would across the queries of one step;
    the stack time is taken from the first, cold trial of each scene."""

    def __init__(self, key: tuple[str, int, int], study: StudyScene, args: argparse.Namespace) -> None:
        method, m, n = key
        errors = {"wrong_target_probability": args.error_rate, "point_jitter_px": args.jitter_px}
        self.study = study
        self.policy = StudyPolicyBackend(study, errors, 0)
        self.verifier = StudyVerifierBackend(study, args.verifier_accuracy, 0)
        self.reasoner: SingleSampleReasoner | ETTSReasoner
        if method == "off":
            self.reasoner = SingleSampleReasoner(self.policy)
        elif method == "best-of-N":
            self.reasoner = ETTSReasoner(
                self.policy, TTSConfig.best_of_n(m * n, seed=0), verifier_backend=self.verifier
            )
        else:
            config = TTSConfig.from_dict(
                {"traces_per_batch": 1, "max_batches": m, "actions_per_trace": n, "seed": 0, **ABLATIONS[method]}
            )
            self.reasoner = ETTSReasoner(self.policy, config, verifier_backend=self.verifier)
            self.reasoner.bind_stages(projector=study.projector)

    def run(self, query: ReasoningQuery, trial: int, tally: Tally) -> None:
        seed = 1000 * trial + 17
        self.policy.reseed(seed)
        self.verifier.reseed(seed + 1)
        if isinstance(self.reasoner, ETTSReasoner):
            self.reasoner.reset(seed + 2)
        start = time.perf_counter()
        reasoning = self.reasoner.reason(query)
        total = time.perf_counter() - start
        log = reasoning.extra.get("tts") if reasoning.extra else None
        decision = reasoning.interpretation
        if decision.valid:
            outcome = action_outcome(self.study, decision.pick, decision.place)
            ok, reason = outcome.success, outcome.reason
        else:
            ok, reason = False, decision.refusal.reason
        tally.successes.append(int(ok))
        if not ok:
            tally.failures[reason] = tally.failures.get(reason, 0) + 1
        tally.samples.append(self.policy.samples)
        tally.verifier_calls.append(log["calls"]["verify"] if log else 0)
        tally.feedback_calls.append(log["calls"]["feedback"] if log else 0)
        if trial == 0:
            policy_s = log["timings_s"].get("generate", 0.0) if log else total
            tally.stack_s.append(max(total - policy_s, 0.0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", nargs="+", default=["spatial", "multi_view"])
    parser.add_argument("--seeds", type=int, default=2, help="scenes per scenario")
    parser.add_argument("--trials", type=int, default=12, help="policy/verifier seeds per scene")
    parser.add_argument("--error-rate", type=float, default=0.4, help="P(a sample answers the wrong duck)")
    parser.add_argument("--jitter-px", type=float, default=10.0, help="Gaussian point jitter of every pin (px)")
    parser.add_argument("--verifier-accuracy", type=float, default=0.8)
    parser.add_argument("--quick", action="store_true", help="one scene per scenario, budgets 1 and 4 only")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    if args.quick:
        args.seeds, args.trials = 1, min(args.trials, 4)
        plan = [("off", 1, 1), ("best-of-N", 2, 2), ("E-TTS", 2, 2)]
    else:
        plan = [("off", 1, 1)]
        plan += [("best-of-N", m, n) for m, n in ((2, 2), (4, 4))]
        plan += [("E-TTS", m, n) for m, n in ((2, 2), (4, 4), (16, 1), (8, 2), (2, 8), (1, 16))]
        plan += [("  eps=0", 4, 4), ("  no Vc", 4, 4)]
    tallies = {key: Tally() for key in plan}
    # Import once before timing, so no row's cold step pays for loading scipy.
    import scipy.ndimage  # noqa: F401

    wall = time.perf_counter()
    for scenario in args.scenarios:
        for seed in range(args.seeds):
            study = StudyScene.build(scenario, seed)
            try:
                query = query_for(study)
                for key in plan:
                    runner = MethodRunner(key, study, args)
                    for trial in range(args.trials):
                        runner.run(query, trial, tallies[key])
            finally:
                study.close()
    baseline = tallies[("off", 1, 1)].rate()
    episodes = len(args.scenarios) * args.seeds * args.trials
    print("SIMULATION STUDY (pybullet workcell, ground-truth oracle policy with injected errors; not a robot result)")
    print(
        f"scenarios {args.scenarios}, {args.seeds} scene(s) each, {args.trials} trials per scene = {episodes} "
        f"steps per row; error rate {args.error_rate}, jitter {args.jitter_px} px, verifier accuracy "
        f"{args.verifier_accuracy}; success model: grasp within 2.5 cm of the goal object's centre, place inside "
        "the target plate"
    )
    header = (
        f"{'method':<10} {'M x N':>6} {'success':>8} {'+-se':>6} {'vs off':>7} {'traces':>7} {'verify':>7} "
        f"{'stack ms':>9} {'model s*':>9}  failures"
    )
    print(header)
    print("-" * len(header))
    for (method, m, n), tally in tallies.items():
        ratio = tally.rate() / baseline if baseline > 0 else math.nan
        failures = ", ".join(f"{k} {v}" for k, v in sorted(tally.failures.items(), key=lambda kv: -kv[1]))
        print(
            f"{method:<10} {f'{m}x{n}':>6} {100 * tally.rate():>7.1f}% {100 * tally.stderr():>5.1f} {ratio:>6.2f}x "
            f"{statistics.fmean(tally.samples):>7.2f} {statistics.fmean(tally.verifier_calls):>7.2f} "
            f"{1000 * statistics.fmean(tally.stack_s):>9.1f} {tally.modelled_s():>9.2f}  {failures}"
        )
    print(
        f"* modelled: {GENERATION_S_PER_SAMPLE} s per generated sample + {VERIFIER_S_PER_CALL} s per verifier call "
        f"+ {FEEDBACK_S_PER_CALL} s per feedback call, serial (an upper bound; vLLM batches n > 1 and concurrent "
        "calls). 'stack ms' is measured on the first (cold) step per scene: E-TTS's own work (drawing, prompts, "
        "depth segments, projections, selection), the oracle's and the study verifier's time excluded."
    )
    print(f"study wall time {time.perf_counter() - wall:.1f} s")


if __name__ == "__main__":
    main()
