"""The cameras the shipped real system files declare are ones the pinned librealsense can drive."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
REAL_SYSTEMS = sorted((ROOT / "config").glob("real_*.yaml"))
# librealsense 2.55.1 release notes: "Removed support for L515, SR300" (PR #12002); requirements pin 2.59.
DROPPED = re.compile(r"\b(L5\d\d|SR3\d\d)\b")
REALSENSE_MODEL = re.compile(r"\b(D4\d\d|D5\d\d|L5\d\d|SR3\d\d)\b")


def _pinned_pyrealsense2() -> str:
    for line in (ROOT / "requirements" / "cameras.txt").read_text().splitlines():
        if line.startswith("pyrealsense2=="):
            return line.split("==", 1)[1]
    raise AssertionError("pyrealsense2 is not pinned in requirements/cameras.txt")


def test_the_pinned_librealsense_is_past_the_l515_removal():
    assert tuple(int(v) for v in _pinned_pyrealsense2().split(".")[:3]) >= (2, 55, 1)


@pytest.mark.parametrize("path", REAL_SYSTEMS, ids=lambda p: p.stem)
def test_real_system_file_declares_only_realsense_models_the_sdk_drives(path):
    document = yaml.safe_load(path.read_text())
    realsense_nodes = [
        name
        for name, node in document["nodes"].items()
        if node.get("executable") == "camera_node" and node.get("parameters", {}).get("backend") == "realsense"
    ]
    if not realsense_nodes:
        pytest.skip(f"{path.name} has no RealSense camera")
    described = REALSENSE_MODEL.findall(document["description"])
    assert len(described) >= len(realsense_nodes), (document["description"], realsense_nodes)
    assert not DROPPED.findall(document["description"]), document["description"]
