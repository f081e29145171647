"""A system file loaded: parsed key by key (:mod:`~robopin.system.schema`), then checked across nodes."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from robopin.system.checks import check_system
from robopin.system.node_parameters import check_parameter_names
from robopin.system.schema import SystemFile, SystemFileError, parse_system, resolve_system_path

__all__ = ["in_namespace", "load_system", "system_from_dict"]


def system_from_dict(data: Mapping[str, Any], *, source: str | Path = "<dict>") -> SystemFile:
    """Build and validate a :class:`SystemFile` from parsed YAML; errors name ``source`` and the key."""
    system = parse_system(data, source=source)
    # Every node parameter, nested-setting key and backend option must be one its node takes: checked first, as a
    # misspelled key (views, backend) would otherwise surface as a disagreement between the nodes.
    check_parameter_names(system)
    check_system(system)
    return system


def load_system(name_or_path: str | Path, overrides: Mapping[str, str] | None = None) -> SystemFile:
    """Read, validate and (when ``overrides`` is given) apply the arguments of a system file."""
    path = resolve_system_path(name_or_path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise SystemFileError(f"{path}: not valid YAML: {error}") from None
    system = system_from_dict(data, source=path.resolve())
    return system if overrides is None else system.with_arguments(overrides)


def in_namespace(system: SystemFile, namespace: str) -> SystemFile:
    """``system`` with every node in ``namespace`` (``robopin up --namespace``, the launch file's ``namespace:=``),
    checked again: a parameter naming a robopin topic absolutely would now reach another robot's."""
    moved = system.with_namespace(namespace)
    check_system(moved)
    return moved
