"""R^3 subtask outputs: free reasoning, then one instruction line checked against a skill grammar.

The high-level model of R^3 writes its reasoning and ends with a single short instruction for a
fixed low-level skill (``Instruction: push the red star to the top left corner``). Only instructions
of an allowed form may reach the skill, so :func:`parse_subtask` matches the line against a
:class:`SkillGrammar` of formats such as ``"pick {object} and place it in {container}"``, optionally
with a closed vocabulary per slot, and never raises on any text.

Accepted variants: an ``Instruction:`` label in any case (or none: the last non-empty line), Markdown
bold or quotes around the instruction, a trailing period, and ``<think>…</think><answer>…</answer>``
wrappers (the answer is the instruction).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from robopin.pincot.trace import Issue

_SLOT = re.compile(r"\{(?P<slot>[A-Za-z_]\w*)\}")
_LABEL = re.compile(r"^\s*(?:[*_#>\-\s]*)(?:next\s+)?instruction\s*[*_]*\s*:\s*(?P<instruction>.*)$", re.IGNORECASE)
_THINK = re.compile(r"<\s*think\s*>(?P<body>.*?)<\s*/\s*think\s*>", re.IGNORECASE | re.DOTALL)
_ANSWER = re.compile(r"<\s*answer\s*>(?P<body>.*?)(?:<\s*/\s*answer\s*>|$)", re.IGNORECASE | re.DOTALL)
DONE_INSTRUCTIONS = frozenset({"done", "task complete", "finished", "stop"})


class GrammarError(ValueError):
    """A skill format or slot vocabulary is unusable."""


def _normal(text: str) -> str:
    return " ".join(text.lower().split())


@dataclass(frozen=True)
class SkillFormat:
    """One allowed instruction form, e.g. ``"push the {block} to the {location}"``."""

    pattern: str
    skill: str = ""

    def __post_init__(self) -> None:
        if not self.pattern.strip():
            raise GrammarError("a skill format must be non-empty")
        slots = self.slots
        if len(slots) != len(set(slots)):
            raise GrammarError(f"format {self.pattern!r} names a slot twice")

    @property
    def slots(self) -> tuple[str, ...]:
        """Slot names in order."""
        return tuple(match["slot"] for match in _SLOT.finditer(self.pattern))

    def regex(self) -> re.Pattern[str]:
        """A case-insensitive, whitespace-tolerant regex with one named group per slot."""
        parts = []
        position = 0
        for match in _SLOT.finditer(self.pattern):
            parts.append(_literal(self.pattern[position : match.start()]))
            parts.append(f"(?P<{match['slot']}>.+?)")
            position = match.end()
        parts.append(_literal(self.pattern[position:]))
        return re.compile("^" + "".join(parts) + "$", re.IGNORECASE)


def _literal(text: str) -> str:
    return r"\s+".join(re.escape(word) for word in text.split(" ")) if text else ""


@dataclass(frozen=True)
class SkillGrammar:
    """The instructions a low-level skill accepts: formats plus optional closed slot vocabularies."""

    formats: tuple[SkillFormat, ...]
    vocabulary: Mapping[str, frozenset[str]] = field(default_factory=dict)
    allow_done: bool = True

    def __post_init__(self) -> None:
        if not self.formats:
            raise GrammarError("a skill grammar needs at least one format")
        names = {s for f in self.formats for s in f.slots}
        unknown = set(self.vocabulary) - names
        if unknown:
            raise GrammarError(f"vocabulary for slot(s) {sorted(unknown)} that no format uses ({sorted(names)})")

    @classmethod
    def from_formats(
        cls,
        formats: Iterable[str | SkillFormat],
        vocabulary: Mapping[str, Iterable[str]] | None = None,
        *,
        allow_done: bool = True,
    ) -> SkillGrammar:
        """Build from format strings and ``{slot: allowed values}``."""
        built = tuple(f if isinstance(f, SkillFormat) else SkillFormat(f) for f in formats)
        vocab = {k: frozenset(_normal(v) for v in values) for k, values in (vocabulary or {}).items()}
        return cls(built, vocab, allow_done)

    def format_strings(self) -> list[str]:
        """The formats as shown in a prompt."""
        return [f.pattern for f in self.formats]


@dataclass(frozen=True)
class SubtaskResponse:
    """A parsed R^3 output: reasoning, the instruction and its matched format and slot values."""

    text: str
    reasoning: str
    instruction: str
    skill_format: SkillFormat | None = None
    slots: Mapping[str, str] = field(default_factory=dict)
    done: bool = False
    errors: tuple[Issue, ...] = ()
    warnings: tuple[Issue, ...] = ()

    @property
    def valid(self) -> bool:
        """True when the instruction matches the grammar (or is ``done`` where allowed)."""
        return not self.errors


def _clean_instruction(line: str, warnings: list[Issue]) -> str:
    cleaned = line.strip()
    stripped = cleaned.strip("*_`\"'“” \t")
    if stripped != cleaned:
        warnings.append(Issue("instruction_decorated", f"removed quotes or emphasis around {cleaned!r}"))
    if stripped.endswith("."):
        stripped = stripped[:-1].rstrip()
    return " ".join(stripped.split())


def _split(text: str, warnings: list[Issue]) -> tuple[str, str | None]:
    """(reasoning, instruction line or None)."""
    answer = _ANSWER.search(text)
    if answer is not None:
        think = _THINK.search(text)
        reasoning = think["body"].strip() if think else text[: answer.start()].strip()
        body = answer["body"].strip()
        lines = [line for line in body.splitlines() if line.strip()]
        for line in lines:
            label = _LABEL.match(line)
            if label:
                return reasoning, label["instruction"]
        return reasoning, lines[-1] if lines else None
    lines = text.splitlines()
    for index in range(len(lines) - 1, -1, -1):
        label = _LABEL.match(lines[index])
        if label:
            after = [line for line in lines[index + 1 :] if line.strip()]
            if after:
                warnings.append(Issue("text_after_instruction", f"ignored {len(after)} line(s) after the instruction"))
            instruction = label["instruction"]
            if not instruction.strip() and after:
                instruction = after[0]  # "Instruction:" on its own line, the instruction below it
            return "\n".join(lines[:index]).strip(), instruction
    non_empty = [line for line in lines if line.strip()]
    if len(non_empty) >= 2:
        warnings.append(Issue("instruction_unlabelled", "no 'Instruction:' line; using the last line"))
        return "\n".join(non_empty[:-1]).strip(), non_empty[-1]
    return text.strip(), None


def parse_subtask(text: str, grammar: SkillGrammar) -> SubtaskResponse:
    """Split reasoning and instruction and check the instruction against ``grammar``; never raises."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    warnings: list[Issue] = []
    errors: list[Issue] = []
    reasoning, line = _split(text, warnings)
    if line is None or not line.strip():
        errors.append(Issue("missing_instruction", "no instruction line found after the reasoning"))
        return SubtaskResponse(text, reasoning, "", errors=tuple(errors), warnings=tuple(warnings))
    instruction = _clean_instruction(line, warnings)
    if _normal(instruction) in DONE_INSTRUCTIONS:
        if not grammar.allow_done:
            errors.append(Issue("instruction_not_in_grammar", f"{instruction!r}: this skill has no 'done'"))
        return SubtaskResponse(text, reasoning, instruction, done=True, errors=tuple(errors), warnings=tuple(warnings))
    for skill_format in grammar.formats:
        match = skill_format.regex().match(instruction)
        if match is None:
            continue
        slots = {name: " ".join(value.split()) for name, value in match.groupdict().items()}
        bad = {
            name: value
            for name, value in slots.items()
            if name in grammar.vocabulary and _normal(value) not in grammar.vocabulary[name]
        }
        if bad:
            for name, value in bad.items():
                allowed = sorted(grammar.vocabulary[name])
                errors.append(Issue("unknown_slot_value", f"{name}={value!r} is not one of {allowed}"))
            continue
        return SubtaskResponse(text, reasoning, instruction, skill_format, slots, errors=(), warnings=tuple(warnings))
    if not errors:
        errors.append(
            Issue(
                "instruction_not_in_grammar",
                f"{instruction!r} matches none of the allowed formats {grammar.format_strings()}",
            )
        )
    return SubtaskResponse(text, reasoning, instruction, errors=tuple(errors), warnings=tuple(warnings))
