"""E-TTS configuration: the paper's defaults, validation naming bad values, and the registry hook."""

from __future__ import annotations

import pytest

from robopin.reasoning import ReasoningConfig, make_reasoner, reasoner_types
from robopin.reasoning.errors import ReasoningConfigError
from robopin.reasoning.tts import ETTSReasoner, FeasibilityVerifier, NoActionVerifier, TTSConfig, TTSConfigError
from tests.reasoning.tts.helpers import ScriptedModel


def test_defaults_are_the_papers():
    config = TTSConfig()
    assert config.selection.epsilon == 0.1
    assert config.selection.threshold == 0.4
    assert config.reasoning_verifier.history == 3
    assert config.selection.on_exhausted == "execute_best"
    assert config.reasoning_budget == config.traces_per_batch * config.max_batches


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"selection": {"epsilon": 1.5}}, "selection.epsilon must be a number in \\[0, 1\\], got 1.5"),
        ({"selection": {"threshold": -0.1}}, "selection.threshold"),
        ({"selection": {"on_exhausted": "retry"}}, "on_exhausted must be one of"),
        ({"max_batches": 0}, "max_batches must be an integer >= 1, got 0"),
        ({"actions_per_trace": 2.5}, "actions_per_trace must be an integer"),
        ({"temperature": 3}, "temperature must be in \\[0, 2\\], got 3"),
        ({"traces_per_batch": 4, "temperature": 0.0}, "traces_per_batch=4 needs temperature > 0"),
        ({"action_verifier": {"normalization": "softmax"}}, "normalization must be one of"),
        ({"action_verifier": {"depth": -1}}, "action_verifier.depth"),
        ({"actions": {"sources": ["segment_centre", "as_written"]}}, "'as_written' must come first"),
        ({"actions": {"sources": ["guess"]}}, "actions.sources must be a non-empty subset"),
        (
            {"reasoning_verifier": {"examples": [{"instruction": "x", "observation": "y", "answer": "maybe"}]}},
            "yes or no",
        ),
        ({"reasoning_verifier": {"vlm": {"model": "x"}}}, "backend mapping with a 'type'"),
        ({"feedback": {"colour": "red"}}, "unknown feedback setting\\(s\\) \\['colour'\\]"),
        ({"budget": {"max_time_s": -1}}, "budget.max_time_s"),
        ({"beam_width": 3}, "unknown E-TTS setting\\(s\\) \\['beam_width'\\]"),
    ],
)
def test_bad_values_are_named(values, message):
    with pytest.raises(TTSConfigError, match=message):
        TTSConfig.from_dict(values)


def test_config_errors_are_reasoning_config_errors():
    # The loop reports reasoner misconfiguration at start-up as ReasoningConfigError.
    assert issubclass(TTSConfigError, ReasoningConfigError)


def test_examples_from_yaml_mappings():
    config = TTSConfig.from_dict(
        {
            "reasoning_verifier": {
                "examples": [{"instruction": "put the duck", "observation": "duck ringed", "answer": "yes"}]
            }
        }
    )
    (example,) = config.reasoning_verifier.examples
    assert (example.instruction, example.answer) == ("put the duck", True)


def test_best_of_n_preset_switches_the_modules_off():
    config = TTSConfig.best_of_n(8)
    assert (config.traces_per_batch, config.max_batches, config.actions_per_trace) == (8, 1, 1)
    assert (config.selection.epsilon, config.selection.threshold) == (0.0, 0.0)
    assert not config.feedback.enabled and config.action_verifier.type == "none"


def test_the_loop_registry_builds_etts_from_configuration():
    assert "etts" in reasoner_types()
    backend = ScriptedModel()
    settings = {"type": "etts", "max_batches": 2, "action_verifier": {"type": "none"}}
    ReasoningConfig(reasoner=settings)  # the loop's own validation accepts the block
    reasoner = make_reasoner(settings, backend)
    assert isinstance(reasoner, ETTSReasoner)
    assert reasoner.config.max_batches == 2 and isinstance(reasoner.action_verifier, NoActionVerifier)
    default = make_reasoner({"type": "etts"}, backend)
    assert isinstance(default.action_verifier, FeasibilityVerifier)
    with pytest.raises(ReasoningConfigError, match="unknown E-TTS setting"):
        make_reasoner({"type": "etts", "m": 4}, backend)


def test_unknown_action_verifier_type_is_named():
    with pytest.raises(TTSConfigError, match="unknown action verifier type 'learned'"):
        make_reasoner({"type": "etts", "action_verifier": {"type": "learned"}}, ScriptedModel())
