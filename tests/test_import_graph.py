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
    """robopin.testing (controller emulators, a tiny model) serves tests and benchmarks only."""
    graph = _graph()
    stand_ins = {m for m in graph if m.startswith("robopin.testing")}
    importers = sorted(m for m, imported in graph.items() if m not in stand_ins and imported & stand_ins)
    assert not importers, f"runtime modules importing robopin.testing: {importers}"
