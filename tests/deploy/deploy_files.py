"""Helpers shared by the deployment checks: repository paths, compose interpolation, .dockerignore matching."""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import re
import subprocess
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
DOCKERFILE = DOCKER / "Dockerfile"
COMPOSE_FILE = DOCKER / "compose.yaml"

_VARIABLE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?-)(?P<default>[^}]*))?\}")


def interpolate(value: Any, environment: Mapping[str, str] | None = None) -> Any:
    """Resolve ``${NAME}``, ``${NAME:-default}`` and ``${NAME-default}`` the way compose does, recursively."""
    environment = {} if environment is None else environment
    if isinstance(value, str):

        def substitute(match: re.Match[str]) -> str:
            name, op, default = match["name"], match["op"], match["default"] or ""
            if name in environment and (op != ":-" or environment[name] != ""):
                return environment[name]
            return default if op else ""

        return _VARIABLE.sub(substitute, value)
    if isinstance(value, list):
        return [interpolate(item, environment) for item in value]
    if isinstance(value, dict):
        return {key: interpolate(item, environment) for key, item in value.items()}
    return value


@cache
def compose_document() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))


def compose_services(environment: Mapping[str, str] | None = None) -> dict[str, dict]:
    """The compose services with variables resolved (defaults unless ``environment`` says otherwise)."""
    return interpolate(compose_document()["services"], environment)


@cache
def tracked_files() -> frozenset[str]:
    """Files git tracks: what a fresh clone (and so a CI or user build) has."""
    result = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True)
    return frozenset(name for name in result.stdout.decode().split("\0") if name)


def dockerignore_patterns() -> list[str]:
    lines = (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def _pattern_matches(pattern: str, parts: list[str]) -> bool:
    # A pattern matching a folder also excludes everything below it, so try the path and its parents.
    for end in range(1, len(parts) + 1):
        if pattern.startswith("**/"):
            # `**/` stands for any number of leading folders, none included.
            if any(fnmatch.fnmatchcase("/".join(parts[start:end]), pattern[3:]) for start in range(end)):
                return True
        elif fnmatch.fnmatchcase("/".join(parts[:end]), pattern):
            return True
    return False


def dockerignored(relative: str, patterns: list[str] | None = None) -> bool:
    """Whether Docker leaves ``relative`` (a path under the build context) out of the context.

    Supports the forms used here: a path or glob (which also excludes what is below it), ``**/``
    prefixes, and ``!`` exceptions; the last matching pattern wins, as in Docker.
    """
    patterns = dockerignore_patterns() if patterns is None else patterns
    parts = relative.strip("/").split("/")
    ignored = False
    for raw in patterns:
        negate = raw.startswith("!")
        if _pattern_matches(raw.lstrip("!").strip("/"), parts):
            ignored = not negate
    return ignored


def executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


# ----- Dockerfile, split into instructions the way Docker's own parser does -------------------------------
# moby/buildkit frontend/dockerfile/parser/parser.go (Parse): a line ending in the escape character
# (`\`, or the one an `# escape=` directive names) continues; inside a continuation, comment lines
# (first non-blank character `#`) are dropped and blank lines are skipped (with the warning
# "Empty continuation line found", to become an error), so the instruction goes on with the next line
# that has text. The instruction keyword is the first word, case-insensitive.
_DIRECTIVE = re.compile(r"^#\s*(?P<name>[A-Za-z][A-Za-z0-9_-]*)\s*=\s*(?P<value>\S+)\s*$")


@dataclasses.dataclass(frozen=True)
class DockerInstruction:
    instruction: str  # upper case: RUN, COPY, ...
    value: str  # the arguments, continuation lines joined as Docker joins them
    startline: int  # 0-based
    endline: int
    empty_continuation_lines: tuple[int, ...]  # 0-based lines Docker skipped inside this instruction

    @property
    def content(self) -> str:
        return f"{self.instruction} {self.value}"


def docker_instructions(text: str) -> list[DockerInstruction]:
    lines = text.splitlines()
    escape = "\\"
    index = 0
    # Parser directives: only comment lines of the form `# name=value` before anything else.
    while index < len(lines):
        match = _DIRECTIVE.match(lines[index].strip())
        if not match:
            break
        if match["name"].lower() == "escape":
            escape = match["value"]
        index += 1
    continuation = re.compile(rf"(?:^|[^{re.escape(escape)}]){re.escape(escape)}[ \t]*$")

    def strip_escape(line: str) -> tuple[str, bool]:
        if continuation.search(line):
            return line[: line.rstrip(" \t").rfind(escape)], True
        return line, False

    result: list[DockerInstruction] = []
    while index < len(lines):
        start = index
        first = lines[index].lstrip()
        index += 1
        if not first or first.startswith("#"):
            continue
        joined, going_on = strip_escape(first)
        empty: list[int] = []
        while going_on and index < len(lines):
            line = lines[index]
            index += 1
            if line.lstrip().startswith("#"):
                continue
            if not line.strip():
                empty.append(index - 1)
                continue
            part, going_on = strip_escape(line)
            joined += part
        keyword, _, value = joined.strip().partition(" ")
        result.append(DockerInstruction(keyword.upper(), value.strip(), start, index - 1, tuple(empty)))
    return result
