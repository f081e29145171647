"""Prompt builders for every reasoning mode, with the wording kept in editable template files.

Templates live in ``templates/*.txt`` beside this module and use ``$name`` placeholders
(:class:`string.Template`, so JSON braces need no escaping). A deployment can override any of them
by pointing :class:`PromptTemplates` at its own folder (e.g. ``config/prompts/``); files missing
there fall back to the packaged ones.

Builders return the text part of the request; images are attached by the VLM backend in view order,
so image ``i`` of the request is ``img_idx = i``.

- :func:`pointing_prompt`: RoboPIN pick-and-place pointing over N views (each view introduced with
  its index and role); ends with the sentence of RoboPIN's released inference prompt.
- :func:`step_prompt`: one step of a long-horizon task, carrying the history of earlier steps.
- :func:`subtask_prompt`: R^3's high-level prompt (goal, views, previous response, allowed instruction
  formats; trust the current view over history).
- :func:`plan_prompt`: RoboGPT-R1's executable-plan prompt with a per-task action dictionary.
- :func:`verifier_prompt`, :func:`feedback_prompt`, :func:`retry_prompt`: E-TTS's yes/no reasoning
  verifier (optional few-shot examples and history), feedback generation, and resampling with the
  feedback appended.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
TEMPLATE_NAMES = ("pointing", "step", "subtask", "plan", "verifier", "feedback", "retry")


class PromptError(ValueError):
    """A template is missing, names an unknown placeholder, or a builder got an unusable value."""


@dataclass(frozen=True)
class View:
    """One image given to the model: its config name and a short role ("static camera above the table")."""

    name: str
    role: str = ""

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise PromptError("view name must be non-empty")


@dataclass(frozen=True)
class StepRecord:
    """One earlier step of a long-horizon task, as shown to the model in the next step's prompt."""

    description: str
    outcome: str = ""


@dataclass(frozen=True)
class VerifierExample:
    """A few-shot example for the verifier: an instruction, what the image shows, and yes/no."""

    instruction: str
    observation: str
    answer: bool


@dataclass(frozen=True)
class HistoryEntry:
    """One earlier (observation, reasoning) pair shown to the verifier."""

    observation: str
    reasoning: str


@dataclass
class PromptTemplates:
    """Loads templates by name from ``directory`` (if given) falling back to the packaged ones."""

    directory: Path | None = None
    _cache: dict[str, string.Template] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.directory is not None:
            self.directory = Path(self.directory)
            if not self.directory.is_dir():
                raise PromptError(f"prompt template directory {str(self.directory)!r} does not exist")

    def path(self, name: str) -> Path:
        """The file that holds template ``name``."""
        if name not in TEMPLATE_NAMES:
            raise PromptError(f"unknown template {name!r}; expected one of {TEMPLATE_NAMES}")
        if self.directory is not None and (self.directory / f"{name}.txt").is_file():
            return self.directory / f"{name}.txt"
        return TEMPLATE_DIR / f"{name}.txt"

    def render(self, name: str, **values: object) -> str:
        """Fill template ``name``; every placeholder it uses must be given."""
        template = self._cache.get(name)
        if template is None:
            path = self.path(name)
            try:
                template = string.Template(path.read_text(encoding="utf-8"))
            except OSError as exc:
                raise PromptError(f"cannot read prompt template {str(path)!r}: {exc}") from exc
            self._cache[name] = template
        try:
            text = template.substitute({k: str(v) for k, v in values.items()})
        except KeyError as exc:
            raise PromptError(
                f"template {name!r} uses placeholder ${exc.args[0]} which this builder does not provide "
                f"(provided: {sorted(values)})"
            ) from exc
        except ValueError as exc:
            raise PromptError(f"template {name!r} is malformed: {exc}") from exc
        return text.rstrip("\n")


_DEFAULT = PromptTemplates()


def _templates(templates: PromptTemplates | None) -> PromptTemplates:
    return templates if templates is not None else _DEFAULT


def _require(label: str, text: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise PromptError(f"{label} must be a non-empty string, got {text!r}")
    return text.strip()


def describe_views(views: Sequence[View | str]) -> str:
    """``Image 0 (static): static camera …`` lines, one per view in img_idx order."""
    if not views:
        raise PromptError("at least one view is needed")
    lines = []
    for index, given in enumerate(views):
        view = View(given) if isinstance(given, str) else given
        role = f": {view.role}" if view.role else ""
        lines.append(f'- Image {index} (img_idx="{index}", {view.name}){role}')
    return "\n".join(lines)


def point_rule(convention: str = "norm1000", sizes: Sequence[tuple[int, int]] = ()) -> str:
    """The sentence telling the model how to write points (``$points`` in the templates).

    ``convention`` is the model's point convention (:data:`robopin.vlm.points.POINT_CONVENTIONS`);
    for ``pixels`` the original image sizes (``sizes``, per view) are named, as the model must know them.
    """
    axes = "x from the left edge, y from the top edge"
    if convention == "norm1000":
        return f"Points are normalized to 0-1000 in each image ({axes})."
    if convention == "pixels_resized":
        return f"Points are pixel coordinates of each image as you see it ({axes})."
    if convention == "pixels":
        named = ", ".join(f"image {i} is {w}x{h}" for i, (w, h) in enumerate(sizes))
        return f"Points are pixel coordinates of each original image ({axes}{'; ' + named if named else ''})."
    raise PromptError(f"unknown point convention {convention!r}")


def pointing_prompt(
    instruction: str,
    views: Sequence[View | str],
    *,
    templates: PromptTemplates | None = None,
    points: str = "",
) -> str:
    """RoboPIN pick-and-place pointing over ``views`` (answer: pick and place points with IDs).

    ``points`` is the :func:`point_rule` sentence (default: RoboPIN's 0-1000).
    """
    return _templates(templates).render(
        "pointing",
        instruction=_require("instruction", instruction),
        views=describe_views(views),
        num_views=len(views),
        points=points or point_rule(),
    )


def step_prompt(
    instruction: str,
    views: Sequence[View | str],
    history: Sequence[StepRecord | str],
    *,
    templates: PromptTemplates | None = None,
    points: str = "",
) -> str:
    """One step of a long-horizon task; ``history`` lists the earlier steps in order."""
    lines = []
    for number, given in enumerate(history, start=1):
        record = StepRecord(given) if isinstance(given, str) else given
        outcome = f" -> {record.outcome}" if record.outcome else ""
        lines.append(f"{number}. {record.description}{outcome}")
    return _templates(templates).render(
        "step",
        instruction=_require("instruction", instruction),
        views=describe_views(views),
        num_views=len(views),
        history="\n".join(lines) if lines else "(none yet)",
        step_number=len(history) + 1,
        points=points or point_rule(),
    )


def subtask_prompt(
    goal: str,
    views: Sequence[View | str],
    instruction_formats: Sequence[str],
    previous_response: str | None = None,
    *,
    templates: PromptTemplates | None = None,
) -> str:
    """R^3's high-level prompt: reasoning, then one ``Instruction:`` line in an allowed format."""
    if not instruction_formats:
        raise PromptError("at least one allowed instruction format is needed")
    return _templates(templates).render(
        "subtask",
        goal=_require("goal", goal),
        views=describe_views(views),
        num_views=len(views),
        previous_response=previous_response.strip() if previous_response else "(none: this is the first step)",
        formats="\n".join(f"- {f}" for f in instruction_formats),
    )


def plan_prompt(
    instruction: str,
    views: Sequence[View | str],
    actions: Mapping[int, str],
    *,
    templates: PromptTemplates | None = None,
) -> str:
    """RoboGPT-R1's plan prompt; ``actions`` is this task's action dictionary (ID → name)."""
    if not actions:
        raise PromptError("the action dictionary is empty")
    for action_id, name in actions.items():
        if isinstance(action_id, bool) or not isinstance(action_id, int) or not str(name).strip():
            raise PromptError(f"action dictionary entry {action_id!r}: {name!r} needs an int ID and a name")
    return _templates(templates).render(
        "plan",
        instruction=_require("instruction", instruction),
        views=describe_views(views),
        num_views=len(views),
        actions="\n".join(f"{action_id}: {name}" for action_id, name in sorted(actions.items())),
    )


def verifier_prompt(
    instruction: str,
    reasoning: str,
    *,
    observation: str = "the image(s) attached, with the reasoning drawn on them",
    examples: Sequence[VerifierExample] = (),
    history: Sequence[HistoryEntry] = (),
    templates: PromptTemplates | None = None,
) -> str:
    """E-TTS's reasoning verifier: answer only "yes" or "no" (read as P(yes) by the backend)."""
    example_lines = []
    if examples:
        example_lines.append("Below are several examples for reference:")
        for number, example in enumerate(examples, start=1):
            example_lines.append(
                f"Example {number}: Instruction: {example.instruction} Observation: {example.observation} "
                f"Answer: {'yes' if example.answer else 'no'}"
            )
    history_lines = []
    if history:
        history_lines.append("Recent History (oldest first):")
        for entry in history:
            history_lines.append(f"Observation: {entry.observation}\nReasoning Trace: {entry.reasoning}")
    return _templates(templates).render(
        "verifier",
        instruction=_require("instruction", instruction),
        reasoning=_require("reasoning", reasoning),
        observation=observation,
        examples="\n".join(example_lines),
        history="\n".join(history_lines),
    )


def feedback_prompt(
    instruction: str,
    reasoning: str,
    score: float,
    *,
    reward: float | None = None,
    templates: PromptTemplates | None = None,
) -> str:
    """E-TTS's feedback generation for a rejected batch (2-3 sentences of critique)."""
    return _templates(templates).render(
        "feedback",
        instruction=_require("instruction", instruction),
        reasoning=_require("reasoning", reasoning),
        score=f"{float(score):.2f}",
        reward_question="4. How can the action quality (reward) be improved?" if reward is not None else "",
        reward_section=f"Action Reward: {reward:.2f}" if reward is not None else "",
    )


def retry_prompt(
    prompt: str, previous_reasoning: str, feedback: str, *, templates: PromptTemplates | None = None
) -> str:
    """Append E-TTS's "Previous Attempt" block (the rejected reasoning and the critique) to a prompt."""
    return _templates(templates).render(
        "retry",
        prompt=_require("prompt", prompt),
        previous_reasoning=_require("previous reasoning", previous_reasoning),
        feedback=_require("feedback", feedback),
    )
