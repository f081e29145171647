"""docker/compose.yaml without a Docker engine: it parses, its commands exist, its mounts exist, the vLLM
flags equal the registry's, and the robot containers get the shared memory, devices and network the
Fast DDS profile, RealSense and the arm need. With a compose CLI installed, `config` validates it too."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess

import pytest

from robopin.cli import build_parser
from robopin.models import load_registry, vllm_arguments
from tests.deploy.deploy_files import COMPOSE_FILE, DOCKER, DOCKERFILE, REPO, compose_document, compose_services

ROBOT_SERVICES = ("robopin", "robopin-nodes", "recorder", "sim")


def robopin_subcommands() -> set[str]:
    parser = build_parser()
    actions = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    return set(actions[0].choices)


def node_scripts() -> set[str]:
    nodes = REPO / "ros2_ws" / "src" / "robopin_ros" / "robopin_ros"
    return {path.stem for path in nodes.glob("*_node.py") if "\ndef main(" in path.read_text(encoding="utf-8")}


def test_compose_parses_with_the_expected_services():
    document = compose_document()
    assert document["name"] == "robopin"
    assert set(document["services"]) == {"robopin", "robopin-nodes", "vllm", "recorder", "sim"}
    services = compose_services()
    assert services["recorder"]["profiles"] == ["record"], "the recorder is optional"
    assert services["sim"]["profiles"] == ["sim"]
    assert services["robopin-nodes"]["profiles"] == ["per-node"], "one process per node instead of `robopin`"
    assert "profiles" not in services["robopin"] and "profiles" not in services["vllm"]


def test_build_targets_exist_in_the_dockerfile():
    stage_names = {line.split()[-1] for line in DOCKERFILE.read_text().splitlines() if line.startswith("FROM ")}
    for name in ROBOT_SERVICES:
        build = compose_services()[name]["build"]
        assert (COMPOSE_FILE.parent / build["context"] / build["dockerfile"]).resolve() == DOCKERFILE
        assert build["target"] in stage_names
    assert compose_services({"ROBOPIN_TARGET": "cpu"})["robopin"]["build"]["target"] == "cpu"


@pytest.mark.parametrize("name", ROBOT_SERVICES)
def test_robot_containers_share_memory_network_and_stop_gently(name):
    service = compose_services()[name]
    # Fast DDS maps 32 MB of /dev/shm per participant (config/fastdds*.xml): the host IPC namespace,
    # or at least 512 MB, is needed for camera images between containers.
    assert service.get("ipc") == "host"
    assert service["network_mode"] == "host"
    assert service["restart"] == "no", "a robot process is never restarted without a person"
    assert service["stop_signal"] == "SIGINT" and service["init"] is True
    assert "user" not in service or not str(service["user"]).startswith("0"), "never root"
    profile = service["environment"]["ROBOPIN_DDS_PROFILE"]
    assert (REPO / "config" / f"{profile}.xml").is_file()
    network_profile = compose_services({"ROBOPIN_DDS_PROFILE": "fastdds_network"})[name]["environment"]
    assert (REPO / "config" / f"{network_profile['ROBOPIN_DDS_PROFILE']}.xml").is_file()


def test_the_robot_pc_service_reaches_usb_cameras_and_the_gpu():
    service = compose_services()["robopin"]
    assert "c 189:* rmw" in service["device_cgroup_rules"], "USB character devices (RealSense)"
    assert "/dev/bus/usb:/dev/bus/usb" in service["volumes"]
    (device,) = service["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
    assert service["environment"]["ROBOPIN_VLM_BASE_URL"] == "http://127.0.0.1:8000/v1"


def test_vllm_serves_robopin_4b_with_the_registry_flags():
    service = compose_services()["vllm"]
    assert service["entrypoint"] == ["vllm", "serve"]
    registry = load_registry()
    expected = vllm_arguments(registry["robopin-4b"], "/models/robopin-4b", host="0.0.0.0", port=8000)
    assert service["command"] == expected
    assert service["environment"]["HF_HUB_OFFLINE"] == "1", "a robot site never downloads at serve time"
    assert service["ports"] == ["127.0.0.1:8000:8000"], "loopback unless VLLM_BIND says otherwise"
    assert "/models:ro" in service["volumes"][0]
    other = compose_services({"ROBOPIN_MODEL": "qwen3-vl-8b-instruct", "VLLM_BIND": "0.0.0.0"})["vllm"]
    assert other["command"][0] == "/models/qwen3-vl-8b-instruct"
    assert other["ports"] == ["0.0.0.0:8000:8000"]


def test_the_vllm_healthcheck_asks_the_served_port():
    service = compose_services()["vllm"]
    port = service["command"][service["command"].index("--port") + 1]
    probe = " ".join(service["healthcheck"]["test"])
    assert f"127.0.0.1:{port}/health" in probe


@pytest.mark.parametrize("name", ("robopin", "robopin-nodes"))
def test_the_arm_containers_get_real_time_rights(name):
    # franka_ros2's docker-compose.yml: cap_add SYS_NICE; ulimits rtprio 99, rttime -1, memlock 8428281856.
    service = compose_services()[name]
    assert "SYS_NICE" in service["cap_add"]
    assert service["ulimits"]["rtprio"] == 99 and service["ulimits"]["rttime"] == -1
    assert service["ulimits"]["memlock"] == -1 or service["ulimits"]["memlock"] >= 2**30
    assert "privileged" not in service, "the capability, not every capability"


def test_the_per_node_profile_runs_the_same_devices_and_gpu_as_the_stack():
    services = compose_services()
    for key in ("device_cgroup_rules", "volumes", "deploy", "environment"):
        assert services["robopin-nodes"][key] == services["robopin"][key], key


def _commands() -> list[tuple[str, list[str]]]:
    services = compose_services()
    return [(name, services[name]["command"]) for name in ROBOT_SERVICES]


@pytest.mark.parametrize(("name", "command"), _commands(), ids=[name for name, _ in _commands()])
def test_service_commands_name_entry_points_that_exist(name, command):
    if command[:3] == ["ros2", "run", "robopin_ros"]:
        assert command[3] in node_scripts(), f"{name}: no robopin_ros node {command[3]!r} with a main()"
        return
    if command[:2] == ["ros2", "launch"]:
        # The launch file is installed into the package share (setup.py data_files) from the package's launch/.
        assert command[2] == "robopin_ros"
        assert (REPO / "ros2_ws" / "src" / "robopin_ros" / "launch" / command[3]).is_file(), command[3]
        system = re.fullmatch(r"system:=/opt/robopin/config/(?P<file>[\w.]+)", command[4])  # variables resolved
        assert system and (REPO / "config" / system["file"]).is_file(), command[4]
        return
    assert command[0] == "robopin", f"{name}: unexpected command {shlex.join(command)}"
    assert command[1] in robopin_subcommands()
    if command[1] == "up":
        # `robopin up /opt/robopin/config/${VAR:-default.yaml}`: the default system file must be in config/.
        default = re.search(r"\$\{\w+:-(?P<default>[^}]+)\}", command[2])
        system_file = default["default"] if default else command[2].rsplit("/", 1)[-1]
        assert (REPO / "config" / system_file).is_file(), f"{name}: no system file config/{system_file}"


def test_robopin_up_exists():
    assert "up" in robopin_subcommands()


def test_bind_mount_sources_exist_or_are_run_time_folders():
    # Folders made at run time (the runbook creates them); they must be ignored by git.
    created_at_run_time = {"../trials": (REPO / ".gitignore", "/trials/"),
                           "../models/weights": (REPO / "models" / ".gitignore", "weights/")}  # fmt: skip
    for name, service in compose_services().items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("/"):
                continue  # host devices (/dev/bus/usb, /run/udev)
            if source in created_at_run_time:
                ignore_file, entry = created_at_run_time[source]
                assert entry in ignore_file.read_text().splitlines(), f"{source} must be gitignored"
                continue
            assert (DOCKER / source).resolve().exists(), f"{name}: mount source {source} does not exist"


def _compose_cli() -> tuple[list[str], bool] | None:
    """The compose command here and whether it is the legacy Python docker-compose 1.x."""
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"], False
    legacy = shutil.which("docker-compose")
    return ([legacy], True) if legacy else None


@pytest.mark.skipif(_compose_cli() is None, reason="no docker compose / docker-compose CLI on this machine")
def test_compose_cli_validates_the_file(tmp_path):
    command, legacy = _compose_cli()
    compose_file = COMPOSE_FILE
    if legacy:
        # docker-compose 1.x (Debian 12's) predates the top-level `name` key; it validates the rest.
        # Users need Compose v2 (`docker compose`), which docker/README.md says.
        compose_file = tmp_path / "compose.yaml"
        compose_file.write_text(COMPOSE_FILE.read_text().replace("\nname: robopin\n", "\n"))
    result = subprocess.run(
        [*command, "-f", str(compose_file), "--project-directory", str(DOCKER), "--profile", "record",
         "--profile", "sim", "--profile", "per-node", "config", "-q"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path)},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_readme_says_what_was_verified():
    readme = (DOCKER / "README.md").read_text(encoding="utf-8")
    for fact in ("hadolint", "not built", "compose", "tests/deploy"):
        assert fact in readme
