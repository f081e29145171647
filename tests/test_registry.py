"""The one backend registry: every family refuses an unknown type the same way, imports a backend only
when its type is used, registers classes where they are defined, and its base modules import no backend."""

from __future__ import annotations

import ast
import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest

from robopin.cameras import CAMERAS, Camera, CameraConfig, CameraDescription, make_camera
from robopin.motion.planner import PLANNERS, planner_config_from_dict
from robopin.reasoning.reasoner import REASONERS, make_reasoner
from robopin.registry import DuplicateTypeError, UnknownTypeError
from robopin.robots.base import ARMS, make_arm_config
from robopin.vlm.base import VLM_BACKENDS, VLMConfig, make_backend

SRC = Path(__file__).resolve().parents[1] / "src"

UNKNOWN = {
    "camera": (CAMERAS, lambda: make_camera({"type": "kinect"}), {"realsense", "zed", "bag", "sim"}),
    "arm": (ARMS, lambda: make_arm_config("ur5"), {"sim", "xarm", "franka"}),
    "planner": (PLANNERS, lambda: planner_config_from_dict({"type": "rrt"}), {"ompl", "roboplan", "curobo"}),
    "vlm": (VLM_BACKENDS, lambda: make_backend({"type": "llama"}), {"openai", "transformers", "oracle"}),
    "reasoner": (REASONERS, lambda: make_reasoner({"type": "nope"}, None), {"single", "etts"}),
}


@pytest.mark.parametrize("family", sorted(UNKNOWN))
def test_an_unknown_type_is_one_named_error_listing_the_known_types(family):
    registry, build, builtin = UNKNOWN[family]
    with pytest.raises(UnknownTypeError) as caught:
        build()
    error = caught.value
    assert builtin <= set(error.known) and error.known == registry.types()
    assert error.family == registry.family and str(error).startswith(f"unknown {registry.family} type ")
    assert all(repr(name) in str(error) for name in builtin)


def test_builtin_backends_are_imported_only_when_their_type_is_used():
    # A fresh interpreter, so modules other tests imported do not hide an eager import.
    probe = """
import json, sys
import robopin.cameras, robopin.motion, robopin.reasoning, robopin.robots, robopin.vlm
from robopin.cameras import CAMERAS
from robopin.motion.planner import PLANNERS, planner_config_from_dict
from robopin.reasoning.reasoner import REASONERS
from robopin.robots.base import ARMS
from robopin.vlm.base import VLM_BACKENDS
types = [registry.types() for registry in (CAMERAS, ARMS, PLANNERS, VLM_BACKENDS, REASONERS)]
before = sorted(m for m in sys.modules if m.startswith(BACKENDS))
config = planner_config_from_dict({"type": "curobo", "robot": "xarm6"})
after = sorted(m for m in sys.modules if m.startswith(BACKENDS))
print(json.dumps([before, type(config).__name__, after, [m for m in ("curobo", "torch") if m in sys.modules]]))
"""
    backends = (
        "robopin.cameras.realsense", "robopin.cameras.zed", "robopin.cameras.bag", "robopin.sim",
        "robopin.robots.xarm_arm", "robopin.robots.franka_arm", "robopin.motion.ompl_planner",
        "robopin.motion.roboplan_planner", "robopin.motion.curobo", "robopin.vlm.openai_backend",
        "robopin.vlm.transformers_backend", "robopin.reasoning.tts",
    )
    code = f"BACKENDS = {backends!r}\n{probe}"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    before, config_class, after, heavy = json.loads(out)
    assert before == [] and config_class == "CuroboPlannerConfig"
    # Reading a cuRobo config imports its plain-dataclass module, never the planner (cuRobo, torch).
    assert "robopin.motion.curobo.config" in after and "robopin.motion.curobo.planner" not in after
    assert heavy == []


def test_a_backend_registers_where_it_is_defined_and_a_second_claim_is_refused():
    @dataclasses.dataclass
    class LoopbackConfig(CameraConfig):
        type: ClassVar[str] = "registry-test-loopback"

    class Loopback(Camera):
        config_class = LoopbackConfig

        @staticmethod
        def find_cameras() -> list[CameraDescription]:
            return []

        def _connect(self) -> None: ...

        def _read(self, timeout_s: float): ...

        def _disconnect(self) -> None: ...

    class Subclassed(Loopback):  # inherits config_class: a variant, not a second backend of the type
        pass

    camera = make_camera({"type": "registry-test-loopback", "name": "loop"})
    assert type(camera) is Loopback and camera.config == LoopbackConfig(name="loop")
    assert "registry-test-loopback" in CAMERAS.types() and Subclassed.config_class is LoopbackConfig
    with pytest.raises(DuplicateTypeError, match=r"already served by .*Loopback"):

        class Impostor(Loopback):
            config_class = LoopbackConfig


def test_the_registry_key_is_type_and_type_name_is_refused_by_name():
    with pytest.raises(TypeError, match="'type', not 'type_name'"):

        @dataclasses.dataclass(kw_only=True)
        class OldStyleConfig(VLMConfig):
            type_name: ClassVar[str] = "old-style"


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth (function-level imports included)."""
    package = ".".join(path.relative_to(SRC).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module) if part)
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


OWNERS = {
    "robopin.cameras.base": CAMERAS,
    "robopin.robots.base": ARMS,
    "robopin.motion.planner": PLANNERS,
    "robopin.vlm.base": VLM_BACKENDS,
    "robopin.reasoning.reasoner": REASONERS,
}


def _module_path(module: str) -> Path:
    path = SRC / Path(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


@pytest.mark.parametrize("owner", sorted(OWNERS))
def test_no_family_base_module_imports_its_backends_or_is_imported_back(owner):
    """planner.py imported cuRobo's config, which imports planner.py: the cycle a lazy registry removes."""
    imported = _imports(_module_path(owner))
    backends = OWNERS[owner].declared_modules() - {owner}
    assert not imported & backends, f"{owner} imports its backends {sorted(imported & backends)}"
    robopin_modules = {m for m in imported if m.startswith("robopin.") and _module_path(m).is_file()}
    cycles = sorted(m for m in robopin_modules if owner in _imports(_module_path(m)))
    assert not cycles, f"{owner} and {cycles} import each other"
