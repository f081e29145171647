"""The robopin command line dispatches to registered subcommand modules."""

import subprocess
import sys

import pytest

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


def test_named_errors_are_one_line_with_their_name_and_a_nonzero_exit(tmp_path, capsys):
    not_a_bag = tmp_path / "notes.txt"
    not_a_bag.write_text("not a bag\n")
    assert main(["bag", "info", str(not_a_bag)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"robopin bag: BagNotFoundError: cannot open {str(not_a_bag)!r} as a rosbag2 bag")
    assert "Traceback" not in err
    assert main(["report", str(tmp_path / "nothing")]) == 1
    assert capsys.readouterr().err.startswith("robopin report: ReportError: no finished trials")


def test_errors_that_are_not_robopins_keep_their_traceback(monkeypatch):
    import robopin.cli.cameras as cameras_cli

    def broken(args):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(cameras_cli, "_run", broken)  # main() builds its parser afresh and finds this
    with pytest.raises(ZeroDivisionError, match="a bug"):
        main(["cameras", "list"])
