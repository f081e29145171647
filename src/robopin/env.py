"""The process environment every robopin entry point and test uses to reach ROS 2 safely.

One place decides: where the ament index is (the venv prefix on dev/CI, /opt/ros in the image),
that DDS discovery stays on loopback unless a deployment says otherwise, where ROS logs go, which
domain a test run uses, and which Fast DDS profile (large shared-memory segment for images) applies.
Importing this module changes nothing; call :func:`apply_ros_environment`.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping, MutableMapping
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
"""Root of a source checkout (only meaningful when installed editable)."""

FASTDDS_PROFILE = REPO_ROOT / "config" / "fastdds.xml"

# Jazzy's Fast DDS 2.14 reads the FASTRTPS_ name; Fast DDS 3 (Kilted) reads the FASTDDS_ name.
_PROFILE_VARIABLES = ("FASTRTPS_DEFAULT_PROFILES_FILE", "FASTDDS_DEFAULT_PROFILES_FILE")

# ROS_DOMAIN_ID must stay in 0..101 for Fast DDS port arithmetic on Linux (232 is the hard cap).
_TEST_DOMAIN_RANGE = (1, 101)


def ament_prefix() -> str:
    """Return the install prefix holding the ament index: the active venv, else /opt/ros/jazzy."""
    prefix = os.environ.get("VIRTUAL_ENV") or sys.prefix
    if Path(prefix, "share", "ament_index").is_dir():
        return prefix
    return "/opt/ros/jazzy"


def test_domain_id(seed: int | None = None) -> int:
    """Return a ROS_DOMAIN_ID for one test run, derived from the process id unless a seed is given."""
    low, high = _TEST_DOMAIN_RANGE
    value = os.getpid() if seed is None else seed
    return low + value % (high - low + 1)


def ros_environment(
    base: Mapping[str, str] | None = None,
    *,
    domain_id: int | None = None,
    log_dir: str | os.PathLike[str] | None = None,
    localhost_only: bool | None = None,
    use_profile: bool = True,
) -> dict[str, str]:
    """Return a copy of ``base`` (default: os.environ) with robopin's ROS 2 settings filled in.

    Values already present in ``base`` win unless an argument overrides them, so a deployment can
    widen discovery (``ROS_AUTOMATIC_DISCOVERY_RANGE=SUBNET``) or choose its domain.
    """
    env = dict(os.environ if base is None else base)
    prefix = ament_prefix()
    paths = [p for p in env.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    if prefix not in paths:
        paths.insert(0, prefix)
    env["AMENT_PREFIX_PATH"] = os.pathsep.join(paths)
    env.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    if localhost_only is True or (localhost_only is None and "ROS_AUTOMATIC_DISCOVERY_RANGE" not in env):
        env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    elif localhost_only is False:
        env.pop("ROS_AUTOMATIC_DISCOVERY_RANGE", None)
    if domain_id is not None:
        if not 0 <= domain_id <= 232:
            raise ValueError(f"ROS_DOMAIN_ID must be in 0..232, got {domain_id}")
        env["ROS_DOMAIN_ID"] = str(domain_id)
    if log_dir is not None:
        env["ROS_LOG_DIR"] = str(log_dir)
    elif "ROS_LOG_DIR" not in env:
        env["ROS_LOG_DIR"] = str(Path(tempfile.gettempdir()) / "robopin-ros-logs")
    if use_profile and FASTDDS_PROFILE.is_file():
        for name in _PROFILE_VARIABLES:
            env.setdefault(name, str(FASTDDS_PROFILE))
    elif not use_profile:
        for name in _PROFILE_VARIABLES:
            env.pop(name, None)
    return env


def apply_ros_environment(target: MutableMapping[str, str] | None = None, **kwargs) -> dict[str, str]:
    """Write :func:`ros_environment` into ``target`` (default: os.environ) before rclpy is imported."""
    target = os.environ if target is None else target
    env = ros_environment(target, **kwargs)
    for name in set(target) - set(env):
        del target[name]
    target.update(env)
    return env
