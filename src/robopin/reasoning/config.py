"""Configuration of the reasoning loop: modes, step limits, sampling, skills, plan actions, workspace.

One :class:`ReasoningConfig` per deployment (a ``reasoning:`` block of the deployment YAML, or the
task node's parameters). Everything is validated when it is built, with messages naming the bad
value, so a typo fails at start-up rather than in the middle of a task.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from robopin.geometry import WorkspaceBox
from robopin.pincot.r3 import SkillFormat, SkillGrammar, parse_subtask
from robopin.reasoning.errors import ReasoningConfigError
from robopin.vlm.prompts import ANSWER_FORMATS

LOOP_PROMPT_TEMPLATES = ("reasoning", "pincot_suffix")
"""The registry's prompt templates the loop can write (Embodied-R1's ``embodied_r1`` is not one yet)."""

MODES = ("auto", "point", "subtask", "plan")
"""Reasoning modes: RoboPIN pointing (``point``), R^3 subtask steering (``subtask``), RoboGPT-R1 plans
(``plan``), or ``auto`` (chosen from the instruction by :meth:`ReasoningConfig.choose_mode`)."""

EXECUTABLE_SKILLS = ("pick_place",)
"""Skills the loop can carry out: ``pick_place`` grounds the instruction with a pointing query (PinCoT
pick and place points) and runs one pick-and-place."""

DEFAULT_SKILLS: tuple[tuple[str, str], ...] = (
    ("pick up the {object} and place it on the {target}", "pick_place"),
    ("pick up the {object} and place it in the {target}", "pick_place"),
    ("put the {object} on the {target}", "pick_place"),
    ("put the {object} in the {target}", "pick_place"),
)
"""The default skill library: one-step pick-and-place instructions in R^3's short imperative style."""

DEFAULT_LONG_HORIZON_PATTERNS: tuple[str, ...] = (
    r"\ball\b",
    r"\bevery\b",
    r"\beach\b",
    r"\bone by one\b",
    r"\bthen\b",
    # A plural noun as what is picked ("pick up yellow objects"), not one mentioned as a landmark.
    r"\b(pick up|pick|put|move|collect|gather)\s+(the\s+)?(\w+\s+){0,2}(objects|things|items|toys|blocks|cubes)\b",
    r"\b(sort|tidy|clear|stack)\b",
)
"""Words that make ``auto`` treat an instruction as long-horizon (several steps) rather than one step."""


@dataclass(frozen=True)
class SkillSpec:
    """One skill-library entry: an instruction format (``{slot}`` placeholders) and the skill it runs."""

    format: str
    skill: str = "pick_place"

    def __post_init__(self) -> None:
        if not isinstance(self.format, str) or not self.format.strip():
            raise ReasoningConfigError(f"a skill format must be non-empty text, got {self.format!r}")
        if self.skill not in EXECUTABLE_SKILLS:
            raise ReasoningConfigError(
                f"skill {self.skill!r} of format {self.format!r} is not executable; expected one of {EXECUTABLE_SKILLS}"
            )


@dataclass(kw_only=True)
class ReasoningConfig:
    """How the loop reasons and when it stops.

    Attributes:
        mode: default mode when a request says ``auto`` or nothing.
        max_steps: step limit of long-horizon tasks when the request gives none (0).
        long_horizon_mode: the mode ``auto`` picks for long-horizon instructions (``point`` = RoboPIN's
            step loop with history; ``subtask`` = R^3; ``plan`` = RoboGPT-R1).
        long_horizon_patterns: regular expressions (case-insensitive); an instruction matching any is
            long-horizon.
        view_roles: view name → short role shown to the model ("static camera facing the robot").
        temperature, max_tokens: sampling of the model.
        reasoner: the reason stage, ``{"type": "single"}`` (one sample) or another registered type
            (E-TTS: ``{"type": "etts", ...}``) with its own settings.
        skills: the skill library of subtask mode (and the executable forms of plan actions).
        vocabulary: optional closed vocabularies per skill slot (slot → allowed values).
        actions: RoboGPT-R1's action dictionary (ID → action name) for plan mode; every name must be
            an instruction of the skill library. Empty: plan mode is not available.
        workspace: targets outside this box are refused (``outside_workspace``) before any motion,
            in addition to the projection's own check. None: rely on the projection's check.
        cross_view_check: also project the other views' anchors of the pick and place IDs, so the
            projection checks that they lie on one object (refusing ``views_disagree`` when they do
            not) and can fall back to another view's anchor when one view's depth cannot be trusted.
        history_limit: how many earlier steps the step prompt shows.
        label_views: prefix each image with ``Image i (name):`` in the request.
        system_prompt: optional system message (RoboPIN was trained without one).
        prompt_dir: a folder of prompt templates overriding the packaged ones.
        prompt_template: how pointing queries are worded, from the model's registry entry
            (``robopin models show NAME --vlm-config``): ``reasoning`` (our templates: view roles, anchor
            rules, history) or ``pincot_suffix`` (RoboPIN's published form: the task text and its
            answer-format suffix, nothing else). Subtask and plan queries always use R^3's and
            RoboGPT-R1's own prompts; their grounding queries follow this setting.
        answer_format: the answer format of the model's registry entry; the reasoning loop reads
            ``pincot`` (``<think>`` with anchors, JSON ``<answer>``) and refuses a configuration that
            pairs RoboPIN's suffix, which asks for exactly that, with another format.
    """

    mode: str = "auto"
    max_steps: int = 8
    long_horizon_mode: str = "point"
    long_horizon_patterns: tuple[str, ...] = DEFAULT_LONG_HORIZON_PATTERNS
    view_roles: Mapping[str, str] = field(default_factory=dict)
    temperature: float = 0.0
    max_tokens: int = 1024
    reasoner: Mapping[str, Any] = field(default_factory=lambda: {"type": "single"})
    skills: tuple[SkillSpec, ...] = tuple(SkillSpec(f, s) for f, s in DEFAULT_SKILLS)
    vocabulary: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    actions: Mapping[int, str] = field(default_factory=dict)
    workspace: WorkspaceBox | None = None
    cross_view_check: bool = True
    history_limit: int = 10
    label_views: bool = False
    system_prompt: str | None = None
    prompt_dir: str | None = None
    prompt_template: str = "reasoning"
    answer_format: str = "pincot"

    def __post_init__(self) -> None:
        if self.prompt_template not in LOOP_PROMPT_TEMPLATES:
            raise ReasoningConfigError(
                f"prompt_template must be one of {LOOP_PROMPT_TEMPLATES} (the forms the reasoning loop writes), "
                f"got {self.prompt_template!r}"
            )
        if self.answer_format not in ANSWER_FORMATS:
            raise ReasoningConfigError(f"answer_format must be one of {ANSWER_FORMATS}, got {self.answer_format!r}")
        if self.prompt_template == "pincot_suffix" and self.answer_format != "pincot":
            raise ReasoningConfigError(
                f"prompt_template 'pincot_suffix' asks for RoboPIN's <think>/<answer> form; answer_format must be "
                f"'pincot', got {self.answer_format!r}"
            )
        if self.mode not in MODES:
            raise ReasoningConfigError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.long_horizon_mode not in MODES[1:]:
            raise ReasoningConfigError(f"long_horizon_mode must be one of {MODES[1:]}, got {self.long_horizon_mode!r}")
        if isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int) or self.max_steps < 1:
            raise ReasoningConfigError(f"max_steps must be an integer >= 1, got {self.max_steps!r}")
        if not 0.0 <= float(self.temperature) <= 2.0:
            raise ReasoningConfigError(f"temperature must be in [0, 2], got {self.temperature!r}")
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ReasoningConfigError(f"max_tokens must be an integer >= 1, got {self.max_tokens!r}")
        if not isinstance(self.history_limit, int) or self.history_limit < 0:
            raise ReasoningConfigError(f"history_limit must be an integer >= 0, got {self.history_limit!r}")
        self.long_horizon_patterns = tuple(self.long_horizon_patterns)
        for pattern in self.long_horizon_patterns:
            try:
                re.compile(pattern)
            except re.error as error:
                raise ReasoningConfigError(f"long_horizon_patterns entry {pattern!r} is not a regex: {error}") from None
        if not isinstance(self.reasoner, Mapping) or not isinstance(self.reasoner.get("type"), str):
            raise ReasoningConfigError(f"reasoner must be a mapping with a 'type', got {self.reasoner!r}")
        self.skills = tuple(s if isinstance(s, SkillSpec) else _skill_from(s) for s in self.skills)
        if not self.skills:
            raise ReasoningConfigError("the skill library is empty; subtask and plan modes need at least one skill")
        try:
            self._grammar = SkillGrammar(
                tuple(SkillFormat(s.format, s.skill) for s in self.skills),
                {
                    slot: frozenset(" ".join(v.lower().split()) for v in values)
                    for slot, values in self.vocabulary.items()
                },
            )
        except ValueError as error:
            raise ReasoningConfigError(f"skill library: {error}") from None
        actions: dict[int, str] = {}
        for key, name in dict(self.actions).items():
            try:
                action_id = int(key)
            except (TypeError, ValueError):
                raise ReasoningConfigError(f"action dictionary key {key!r} is not an integer ID") from None
            if not isinstance(name, str) or not name.strip():
                raise ReasoningConfigError(f"action {action_id} needs a non-empty name, got {name!r}")
            if not parse_subtask(f"Instruction: {name}", self._grammar).valid:
                raise ReasoningConfigError(
                    f"action {action_id} {name!r} is not an instruction of the skill library "
                    f"{self._grammar.format_strings()}"
                )
            actions[action_id] = name
        self.actions = actions
        if isinstance(self.workspace, Mapping):
            self.workspace = WorkspaceBox.from_dict(self.workspace)

    @property
    def grammar(self) -> SkillGrammar:
        """The skill library as the R^3 parser's grammar."""
        return self._grammar

    def is_long_horizon(self, instruction: str) -> bool:
        """True when the instruction reads as several steps (it matches a long-horizon pattern)."""
        return any(re.search(p, instruction, re.IGNORECASE) for p in self.long_horizon_patterns)

    def choose_mode(self, requested: str, instruction: str) -> str:
        """The concrete mode for a request: ``requested`` unless auto/empty, else by the instruction."""
        mode = (requested or "auto").strip().lower()
        if mode not in MODES:
            raise ReasoningConfigError(f"mode must be one of {MODES}, got {requested!r}")
        if mode == "auto":
            mode = self.mode
        if mode == "auto":
            mode = self.long_horizon_mode if self.is_long_horizon(instruction) else "point"
        return mode

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> ReasoningConfig:
        """Build from a mapping (one YAML block), naming unknown keys."""
        known = {f.name for f in dataclasses.fields(cls) if f.init}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ReasoningConfigError(f"unknown reasoning setting(s) {unknown}; expected some of {sorted(known)}")
        values = dict(values)
        if "skills" in values:
            values["skills"] = tuple(_skill_from(s) for s in values["skills"])
        if "long_horizon_patterns" in values:
            values["long_horizon_patterns"] = tuple(values["long_horizon_patterns"])
        if "vocabulary" in values:
            values["vocabulary"] = {k: tuple(v) for k, v in dict(values["vocabulary"]).items()}
        return cls(**values)


def _skill_from(value: Any) -> SkillSpec:
    if isinstance(value, SkillSpec):
        return value
    if isinstance(value, str):
        return SkillSpec(value)
    if isinstance(value, Mapping) and "format" in value:
        return SkillSpec(str(value["format"]), str(value.get("skill", "pick_place")))
    if isinstance(value, list | tuple) and len(value) == 2:
        return SkillSpec(str(value[0]), str(value[1]))
    raise ReasoningConfigError(f"a skill is a format string or {{format, skill}}, got {value!r}")
