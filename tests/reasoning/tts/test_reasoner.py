"""The E-TTS reason stage with a scripted model (the GPU VLM is the one edge replaced) on a synthetic
tabletop with real depth: acceptance, threshold fall-through, feedback insertion, max batches,
refusal, budgets, concurrency of verifier calls, the history of K steps, and the request layout."""

from __future__ import annotations

import dataclasses
import threading
import time

import numpy as np
import pytest

from robopin.geometry import CameraMount, Projector, ViewConfig, make_transform
from robopin.reasoning import TaskRefusal
from robopin.reasoning.protocols import MotionOutcome
from robopin.reasoning.snapshot_stages import SnapshotProjector
from robopin.reasoning.tts import ETTSReasoner, TTSConfig
from robopin.reasoning.tts.reasoner import step_log_lines
from robopin.vlm.base import ViewImage
from tests.reasoning.tts.helpers import ScriptedModel, query, tabletop, trace

CUP = (200, 150, 260, 210, 0.05)  # a 6x6 cm block, 5 cm high, centred at pixel (230, 180)
MUG = (400, 100, 440, 140, 0.08)
GOOD = trace((231, 181), (500, 350), tag="GOOD")
BAD = trace((420, 120), (500, 350), tag="BAD")  # picks the mug


def reasoner(model: ScriptedModel, **settings) -> ETTSReasoner:
    values = {"seed": 0, "selection": {"epsilon": 0.0}, "feedback": {"enabled": True}}
    values.update(settings)
    return ETTSReasoner(model, TTSConfig.from_dict(values))


@pytest.fixture(scope="module")
def observation():
    return tabletop([CUP, MUG])


def test_first_batch_above_threshold_is_accepted(observation):
    model = ScriptedModel([[GOOD]], {"GOOD": 0.9})
    result = reasoner(model).reason(query(observation))
    log = result.extra["tts"]
    assert log["stop_reason"] == "accepted"
    assert log["calls"] == {"generate": 1, "verify": 1, "feedback": 0}
    assert result.text == GOOD and result.interpretation.valid
    assert 200 <= result.interpretation.pick.u < 260 and 150 <= result.interpretation.pick.v < 210
    assert log["chosen"]["joint"] > 0.4


def test_rejected_batch_appends_the_critique_and_resamples(observation):
    model = ScriptedModel([[BAD], [GOOD]], {"BAD": 0.1, "GOOD": 0.9}, critique="CRITIQUE-1: take the cup")
    q = query(observation)
    result = reasoner(model, max_batches=3).reason(q)
    log = result.extra["tts"]
    assert log["stop_reason"] == "accepted" and len(log["batches"]) == 2
    assert log["batches"][0]["selection"]["mode"] == "rejected"
    assert log["batches"][0]["feedback"] == "CRITIQUE-1: take the cup"
    assert len(model.feedback_requests) == 1
    # The critique request shows the rejected reasoning and its score.
    feedback_text = "".join(m.text for m in model.feedback_requests[0])
    assert "BAD" in feedback_text and "Evaluation Score: 0.10" in feedback_text
    first, second = ("".join(m.text for m in r) for r in model.generate_requests)
    assert first == q.prompt
    # Same images, and the original prompt first: a shared prefix for the server's cache.
    assert second.startswith(q.prompt) and "Previous Attempt" in second
    assert "CRITIQUE-1: take the cup" in second and "BAD" in second and "GOOD" not in second
    images = [p for p in model.generate_requests[1][-1].parts if isinstance(p, ViewImage)]
    assert images == list(q.observation.views)
    assert result.text == GOOD


def test_only_the_latest_critique_is_carried(observation):
    model = ScriptedModel([[BAD], [BAD], [GOOD]], {"BAD": 0.1, "GOOD": 0.9})
    reasoner(model, max_batches=3).reason(query(observation))
    third = "".join(m.text for m in model.generate_requests[2])
    assert third.count("Previous Attempt") == 1


def test_max_batches_runs_the_best_pair_seen_with_a_named_reason(observation):
    low = [trace((231, 181), (500, 350), tag=f"T{k}") for k in range(3)]
    model = ScriptedModel([[low[0]], [low[1]], [low[2]]], {"T0": 0.2, "T1": 0.35, "T2": 0.1})
    # min_reasoning_score 0: the paper's Algorithm 1, which runs the best pair even when every trace was judged wrong.
    result = reasoner(model, max_batches=3, selection={"epsilon": 0.0, "min_reasoning_score": 0.0}).reason(
        query(observation)
    )
    log = result.extra["tts"]
    assert log["stop_reason"] == "max_batches"
    assert [b["selection"]["mode"] for b in log["batches"]] == ["rejected"] * 3
    assert result.text == low[1]  # the best joint score over all batches
    assert log["calls"] == {"generate": 3, "verify": 3, "feedback": 2}  # no critique after the last batch


def test_max_batches_runs_only_reasoning_the_verifier_did_not_reject(observation):
    # Issue #38: every trace judged wrong, the best of them was run (a wrong object picked and placed).
    low = [trace((231, 181), (500, 350), tag=f"T{k}") for k in range(3)]
    model = ScriptedModel([[low[0]], [low[1]], [low[2]]], {"T0": 0.2, "T1": 0.35, "T2": 0.1})
    refused = reasoner(model, max_batches=3).reason(query(observation))
    refusal = refused.interpretation.refusal
    assert refusal.reason == "tts_rejected" and "rejected the reasoning of every trace" in refusal.message
    # The refused step keeps its search: every batch, and the refusal, for the record the loop makes of it.
    log = refused.extra["tts"]
    assert len(log["batches"]) == 3 and log["chosen"] is None and log["refusal"] == str(refusal)
    assert refused.text == low[1]  # the best trace seen, the one the refusal kept from running
    assert step_log_lines(log, 0)[-1].endswith(f"; refused {refusal}")
    # A trace the verifier said yes to, under a threshold above it, is still run once the batches are spent.
    model = ScriptedModel([[low[0]], [low[1]]], {"T0": 0.2, "T1": 0.6})
    result = reasoner(model, max_batches=2, selection={"epsilon": 0.0, "threshold": 0.7}).reason(query(observation))
    assert result.text == low[1] and result.extra["tts"]["stop_reason"] == "max_batches"


def test_exploration_never_takes_reasoning_the_verifier_rejected(observation):
    # Issue #38: a rejected batch explored (epsilon) ran the answer the verifier had judged wrong.
    model = ScriptedModel([[BAD], [GOOD]], {"BAD": 0.0, "GOOD": 0.9})
    result = reasoner(model, max_batches=2, selection={"epsilon": 1.0}).reason(query(observation))
    log = result.extra["tts"]
    assert [b["selection"]["mode"] for b in log["batches"]] == ["rejected", "explore"]
    assert result.text == GOOD


def test_refuse_mode_names_the_threshold(observation):
    model = ScriptedModel([[BAD]], {"BAD": 0.2})
    refused = reasoner(model, max_batches=2, selection={"epsilon": 0.0, "on_exhausted": "refuse"}).reason(
        query(observation)
    )
    refusal = refused.interpretation.refusal
    assert refusal.reason == "tts_rejected"
    assert "threshold 0.4" in refusal.message and "2 batch(es)" in refusal.message
    assert refused.extra["tts"]["refusal"] == str(refusal)


def test_invalid_traces_get_the_validation_message_as_feedback_without_a_model_call(observation):
    model = ScriptedModel([["no tags at all"], [GOOD]], {"GOOD": 0.9})
    result = reasoner(model, max_batches=2).reason(query(observation))
    assert model.feedback_requests == [] and len(model.verify_requests) == 1
    second = "".join(m.text for m in model.generate_requests[1])
    assert "could not be executed" in second
    assert result.text == GOOD


def test_all_invalid_hands_the_loop_an_invalid_decision(observation):
    model = ScriptedModel([["<think>nothing</think><answer>no idea</answer>"]], {})
    result = reasoner(model, max_batches=2, feedback={"enabled": False}).reason(query(observation))
    assert not result.interpretation.valid and result.interpretation.refusal.reason == "invalid_reasoning"
    assert model.verify_requests == []
    assert result.extra["tts"]["stop_reason"] == "max_batches"


def test_call_budget_stops_batches(observation):
    model = ScriptedModel([[BAD]], {"BAD": 0.1})
    # min_reasoning_score 0: the rejected best pair runs, so the log is there to read.
    selection = {"epsilon": 0.0, "min_reasoning_score": 0.0}
    result = reasoner(model, max_batches=5, budget={"max_calls": 2}, selection=selection).reason(query(observation))
    log = result.extra["tts"]
    assert log["stop_reason"] == "budget_calls" and len(log["batches"]) == 1
    assert log["calls"] == {"generate": 1, "verify": 1, "feedback": 0}


def test_time_budget_stops_batches(observation):
    ticks = iter(np.arange(0.0, 1000.0, 1.0))
    model = ScriptedModel([[BAD]], {"BAD": 0.1})
    tts = ETTSReasoner(
        model,
        TTSConfig.from_dict(
            {"seed": 0, "max_batches": 50, "selection": {"epsilon": 0.0, "min_reasoning_score": 0.0},
             "budget": {"max_time_s": 20}}
        ),
        clock=lambda: float(next(ticks)),
    )
    log = tts.reason(query(observation)).extra["tts"]
    assert log["stop_reason"] == "budget_time" and 1 < len(log["batches"]) < 50


def test_verifier_calls_are_in_flight_together(observation):
    # Three calls must meet at the barrier: sequential calls would break it (timeout) and fail.
    barrier = threading.Barrier(3, timeout=10)
    model = ScriptedModel(
        [[trace((231, 181), (500, 350), tag=f"C{k}") for k in range(3)]], {"C1": 0.9}, barrier=barrier
    )
    result = reasoner(model, traces_per_batch=3, reasoning_verifier={"concurrency": 3}).reason(query(observation))
    assert len(model.verify_requests) == 3 and "C1" in result.text


def test_history_of_the_last_k_steps_reaches_the_verifier(observation):
    model = ScriptedModel([[trace((231, 181), (500, 350), tag=f"STEP{k}")] for k in range(4)], {"STEP": 0.9})
    tts = reasoner(model, reasoning_verifier={"history": 2})
    answers: list[str] = []
    for step in range(4):
        tts.reason(query(observation, step=step, history=answers))
        answers.append(f"answer {step}")
    first, last = ("".join(m.text for m in model.verify_requests[k]) for k in (0, 3))
    assert "Recent History" not in first
    history = last[: last.rfind("<think>")]
    assert "STEP1" in history and "STEP2" in history and "STEP0" not in history
    # A new task (step 0, no history) starts with an empty buffer.
    tts.reason(query(observation, step=0))
    assert "Recent History" not in "".join(m.text for m in model.verify_requests[-1])


def test_verifier_request_shares_its_static_prefix_and_draws_the_trace(observation):
    other = trace((232, 182), (500, 350), tag="OTHER")
    model = ScriptedModel([[GOOD, other]], {"GOOD": 0.9, "OTHER": 0.2})
    reasoner(model, traces_per_batch=2).reason(query(observation))
    parts = [request[-1].parts for request in model.verify_requests]
    assert parts[0][0] == parts[1][0] and "Overall Objective" in parts[0][0]  # static text first
    drawn = [[p for p in request if isinstance(p, ViewImage)] for request in parts]
    raw = observation.views[0].rgb
    assert not np.array_equal(drawn[0][0].rgb, raw)  # anchors drawn on the view
    assert not np.array_equal(drawn[0][0].rgb, drawn[1][0].rgb)  # each trace its own drawing
    assert {"GOOD" in p[-1] for p in parts} == {True, False}  # the reasoning comes last


def test_action_scaling_moves_an_edge_pick_to_the_segment_centre(observation):
    edge = trace((202, 152), (500, 350), tag="EDGE")
    model = ScriptedModel([[edge]], {"EDGE": 0.9})
    chosen = reasoner(model, actions_per_trace=4).reason(query(observation)).extra["tts"]["chosen"]
    assert chosen["source"] == "segment_centre"
    assert abs(chosen["pick"]["u"] - 230) <= 2 and abs(chosen["pick"]["v"] - 180) <= 2
    # Without action scaling the answer is run as written.
    model = ScriptedModel([[edge]], {"EDGE": 0.9})
    plain = reasoner(model, actions_per_trace=1).reason(query(observation))
    assert plain.extra["tts"]["chosen"]["source"] == "as_written" and plain.interpretation.pick.u < 205


def test_a_pick_on_a_depth_hole_is_ineligible_and_another_view_is_used():
    observation = tabletop([CUP], holes=[(220, 170, 242, 192)], views=2)
    text = trace((231, 181), (500, 350), tag="HOLE", extra_pick_views={1: (215, 160)})
    model = ScriptedModel([[text]], {"HOLE": 0.9})
    log = (
        reasoner(model, actions_per_trace=2, actions={"sources": ["as_written", "other_view"]})
        .reason(query(observation))
        .extra["tts"]
    )
    pairs = log["batches"][0]["pairs"]
    assert pairs[0]["source"] == "as_written" and pairs[0]["action_refusal"].startswith("pick_")
    assert not pairs[0]["eligible"]
    assert log["chosen"]["source"] == "other_view" and log["chosen"]["pick"]["img_idx"] == 1


def test_epsilon_one_explores_reproducibly(observation):
    def run() -> dict:
        model = ScriptedModel([[GOOD]], {"GOOD": 0.9})
        return reasoner(model, selection={"epsilon": 1.0}).reason(query(observation)).extra["tts"]

    first, second = run(), run()
    assert first["stop_reason"] == "explored" and first["chosen"] == second["chosen"]


class _RecordingArm:
    """The arm edge: records pick-and-places (pick pixel, dry run); picks left of ``ik_limit_u`` have no IK
    solution, and nothing moves for them."""

    def __init__(self, ik_limit_u: float, status: str = "ik_fail") -> None:
        self.ik_limit_u, self.status = ik_limit_u, status
        self.calls: list[tuple[float, bool]] = []

    def pick_place(self, pick, place, *, dry_run, on_stage, should_stop) -> MotionOutcome:
        self.calls.append((pick.u, dry_run))
        if pick.u < self.ik_limit_u:
            return MotionOutcome(False, self.status, "no IK solution")
        return MotionOutcome(True, executed=not dry_run)


def _static_projector() -> SnapshotProjector:
    T_base_cam = make_transform(np.array([[0.0, -1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, -1.0]]), [0.5, 0.0, 1.0])
    return SnapshotProjector(Projector([ViewConfig("view0", 0, CameraMount("static", T_base_cam))]))


def _etts_loop(observation, model, arm, **settings):
    from robopin.reasoning import ReasoningConfig, ReasoningLoop

    class _Observer:
        def observe(self):
            return observation

    values = {"type": "etts", "seed": 0, "max_batches": 1, "selection": {"epsilon": 0.0}, **settings}
    return ReasoningLoop(ReasoningConfig(reasoner=values, max_steps=1), model, _Observer(), _static_projector(), arm)


@pytest.mark.parametrize("dry_run", [False, True])
def test_the_step_plans_etts_next_best_pair_while_the_chosen_one_finds_no_plan(observation, dry_run):
    from robopin.reasoning import TaskRequest

    # The best-scored candidate, the segment centre (u 229.5-230.5), has no IK here; a point inside the segment
    # further right (u 251.5) has. No dry run before the step: the step's own planning is the plan check.
    arm = _RecordingArm(ik_limit_u=240.0)
    model = ScriptedModel([[trace((204, 176), (500, 350), tag="EDGE")]], {"EDGE": 0.9})
    loop = _etts_loop(observation, model, arm, actions_per_trace=3, action_verifier={"plan_check_top_k": 3})
    result = loop.run(TaskRequest("put the cup on the free spot", dry_run=dry_run))
    assert result.success, result.message
    log = loop.reasoner.last_log.as_dict()
    chosen, fallbacks = log["chosen"], log["fallbacks"]
    assert len(fallbacks) == 2 and chosen["joint"] >= fallbacks[0]["joint"] >= fallbacks[1]["joint"]
    # The chosen pair, then the next-best, each planned once as the task asks (dry or real); the third never.
    assert arm.calls == [(chosen["pick"]["u"], dry_run), (fallbacks[0]["pick"]["u"], dry_run)], arm.calls
    assert chosen["pick"]["u"] < 240 <= fallbacks[0]["pick"]["u"]
    (step,) = result.steps
    assert any("found no plan (ik_fail" in note and "next-best pair 1" in note for note in step.notes), step.notes
    assert step.targets[0].u == fallbacks[0]["pick"]["u"]  # the step records the targets it ran
    assert any("next-best" in line for line in step_log_lines(log, 0))


def test_without_the_plan_check_or_on_a_fault_that_is_no_target_s_the_step_ends_with_the_chosen_pair(observation):
    from robopin.reasoning import TaskRequest

    edge = trace((204, 176), (500, 350), tag="EDGE")
    for action_verifier, status in (({"plan_check_top_k": 1}, "ik_fail"), ({"plan": 0.0}, "ik_fail"),
                                    ({"plan_check_top_k": 3}, "stale_world")):
        arm = _RecordingArm(ik_limit_u=240.0, status=status)
        loop = _etts_loop(observation, ScriptedModel([[edge]], {"EDGE": 0.9}), arm, actions_per_trace=3,
                          action_verifier=action_verifier)
        result = loop.run(TaskRequest("put the cup on the free spot"))
        assert not result.success and result.reason == status and len(arm.calls) == 1, (action_verifier, arm.calls)


def test_the_action_verifier_projects_while_the_reasoning_verifiers_call_is_out(observation):
    # Each verifier call waits for a projection of the candidates to begin: run in turn (reasoning verifier, then
    # actions) the wait ends by its timeout; run side by side the projection begins during the call.
    projecting = threading.Event()

    class _SignallingProjector:
        def __init__(self) -> None:
            self.inner = _static_projector()

        def project(self, requests, observation):
            projecting.set()
            return self.inner.project(requests, observation)

    overlapped = []
    model = ScriptedModel([[trace((204, 176), (500, 350), tag="EDGE")]], {"EDGE": 0.9},
                          on_verify=lambda messages: overlapped.append(projecting.wait(timeout=5.0)))
    tts = reasoner(model, actions_per_trace=3)
    tts.bind_stages(projector=_SignallingProjector())
    log = tts.reason(query(observation)).extra["tts"]
    tts.close()
    assert overlapped == [True] and log["stop_reason"] == "accepted"


def test_a_refused_reasoning_verifier_call_leaves_no_projection_behind(observation):
    from robopin.vlm.errors import VLMTimeoutError

    running, started = [], threading.Event()

    class _SlowProjector:
        def __init__(self) -> None:
            self.inner = _static_projector()

        def project(self, requests, observation):
            running.append(requests)
            started.set()
            time.sleep(0.2)
            running.remove(requests)
            return self.inner.project(requests, observation)

    def fail(messages):
        started.wait(timeout=5.0)  # the refusal comes while the candidates' projection is under way
        raise VLMTimeoutError("verifier timed out")

    tts = reasoner(ScriptedModel([[GOOD]], {"GOOD": 0.9}, on_verify=fail), actions_per_trace=2)
    tts.bind_stages(projector=_SlowProjector())
    with pytest.raises(TaskRefusal, match="timed out"):
        tts.reason(query(observation))
    # The refusal reaches the loop only after the projection under way has ended: the loop's next request to the
    # projection never meets this step's still running.
    assert started.is_set() and running == []
    tts.close()


def test_the_loop_runs_etts_chosen_by_configuration(observation):
    from robopin.reasoning import ReasoningConfig, ReasoningLoop, TaskRequest

    class _Observer:
        def observe(self):
            return observation

    T_base_cam = make_transform(np.array([[0.0, -1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, -1.0]]), [0.5, 0.0, 1.0])
    projector = SnapshotProjector(Projector([ViewConfig("view0", 0, CameraMount("static", T_base_cam))]))
    arm = _RecordingArm(ik_limit_u=0.0)
    model = ScriptedModel([[BAD], [GOOD]], {"BAD": 0.1, "GOOD": 0.9})
    settings = {"type": "etts", "seed": 0, "max_batches": 3, "selection": {"epsilon": 0.0}}
    loop = ReasoningLoop(ReasoningConfig(reasoner=settings), model, _Observer(), projector, arm)
    result = loop.run(TaskRequest("put the cup on the free spot", dry_run=True))
    assert result.success, result.message
    assert isinstance(loop.reasoner, ETTSReasoner) and loop.reasoner.last_log.stop_reason == "accepted"
    (record,) = result.reasoning
    assert record.text == GOOD and record.candidates == 2  # both sampled traces are on the record
    # The loop binds its projector to E-TTS; the one pick-and-place planned is the step's own (a dry run, as the
    # task asked), of the pick E-TTS chose (the cup's segment centre), not the mug.
    assert len(arm.calls) == 1 and all(dry_run for _, dry_run in arm.calls)
    assert 200 <= arm.calls[-1][0] < 260


def test_cancel_is_honoured_between_batches(observation):
    from robopin.reasoning import TaskCanceled

    canceled = threading.Event()
    # The client cancels while the first batch is being verified; that batch ends, no other starts.
    model = ScriptedModel([[BAD], [GOOD]], {"BAD": 0.1, "GOOD": 0.9}, on_verify=lambda messages: canceled.set())
    q = dataclasses.replace(query(observation), should_stop=canceled.is_set)
    with pytest.raises(TaskCanceled, match="after 1 batch"):
        reasoner(model, max_batches=3).reason(q)
    assert len(model.generate_requests) == 1 and model.feedback_requests == []


def _two_view_projector() -> SnapshotProjector:
    T_base_cam = make_transform(np.array([[0.0, -1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, -1.0]]), [0.5, 0.0, 1.0])
    views = [ViewConfig(f"view{k}", k, CameraMount("static", T_base_cam)) for k in (0, 1)]
    return SnapshotProjector(Projector(views))


def test_the_action_verifier_refuses_a_pick_whose_other_view_pin_is_on_another_object():
    # Run-time evidence only: the other view pinned obj_01 on the mug; no ground truth is read.
    observation = tabletop([CUP, MUG], views=2)
    wrong = trace((231, 181), (500, 350), tag="WRONG", extra_pick_views={1: (420, 120)})
    right = trace((231, 181), (500, 350), tag="RIGHT", extra_pick_views={1: (252, 202)})  # 6 cm away, same cup
    model = ScriptedModel([[wrong], [right]], {"WRONG": 0.9, "RIGHT": 0.9})
    tts = reasoner(model, max_batches=2, actions_per_trace=1, action_verifier={"plan": 0.0})
    tts.bind_stages(projector=_two_view_projector())
    log = tts.reason(query(observation)).extra["tts"]
    first, second = (batch["pairs"][0] for batch in log["batches"])
    assert first["action_refusal"] == "pick_views_disagree" and not first["eligible"]
    assert second["eligible"] and second["action_features"]["agreement"] > 0
    assert log["chosen"]["trace"] == 1


def test_a_pick_on_the_bare_table_is_refused_and_the_next_batch_is_taken(observation):
    off = trace((120, 400), (500, 350), tag="OFF")  # no object there: the grasp would close on nothing
    model = ScriptedModel([[off], [GOOD]], {"OFF": 0.9, "GOOD": 0.9})
    log = reasoner(model, max_batches=2, actions_per_trace=1).reason(query(observation)).extra["tts"]
    first = log["batches"][0]["pairs"][0]
    assert first["action_refusal"] == "pick_not_on_object" and not first["eligible"]
    assert log["chosen"]["trace"] == 1


class _CountingProjector:
    """The real SnapshotProjector, counting its calls (each a ProjectPoints round trip through the nodes)."""

    def __init__(self, inner) -> None:
        self.inner, self.calls = inner, []

    def project(self, requests, observation):
        self.calls.append(len(requests))
        return self.inner.project(requests, observation)


def test_the_action_verifier_projects_a_batch_of_candidates_in_one_call_with_the_scores_of_one_call_per_point(
        monkeypatch):
    from robopin.reasoning.tts import verifiers

    observation = tabletop([CUP, MUG], views=2)
    traces = [trace((231, 181), (500, 350), tag="A", extra_pick_views={1: (420, 120)}),
              trace((231, 181), (500, 350), tag="B", extra_pick_views={1: (252, 202)})]

    def chosen_pairs(projector):
        model = ScriptedModel([traces], {"A": 0.9, "B": 0.8})
        tts = reasoner(model, max_batches=1, actions_per_trace=3, action_verifier={"plan": 0.0})
        tts.bind_stages(projector=projector)
        return [(p["action_score"], p["action_refusal"]) for p in tts.reason(query(observation)).extra["tts"]
                ["batches"][0]["pairs"]]

    batched = _CountingProjector(_two_view_projector())
    together = chosen_pairs(batched)
    assert len(batched.calls) == 1 and batched.calls[0] > 6  # every candidate's points and pick groups at once
    monkeypatch.setattr(verifiers._Scoring, "prefetch", lambda *args, **kwargs: None)
    one_by_one = _CountingProjector(_two_view_projector())
    assert chosen_pairs(one_by_one) == together
    assert len(one_by_one.calls) > 3 and max(one_by_one.calls) <= 2
    assert any(refusal == "pick_views_disagree" for _, refusal in together)  # the group projection still fuses
