"""ReasoningConfig: mode choice, validation messages that name the bad value, from_dict."""

from __future__ import annotations

import pytest

from robopin.reasoning import ReasoningConfig, ReasoningConfigError, SkillSpec


@pytest.mark.parametrize(
    ("instruction", "long_horizon"),
    [
        ("Pick up the duck in front of two toys and place it to the middle plate among plates.", False),
        ("Pick up yellow objects located outside the plates and place into the yellow plate.", True),
        ("put every cube in the tray", True),
        ("pick the cup, then the spoon", True),
        ("put the red cube on the blue plate", False),
    ],
)
def test_auto_mode_reads_long_horizon_from_the_instruction(instruction, long_horizon):
    config = ReasoningConfig(long_horizon_mode="subtask")
    assert config.is_long_horizon(instruction) is long_horizon
    assert config.choose_mode("auto", instruction) == ("subtask" if long_horizon else "point")
    assert config.choose_mode("", instruction) == config.choose_mode("auto", instruction)
    assert config.choose_mode("plan", instruction) == "plan"


def test_configured_default_mode_overrides_auto():
    assert ReasoningConfig(mode="subtask").choose_mode("auto", "put the duck on the plate") == "subtask"


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ({"mode": "fast"}, "'fast'"),
        ({"long_horizon_mode": "auto"}, "'auto'"),
        ({"max_steps": 0}, "max_steps"),
        ({"temperature": 3.0}, "3.0"),
        ({"long_horizon_patterns": ("(",)}, r"'\('"),
        ({"reasoner": {"n": 4}}, "type"),
        ({"actions": {1: "dance wildly"}}, "'dance wildly'"),
        ({"actions": {"one": "put the duck on the plate"}}, "'one'"),
        ({"skills": ()}, "empty"),
    ],
)
def test_bad_values_are_named(values, match):
    with pytest.raises(ReasoningConfigError, match=match):
        ReasoningConfig(**values)


def test_skill_must_be_executable():
    with pytest.raises(ReasoningConfigError, match="'wave'"):
        SkillSpec("wave at the {person}", "wave")


def test_from_dict_builds_skills_actions_and_workspace():
    config = ReasoningConfig.from_dict(
        {
            "mode": "plan",
            "skills": ["put the {object} on the {target}", {"format": "place the {object} in the {target}"}],
            "actions": {"1": "put the duck on the plate"},
            "vocabulary": {"object": ["duck", "cube"]},
            "workspace": {"min_xyz": [0.1, -0.5, -0.02], "max_xyz": [0.9, 0.5, 0.6]},
        }
    )
    assert config.actions == {1: "put the duck on the plate"}
    assert config.grammar.format_strings() == ["put the {object} on the {target}", "place the {object} in the {target}"]
    assert config.workspace is not None and config.workspace.contains([0.5, 0.0, 0.1])
    with pytest.raises(ReasoningConfigError, match="'colour'"):
        ReasoningConfig.from_dict({"colour": "red"})
