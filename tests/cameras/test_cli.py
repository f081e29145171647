"""``robopin cameras list``: real RealSense discovery (no device here) and ZED discovery through a FAKE pyzed.sl."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from robopin.cameras.cli import main

from .fake_pyzed_sl import install_fake_pyzed


def test_fake_sl_zed_cameras_are_listed_with_serials(monkeypatch):
    sl = install_fake_pyzed(monkeypatch)
    sl.STATE.devices = [31415, 27182]
    out = io.StringIO()
    assert main(["list", "--backend", "zed"], out) == 0
    text = out.getvalue()
    assert "serial 31415" in text and "serial 27182" in text
    assert "1280x720" in text


def test_json_output_reports_missing_zed_sdk(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyzed", None)
    out = io.StringIO()
    main(["list", "--backend", "zed", "--json"], out)
    data = json.loads(out.getvalue())
    assert data["cameras"] == []
    assert "ZED SDK" in data["unavailable"]["zed"]


def test_realsense_listing_runs_the_real_sdk_query():
    pytest.importorskip("pyrealsense2", reason="pyrealsense2 not installed")
    result = subprocess.run([sys.executable, "-m", "robopin.cameras", "list", "--backend", "realsense", "--json"],
                            capture_output=True, text=True, timeout=60, check=True)
    data = json.loads(result.stdout)
    assert "realsense" not in data["unavailable"]
    assert all(c["type"] == "realsense" and c["serial"] for c in data["cameras"])
