"""E-TTS end to end in the simulator: the ground-truth oracle with injected errors as the candidate
source, a stub verifier over HTTP (the VLM tests' OpenAI-compatible stub, answering yes/no from
simulator ground truth), the reasoning loop with in-process projection and the scripted arm; and the
simulation study's own parts (verifier accuracy, success model)."""

from __future__ import annotations

import statistics
from typing import Any

import numpy as np
import pytest

from robopin.reasoning import ReasoningConfig, ReasoningLoop, TaskRequest
from robopin.reasoning.tts import ETTSReasoner, TTSConfig
from tests.reasoning.sim_stages import SimScriptedPickPlace, sim_stages

pytest.importorskip("pybullet")
pytest.importorskip("httpx")
pytestmark = pytest.mark.slow


def _text_of(body: dict[str, Any]) -> str:
    parts = []
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            parts.append(content)
        else:
            parts += [part["text"] for part in content if part["type"] == "text"]
    return "".join(parts)


def ground_truth_verifier_server(study):
    """The VLM tests' stub OpenAI server, with its yes/no answer taken from simulator ground truth."""
    from robopin.sim.tts_study import judge_trace
    from tests.vlm.conftest import StubOpenAIServer

    class GroundTruthVerifierServer(StubOpenAIServer):
        def __init__(self) -> None:
            super().__init__()
            self.verdicts: list[bool] = []

        def _verifier_answer(self, body: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
            # The question is the user's turns; the assistant's prefilled empty thinking block is not.
            text = _text_of({"messages": [m for m in body["messages"] if m["role"] != "assistant"]})
            ok = judge_trace(study, text[text.rfind("<think>") :])
            self.verdicts.append(ok)
            top = [
                {"token": "yes", "logprob": -0.05 if ok else -4.0},
                {"token": "no", "logprob": -4.0 if ok else -0.05},
            ]
            best = top[0] if ok else top[1]
            return best["token"], [{"token": best["token"], "logprob": best["logprob"], "top_logprobs": top}]

    return GroundTruthVerifierServer().start()


@pytest.fixture
def spatial():
    from robopin.sim.tasks import build_scene

    # Layout 5: the other duck stands in plain view of the static camera (1124 pixels), so a pick of it is
    # executable and only the verifier's "no" can turn it away (layout 0 hides most of it behind a teddy).
    scene = build_scene("spatial", 5, world_name="tts-e2e-spatial")
    yield scene
    scene.close()


def test_etts_rejects_the_wrong_duck_and_the_task_succeeds(spatial):
    from robopin.sim.oracle_backend import OracleBackend, OracleBackendConfig
    from robopin.sim.tasks import check_success
    from robopin.sim.tts_study import StudyScene
    from robopin.vlm.openai_backend import OpenAIBackend, OpenAIBackendConfig

    class RecordingOracle(OracleBackend):
        """The real oracle backend; keeps the requests it was sent (to see the feedback arrive)."""

        def __init__(self, config: OracleBackendConfig) -> None:
            super().__init__(config)
            self.prompts: list[str] = []

        def _generate(self, messages, params):
            self.prompts.append("".join(m.text for m in messages))
            return super()._generate(messages, params)

    judge = StudyScene(spatial)  # ground truth of the scene as built (renders once)
    server = ground_truth_verifier_server(judge)
    try:
        policy = RecordingOracle(
            OracleBackendConfig(world=spatial.world.name, errors={"wrong_target_probability": 0.6}, seed=0)
        )
        verifier = OpenAIBackend(OpenAIBackendConfig(base_url=server.base_url, max_retries=0))
        config = TTSConfig.from_dict(
            {"seed": 2, "max_batches": 4, "actions_per_trace": 3, "selection": {"epsilon": 0.0}}
        )
        observer, projector = sim_stages(spatial)
        arm = SimScriptedPickPlace(spatial)
        reasoner = ETTSReasoner(policy, config, verifier_backend=verifier)
        reasoner.bind_stages(projector=projector)
        loop = ReasoningLoop(ReasoningConfig(), policy, observer, projector, arm, reasoner=reasoner)
        result = loop.run(TaskRequest(spatial.spec.instruction))
        log = reasoner.last_log.as_dict()
    finally:
        server.stop()

    assert result.success, result.message
    assert check_success(spatial).success
    # The seed makes the first sample the wrong duck: the verifier said no, feedback was appended.
    assert server.verdicts[0] is False and log["batches"][0]["selection"]["mode"] == "rejected"
    assert "Previous Attempt" in policy.prompts[1] and log["batches"][0]["feedback"]
    assert server.verdicts[-1] is True and log["stop_reason"] == "accepted"
    # Every verifier call went over HTTP as a one-token request with the drawn views.
    yes_no = [r for r in server.chat_requests() if r.body.get("max_completion_tokens") == 1]
    assert len(yes_no) == log["calls"]["verify"] == len(server.verdicts)
    images = [p for p in yes_no[0].body["messages"][0]["content"] if p["type"] == "image_url"]
    assert len(images) == 2
    # Only the real pick-and-place moved the goal duck; the dry-run planner checks did not move anything.
    executed = [name for name, _, dry_run in arm.calls if not dry_run]
    assert executed == [spatial.task.goals[0].object]


@pytest.fixture(scope="module")
def study():
    from robopin.sim.tts_study import StudyScene

    scene = StudyScene.build("multi_view", 1)
    yield scene
    scene.close()


def test_study_verifier_has_its_configured_accuracy(study):
    from robopin.sim.tts_study import StudyPolicyBackend, StudyVerifierBackend, judge_trace
    from robopin.vlm.base import ChatMessage, SamplingParams

    policy = StudyPolicyBackend(study, {"wrong_target_probability": 0.5, "point_jitter_px": 3.0}, seed=3)
    texts = policy.generate([ChatMessage("user", ("x",))], SamplingParams(n=60)).texts
    truths = [judge_trace(study, t) for t in texts]
    assert 0 < sum(truths) < len(truths)  # both kinds sampled
    verifier = StudyVerifierBackend(study, 0.8, seed=5)
    agree = []
    for trial in range(10):
        verifier.reseed(trial)
        agree += [
            (verifier.score_yes_no([ChatMessage("user", (t,))]).p_yes > 0.5) == truth
            for t, truth in zip(texts, truths, strict=True)
        ]
    assert 0.75 <= statistics.fmean(agree) <= 0.85
    # The same trace in the same trial gets the same answer (call order does not matter).
    first = verifier.score_yes_no([ChatMessage("user", (texts[0],))]).p_yes
    assert verifier.score_yes_no([ChatMessage("user", (texts[0],))]).p_yes == first
    perfect = StudyVerifierBackend(study, 1.0, seed=5)
    assert all(
        (perfect.score_yes_no([ChatMessage("user", (t,))]).p_yes > 0.5) == ok
        for t, ok in zip(texts, truths, strict=True)
    )


def test_study_success_model_on_oracle_answers(study):
    from robopin.reasoning import interpret_pointing
    from robopin.sim.tts_study import StudyPolicyBackend, action_outcome, judge_trace
    from robopin.vlm.base import ChatMessage

    clean = StudyPolicyBackend(study, {}, seed=0).generate([ChatMessage("user", ("x",))]).texts[0]
    decision = interpret_pointing(clean, study.observation)
    assert judge_trace(study, clean) and action_outcome(study, decision.pick, decision.place).success
    wrong = (
        StudyPolicyBackend(study, {"wrong_target_probability": 1.0}, seed=0)
        .generate([ChatMessage("user", ("x",))])
        .texts[0]
    )
    decision = interpret_pointing(wrong, study.observation)
    assert not judge_trace(study, wrong)
    assert action_outcome(study, decision.pick, decision.place).reason == "wrong_object"
    # A pick moved 6 cm off the duck's pixel along the image misses or grasps off centre.
    far = decision.place.__class__(decision.pick.u + 60, decision.pick.v, decision.pick.img_idx)
    assert not action_outcome(study, far, decision.place).success
    assert np.isfinite(study.point_base(decision.pick)).all()
