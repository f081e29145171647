"""The robopin command line dispatches to registered subcommand modules."""

import subprocess
import sys

from robopin.cli import build_parser, main


def test_no_command_prints_help_and_fails(capsys):
    assert main([]) == 2
    assert "usage: robopin" in capsys.readouterr().out


def test_parser_builds_with_every_registered_module():
    parser = build_parser()
    assert parser.prog == "robopin"


def test_module_entry_point_runs():
    done = subprocess.run([sys.executable, "-m", "robopin.cli", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "usage: robopin" in done.stdout


def test_cameras_subcommand_lists_without_hardware(capsys):
    assert main(["cameras", "list", "--json"]) == 0
    assert capsys.readouterr().out.strip().startswith("{")
