"""The xArm SDK's repeated error lines collapse to one line with a count (its own logger, as the SDK sets it up)."""

from __future__ import annotations

import io
import logging

import pytest

pytest.importorskip("xarm")


def test_the_sdk_loggers_repeated_not_connected_lines_collapse_to_a_count(monkeypatch):
    from xarm.core.utils.log import logger as sdk_logger

    from robopin.robots import xarm_arm

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    monkeypatch.setattr(sdk_logger, "handlers", [handler])
    monkeypatch.setattr(sdk_logger, "filters", [])
    monkeypatch.setattr(xarm_arm, "_SDK_REPEATS", xarm_arm.RepeatedLines(every_s=3600.0))
    xarm_arm._import_sdk()
    for _ in range(322):  # what a dropped controller printed before robopin's own line
        sdk_logger.error("xArm is not connected")
    sdk_logger.warning("something else")
    lines = stream.getvalue().splitlines()
    assert lines == ["xArm is not connected", "xArm is not connected (repeated 321 more time(s) in "
                     + lines[1].rsplit(" in ", 1)[1], "something else"], lines
