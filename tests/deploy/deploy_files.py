"""Helpers shared by the deployment checks: repository paths, compose interpolation, .dockerignore matching."""

from __future__ import annotations

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
