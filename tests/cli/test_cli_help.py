"""Every command and subcommand of ``robopin`` answers ``--help`` with its usage and exit code 0."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from robopin.cli import build_parser, main


def _command_paths(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """``()`` and the words of every subcommand reachable from ``parser`` (``("bag", "replan")``, …)."""
    paths = [path]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, subparser in action.choices.items():
                paths += _command_paths(subparser, (*path, name))
    return paths


PATHS = _command_paths(build_parser())


def test_the_walk_finds_the_command_tree():
    commands = {" ".join(p) for p in PATHS}
    for expected in ("bag", "bag replan", "bag play", "cameras", "cameras list", "models show", "trial", "up",
                     "calibrate", "report"):
        assert expected in commands, sorted(commands)
    assert len(PATHS) > 15


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "robopin")
def test_every_command_answers_help_with_exit_code_0(path, capsys):
    with pytest.raises(SystemExit) as exited:
        main([*path, "--help"])
    assert exited.value.code == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert out.startswith("usage: robopin" + "".join(f" {word}" for word in path)), out[:300]


@pytest.mark.parametrize("words", [("cameras",), ("cameras", "list"), ("bag", "replan"), ("bag", "play")])
def test_help_through_the_installed_entry_point(words):
    """The same through a process of its own, as a user types it."""
    done = subprocess.run([sys.executable, "-m", "robopin.cli", *words, "--help"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: robopin " + " ".join(words)), done.stdout[:300]
