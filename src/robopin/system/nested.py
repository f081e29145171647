"""Nested settings (``vlm: {type, base_url, ...}``) as dotted ROS 2 parameters (``vlm.type``, ``vlm.base_url``).

A ROS 2 parameters file nests mappings and rcl flattens them into dotted names; that is what
``ros2 param get/set/describe`` show. :func:`flatten_setting` turns one nested setting of a system file
into those dotted parameters, :func:`nest_setting` rebuilds the mapping a node hands to the core.
A leaf ROS cannot type — a list holding mappings or lists (a 4x4 matrix), a mixed or empty list —
travels as the YAML flow text of that list and reads back as the list; ``None`` travels as ``~`` and an
empty mapping as ``{}``.
:data:`NESTED_PARAMETERS` names, per executable, the settings its node declares this way; the others
still take one YAML string each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

__all__ = ["NESTED_PARAMETERS", "flatten_setting", "nest_setting", "plain", "ros_leaf", "setting_from_parameters"]

NESTED_PARAMETERS: dict[str, tuple[str, ...]] = {
    "task_node": ("vlm", "reasoning", "workspace"),
    "motion_planner_node": ("planner", "workspace"),
    "camera_node": ("options",),
    "arm_driver_node": ("options",),
    "projection_node": ("workspace", "calibrations", "unaligned_depth"),
    "state_publisher_node": ("calibrations", "unaligned_depth"),
    "calibration_node": ("board", "detection", "board_pose", "nominal_mount", "arm", "planner"),
}
"""Executable -> the settings its node declares as dotted parameters (robopin_ros.parameters.declare_nested)."""

_NONE = "~"
_EMPTY = "{}"


def ros_leaf(value: Any, where: str) -> Any:
    """One leaf as a ROS parameter value (bool, int, float, str or a one-type list), else its YAML text."""
    if value is None:
        return _NONE
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        items = list(value)
        kinds = {type(v) for v in items}
        if items and all(isinstance(v, (bool, int, float, str)) for v in items):
            if len(kinds) == 1:
                return items
            if kinds == {int, float}:
                return [float(v) for v in items]
        return yaml.safe_dump(plain(items), default_flow_style=True, width=10**6).strip()
    raise ValueError(f"parameter {where}: {value!r} ({type(value).__name__}) is not a ROS parameter value")


def flatten_setting(name: str, value: Mapping[str, Any]) -> dict[str, Any]:
    """``{name}.{key}[.{key}...]`` -> ROS value for every leaf of ``value`` (an empty mapping has none)."""
    flat: dict[str, Any] = {}
    for key, item in value.items():
        dotted = f"{name}.{key}"
        if isinstance(item, Mapping):
            flat.update(flatten_setting(dotted, item) if item else {dotted: _EMPTY})
        else:
            flat[dotted] = ros_leaf(item, dotted)
    return flat


def _leaf_value(value: Any) -> Any:
    if isinstance(value, str):
        if value == _NONE:
            return None
        if value == _EMPTY:
            return {}
        if value.startswith("["):
            try:
                parsed = yaml.safe_load(value)
            except yaml.YAMLError:
                return value
            return parsed if isinstance(parsed, list) else value
    if isinstance(value, (list, tuple)):
        return list(value)
    return value


def nest_setting(name: str, flat: Mapping[str, Any]) -> dict[str, Any]:
    """The mapping of setting ``name`` rebuilt from its dotted parameters (other names are ignored)."""
    nested: dict[str, Any] = {}
    prefix = f"{name}."
    for dotted in sorted(flat):
        if not dotted.startswith(prefix):
            continue
        *parents, leaf = dotted[len(prefix):].split(".")
        node = nested
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ValueError(f"parameter {dotted}: {prefix}{'.'.join(parents)} is both a value and a mapping")
            node = child
        if isinstance(node.get(leaf), dict):
            raise ValueError(f"parameter {dotted} is both a value and a mapping")
        node[leaf] = _leaf_value(flat[dotted])
    return nested


def setting_from_parameters(name: str, values: Mapping[str, Any], changed: Mapping[str, Any] | None = None
                            ) -> dict[str, Any]:
    """The setting ``name`` from a node's parameter values (``changed``: values about to be set).

    The older one-YAML-string form ``name``, when not empty, is the whole setting (as before dotted
    parameters existed) and a dotted key changed while it is in use is refused rather than ignored;
    otherwise the ``name.*`` values are nested. Raises ValueError naming the parameter.
    """
    changed = dict(changed or {})
    text = str(changed.get(name, values.get(name, "")) or "")
    dotted_changes = sorted(key for key in changed if key.startswith(f"{name}."))
    if text.strip():
        if dotted_changes:
            raise ValueError(f"parameter {name} is set as one YAML mapping, so {dotted_changes} would be ignored; "
                             f"change them there, or set {name} to '' to use the {name}.<key> parameters")
        whole = yaml.safe_load(text)
        if not isinstance(whole, dict):
            raise ValueError(f"parameter {name} must be a YAML mapping, got {text!r}")
        return whole
    return nest_setting(name, {**values, **{key: changed[key] for key in dotted_changes}})


def plain(value: Any) -> Any:
    """``value`` with mappings as dicts of str keys and sequences as lists (YAML- and ROS-safe)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value
