"""The instructions the README's examples send, read from README.md itself (so tests and README cannot drift)."""

from __future__ import annotations

import shlex
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _commands() -> list[list[str]]:
    """Every ``.venv/bin/robopin …`` command line in the README's bash blocks, split as the shell would."""
    commands, in_bash = [], False
    for line in README.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_bash = line.strip() == "```bash"
            continue
        if in_bash and line.startswith(".venv/bin/robopin "):
            commands.append(shlex.split(line, comments=True))
    return commands


def instruct_examples() -> list[str]:
    """The instruction of every ``robopin instruct`` and ``robopin models show --instruction`` example."""
    found = []
    for words in _commands():
        if words[1] == "instruct":
            rest = words[2:]
            while rest and rest[0].startswith("--"):  # --namespace left, --dry-run
                rest = rest[2:] if rest[0] in ("--namespace", "--mode", "--wait") else rest[1:]
            found.append(rest[0])
        elif words[1:3] == ["models", "show"] and "--instruction" in words:
            found.append(words[words.index("--instruction") + 1])
    return found


def readme_instruction() -> str:
    """The instruction of the README's first ``robopin instruct`` example (the one beside ``robopin up``)."""
    return next(w[2] for w in _commands() if w[1] == "instruct" and not w[2].startswith("-"))


