"""docker/entrypoint.sh run for real against a stand-in ROS install (the one part absent here): it sources
ROS and the workspace, picks the Fast DDS profile, refuses bad settings by name, and execs the command."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.deploy.deploy_files import DOCKER, REPO

ENTRYPOINT = DOCKER / "entrypoint.sh"


@pytest.fixture
def image_root(tmp_path: Path) -> Path:
    """A folder laid out like /opt/robopin in the image, with stand-in ROS setup scripts."""
    home = tmp_path / "opt-robopin"
    shutil.copytree(REPO / "config", home / "config")
    (home / "ros2_ws" / "install").mkdir(parents=True)
    (home / "ros2_ws" / "install" / "setup.bash").write_text("export ROBOPIN_WS_SOURCED=1\n")
    (tmp_path / "ros-setup.bash").write_text("export ROS_SETUP_SOURCED=1\n")
    (tmp_path / "data").mkdir()
    return home


def run_entrypoint(image_root: Path, *command: str, **settings: str) -> subprocess.CompletedProcess[str]:
    env = {
        # The venv first, so `python3` in the entry point is the one with robopin installed.
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(image_root.parent),
        "ROBOPIN_HOME": str(image_root),
        "ROBOPIN_ROS_SETUP": str(image_root.parent / "ros-setup.bash"),
        "ROBOPIN_DATA_DIR": str(image_root.parent / "data"),
        **settings,
    }
    return subprocess.run(
        ["bash", str(ENTRYPOINT), *command], capture_output=True, text=True, env=env, timeout=120
    )


def environment_of(result: subprocess.CompletedProcess[str]) -> dict[str, str]:
    assert result.returncode == 0, result.stderr
    return dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)


def test_sources_ros_and_the_workspace_and_sets_the_loopback_profile(image_root):
    env = environment_of(run_entrypoint(image_root, "env"))
    assert env["ROS_SETUP_SOURCED"] == "1" and env["ROBOPIN_WS_SOURCED"] == "1"
    profile = str(image_root / "config" / "fastdds.xml")
    assert env["FASTRTPS_DEFAULT_PROFILES_FILE"] == profile
    assert env["FASTDDS_DEFAULT_PROFILES_FILE"] == profile
    assert env["RMW_IMPLEMENTATION"] == "rmw_fastrtps_cpp"


def test_the_network_profile_is_chosen_by_name(image_root):
    env = environment_of(run_entrypoint(image_root, "env", ROBOPIN_DDS_PROFILE="fastdds_network"))
    assert env["FASTRTPS_DEFAULT_PROFILES_FILE"] == str(image_root / "config" / "fastdds_network.xml")


def test_an_explicit_profile_file_wins(image_root, tmp_path):
    own = tmp_path / "site.xml"
    own.write_text("<dds/>")
    env = environment_of(run_entrypoint(image_root, "env", FASTRTPS_DEFAULT_PROFILES_FILE=str(own)))
    assert env["FASTRTPS_DEFAULT_PROFILES_FILE"] == str(own)


def test_an_unknown_profile_is_refused_by_name(image_root):
    result = run_entrypoint(image_root, "env", ROBOPIN_DDS_PROFILE="cyclone")
    assert result.returncode == 2
    assert "ROBOPIN_DDS_PROFILE=cyclone names no file" in result.stderr


def test_the_command_replaces_the_shell(image_root):
    # exec: signals from `docker stop` reach the node itself, which stops the arm.
    process = subprocess.Popen(
        ["bash", str(ENTRYPOINT), "sh", "-c", "echo $$"],
        stdout=subprocess.PIPE,
        text=True,
        env={
            "PATH": "/usr/bin:/bin",
            "ROBOPIN_HOME": str(image_root),
            "ROBOPIN_ROS_SETUP": str(image_root.parent / "ros-setup.bash"),
            "ROBOPIN_DATA_DIR": str(image_root.parent / "data"),
        },
    )
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 0
    assert int(output.strip()) == process.pid


@pytest.mark.slow  # the check imports torch (~15 s on the 2-core machine)
@pytest.mark.skipif(importlib.util.find_spec("curobo") is not None, reason="cuRobo is installed here")
def test_the_cuda_image_refuses_to_start_without_cuda(image_root):
    # This machine has no cuRobo and no GPU: the CUDA image's start-up check must say so, not start.
    result = run_entrypoint(image_root, "true", ROBOPIN_REQUIRE_CUROBO="1")
    assert result.returncode != 0
    assert "cuRobo cannot run in this container" in result.stderr and "--gpus all" in result.stderr
    skipped = run_entrypoint(image_root, "true", ROBOPIN_REQUIRE_CUROBO="1", ROBOPIN_SKIP_GPU_CHECK="1")
    assert skipped.returncode == 0, skipped.stderr


def _folder_every_user_can_enter() -> Path | None:
    """A temporary folder whose every ancestor others may search (x), or None: the checkout and pytest's
    own temporary folder may sit under a 0700 folder, which uid 65534 cannot pass."""
    for candidate in dict.fromkeys((tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm")):
        path = Path(candidate)
        if path.is_dir() and all(p.stat().st_mode & 0o001 for p in (path, *path.parents)):
            return path
    return None


@pytest.fixture
def image_root_for_any_user(tmp_path: Path):
    """image_root's layout plus the entry point itself, copied where uid 65534 can read them."""
    parent = _folder_every_user_can_enter()
    if parent is None:
        pytest.skip("no temporary folder here that every user can enter")
    root = Path(tempfile.mkdtemp(prefix="robopin-entrypoint-", dir=parent))
    try:
        home = root / "opt-robopin"
        shutil.copytree(REPO / "config", home / "config")
        (home / "ros2_ws" / "install").mkdir(parents=True)
        (home / "ros2_ws" / "install" / "setup.bash").write_text("export ROBOPIN_WS_SOURCED=1\n")
        (root / "ros-setup.bash").write_text("export ROS_SETUP_SOURCED=1\n")
        shutil.copy(ENTRYPOINT, root / "entrypoint.sh")
        (root / "data").mkdir()  # owned by root, 0755: what Docker makes of a missing bind-mount source
        for path in (root, *root.rglob("*")):
            path.chmod(0o755 if path.is_dir() else 0o644)
        yield home
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_an_unwritable_data_folder_is_refused_with_the_fix(image_root_for_any_user):
    root = image_root_for_any_user.parent
    result = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bash", str(root / "entrypoint.sh"), "true"],
        capture_output=True,
        text=True,
        env={
            "PATH": "/usr/bin:/bin",
            "ROBOPIN_HOME": str(image_root_for_any_user),
            "ROBOPIN_ROS_SETUP": str(root / "ros-setup.bash"),
            "ROBOPIN_DATA_DIR": str(root / "data"),
        },
        cwd=root,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert "is not writable by uid 65534" in result.stderr and "mkdir -p trials" in result.stderr
