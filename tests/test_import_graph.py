"""The import graph of robopin and robopin_ros: no two modules import each other, the core never imports ROS code."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOTS = (REPO / "src", REPO / "ros2_ws" / "src" / "robopin_ros")

# Pairs that still import each other, to be emptied as they are untangled (no new pair may join).
KNOWN_CYCLES: set[frozenset[str]] = set()


def _modules() -> dict[str, Path]:
    modules = {}
    for root in ROOTS:
        for path in root.rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[0] not in ("robopin", "robopin_ros"):
                continue
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _imports(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``module`` imports anywhere in the file (in functions and TYPE_CHECKING blocks too).

    ``from package import name`` is an import of ``package.name`` where that is a module, else of ``package``.
    """
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            source = ".".join(part for part in (base, node.module) if part)
            found.update(f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names)
    return (found & set(modules)) - {module}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {module: _imports(module, path, modules) for module, path in modules.items()}


# The packages of robopin, bottom layer first: a package imports only from its own layer or the ones below it,
# and no two packages import each other. A new package gets a place here before it can pass.
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("foundation", frozenset({"robopin", "robopin.errors", "robopin.settings", "robopin.env", "robopin.stats",
                              "robopin.registry", "robopin.distributed"})),
    ("vocabulary: poses, cameras' geometry, the PinCoT format", frozenset({"robopin.geometry", "robopin.pincot"})),
    ("devices, models and motion", frozenset({"robopin.messages", "robopin.robots", "robopin.cameras",
                                              "robopin.vlm", "robopin.models", "robopin.motion"})),
    ("the task: graph names, the reasoning loop", frozenset({"robopin.interfaces", "robopin.reasoning"})),
    ("systems: the simulator, system files and node settings", frozenset({"robopin.sim", "robopin.system"})),
    ("recorded runs: bags, calibration", frozenset({"robopin.bags", "robopin.calibration"})),
    ("trials", frozenset({"robopin.trials"})),
    ("the command line", frozenset({"robopin.cli"})),
    ("the ROS package", frozenset({"robopin_ros"})),
)


def _package(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "robopin" else parts[0]


def _package_imports() -> dict[tuple[str, str], list[str]]:
    """(package, package it imports) -> the module imports that make the edge."""
    edges: dict[tuple[str, str], list[str]] = {}
    for module, imported in _graph().items():
        for other in imported:
            if _package(module) != _package(other):
                edges.setdefault((_package(module), _package(other)), []).append(f"{module} -> {other}")
    return edges


def test_every_package_has_a_layer_and_imports_only_downward():
    layer = {package: index for index, (_name, packages) in enumerate(LAYERS) for package in packages}
    packages = {_package(module) for module in _graph()}
    assert not packages - set(layer), f"packages without a layer in LAYERS: {sorted(packages - set(layer))}"
    edges = _package_imports()
    upward = sorted(f"{LAYERS[layer[a]][0]} imports {LAYERS[layer[b]][0]}: {edges[a, b][0]}"
                    for a, b in edges if layer[b] > layer[a])
    assert not upward, "imports from a lower layer to a higher one:\n" + "\n".join(upward)
    mutual = sorted(f"{a} <-> {b}: {edges[a, b][0]}; {edges[b, a][0]}" for a, b in edges if (b, a) in edges and a < b)
    assert not mutual, "packages that import each other:\n" + "\n".join(mutual)


def test_no_two_modules_import_each_other_beyond_the_known_pairs():
    graph = _graph()
    assert len(graph) > 100, "the module scan found too few modules"
    cycles = {frozenset((a, b)) for a, imported in graph.items() for b in imported if a in graph[b]}
    new = sorted(sorted(pair) for pair in cycles - KNOWN_CYCLES)
    assert not new, f"modules that import each other: {new}"


def test_the_core_never_imports_ros_code():
    """The commands that start the stack live in robopin_ros.cli; the entry point finds them by name."""
    graph = _graph()
    importers = sorted(m for m, imported in graph.items()
                       if m.startswith("robopin.") and any(i.startswith("robopin_ros") for i in imported))
    assert not importers, f"core modules importing robopin_ros: {importers}"


@pytest.mark.parametrize("text", ["from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import Thing\n",
                                  "def f():\n    from pkg import b\n", "from . import b\n"])
def test_the_scan_counts_type_only_lazy_and_relative_imports(tmp_path, text):
    """The forms the removed cycles took (a TYPE_CHECKING import, an import inside a function) are edges."""
    path = tmp_path / "a.py"
    path.write_text(text)
    assert _imports("pkg.a", path, {"pkg": tmp_path, "pkg.a": path, "pkg.b": tmp_path / "b.py"}) == {"pkg.b"}


def test_nothing_a_deployment_runs_imports_the_test_stand_ins():
    """The controller emulators and the tiny model live in tests/doubles and serve tests and benchmarks only:
    a robot or a model from there is never mistaken for the real one, and none ships in the packages."""
    importers = []
    for root in ROOTS:
        for path in root.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
                importers += [f"{path.relative_to(REPO)} imports {n}" for n in names if n.split(".")[0] == "tests"]
    assert not importers, f"runtime modules importing the test stand-ins: {importers}"
