"""Shared pytest fixtures: one ROS domain per test run, loopback-only DDS, isolated rclpy contexts."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from robopin.env import apply_ros_environment, test_domain_id

# Before anything imports rclpy: loopback discovery, the project's Fast DDS profile, logs in a temp
# dir, and a domain of our own so parallel runs on one machine never see each other.
_RUN_LOG_DIR = tempfile.mkdtemp(prefix="robopin-test-ros-log-")
apply_ros_environment(
    domain_id=int(os.environ.get("ROBOPIN_TEST_DOMAIN_ID", test_domain_id())),
    log_dir=_RUN_LOG_DIR,
    localhost_only=True,
)

_SHM = Path("/dev/shm")


def _fastdds_shm_files() -> set[Path]:
    return set(_SHM.glob("fastdds_*")) if _SHM.is_dir() else set()


def _mapped_shm_files() -> set[str]:
    """Names of /dev/shm files any live process still has mapped or open (so they must stay)."""
    in_use: set[str] = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            maps = (proc / "maps").read_text(errors="replace")
        except OSError:
            continue
        for line in maps.splitlines():
            if "/dev/shm/" in line:
                in_use.add(line.rsplit("/", 1)[-1].replace(" (deleted)", ""))
        try:
            for fd in (proc / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("/dev/shm/"):
                    in_use.add(target.rsplit("/", 1)[-1])
        except OSError:
            continue
    return in_use


@pytest.fixture(scope="session", autouse=True)
def _clean_dds_shared_memory():
    """Remove the Fast DDS shared-memory files this run left behind once nobody maps them."""
    before = _fastdds_shm_files()
    yield
    leftovers = _fastdds_shm_files() - before
    if leftovers:
        in_use = _mapped_shm_files()
        for path in leftovers:
            if path.name not in in_use:
                path.unlink(missing_ok=True)


@pytest.fixture
def ros_env() -> dict[str, str]:
    """Environment for a child process that must join this test run's ROS graph."""
    return dict(os.environ)


@pytest.fixture
def ros_context():
    """An initialised rclpy Context of its own, shut down after the test."""
    import rclpy
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        yield context
    finally:
        if context.ok():
            rclpy.shutdown(context=context)
