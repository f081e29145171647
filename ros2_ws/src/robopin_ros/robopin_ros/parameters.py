"""Parameter declaration with descriptors: what `ros2 param describe` shows for every robopin node.

Every node declares through :func:`declare` (or :func:`declare_settings`, which declares the described fields of a
core config dataclass: name, default, description and range from the dataclass), so each parameter carries a
description, is read-only
unless its node's set-parameters callback really applies a change at run time, and carries the range
rclpy enforces (on the override at start and on every later set) where one holds. Nested settings
(``vlm``, ``reasoning``, ...) are declared by :func:`declare_nested` as dotted parameters, one per key.
:func:`refuse_undeclared_parameters` refuses a node given a parameter it does not declare (rcl drops those silently).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.exceptions import InvalidParameterValueException
from rclpy.node import Node

from robopin.errors import did_you_mean
from robopin.settings import bound_text, described
from robopin.system.nested import flatten_setting, nest_setting, setting_from_parameters
from robopin.system.node_parameters import VIEW_TOPIC_PREFIX, nested_config
from robopin.system.schema import SystemFileError

# rcl_interfaces IntegerRange holds int64 bounds.
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class ParameterRangeError(ValueError):
    """A parameter's start value lies outside its declared range (a configuration refusal, named)."""


def declare(node: Node, name: str, default: Any, description: str, *, read_only: bool = True,
            min: float | None = None, max: float | None = None, dynamic_typing: bool = False) -> Any:
    """Declare ``name`` on ``node`` with a descriptor and return its value (the override, if any).

    ``min`` / ``max`` are inclusive (rcl_interfaces ranges are); give one or both. An int default gets
    an IntegerRange, a float default a FloatingPointRange. A value outside the range given at start
    raises ParameterRangeError (a ValueError) naming the parameter, its bound and the value.
    """
    descriptor = ParameterDescriptor(description=description, read_only=read_only, dynamic_typing=dynamic_typing)
    if min is not None or max is not None:
        if isinstance(default, bool) or not isinstance(default, (int, float)):
            raise TypeError(f"parameter {name}: a range needs an int or float default, got {default!r}")
        if isinstance(default, int):
            descriptor.integer_range = [IntegerRange(
                from_value=_INT64_MIN if min is None else int(min),
                to_value=_INT64_MAX if max is None else int(max), step=0)]
        else:
            descriptor.floating_point_range = [FloatingPointRange(
                from_value=-math.inf if min is None else float(min),
                to_value=math.inf if max is None else float(max), step=0.0)]
    try:
        return node.declare_parameter(name, default, descriptor).value
    except InvalidParameterValueException:
        if not (descriptor.integer_range or descriptor.floating_point_range):
            raise
        # rclpy's refusal prints int64 limits and no unit; name the bound instead, with the value given,
        # read back by declaring the parameter without its range (the node does not start either way).
        plain = ParameterDescriptor(description=description, read_only=read_only, dynamic_typing=dynamic_typing)
        value = node.declare_parameter(name, default, plain).value
        raise ParameterRangeError(f"parameter {name} must be {bound_text(min, max)}, got {value!r}") from None


def declare_settings(node: Node, defaults: Any) -> dict[str, Any]:
    """Declare one parameter per described field (:func:`robopin.settings.setting`) of the config dataclass
    instance ``defaults``: its name (or the setting's ``parameter``), the field's value as the default, its
    description and range; a mapping-valued field is a nested setting (:func:`declare_nested`). Returns
    ``{field: value}`` to build the dataclass from."""
    values = {}
    for name, about in described(defaults).items():
        default = getattr(defaults, name)
        if isinstance(default, Mapping):
            values[name] = declare_nested(node, about.parameter or name, default, about.text,
                                          read_only=not about.dynamic, settings=type(defaults), parameters=values)
        else:
            values[name] = declare(node, about.parameter or name, default, about.text, min=about.min, max=about.max,
                                   read_only=not about.dynamic, dynamic_typing=about.any_type)
    return values


def declare_nested(node: Node, name: str, default: Mapping[str, Any], description: str, *,
                   read_only: bool = True, settings: type | None = None, parameters: Mapping[str, Any] | None = None
                   ) -> dict[str, Any]:
    """Declare the nested setting ``name`` as dotted parameters (``name.key``) and return it as a mapping.

    Every leaf of ``default`` and every ``name.*`` override given at start (a parameters file nests
    them, rcl flattens them) becomes a parameter of its own, typed by the backend config that reads
    it (dynamic typing: the core validates). A key that is a described field of the config the setting is read
    into (:func:`robopin.system.node_parameters.nested_config`, from the node's ``settings`` dataclass and its
    other ``parameters``) carries that field's description and range.
    ``name`` itself stays declared as one YAML string, the older form, empty by default. Use
    :func:`nested_value` to read it again.
    """
    declare(node, name, "", f"{description}, as one YAML mapping (older form; when not empty it is the whole "
                            f"setting and the {name}.<key> parameters are unused)", read_only=read_only)
    flat_default = flatten_setting(name, default)
    # Overrides rcl parsed for this node (--params-file, -p, parameter_overrides): rclpy has no public
    # accessor for overrides of parameters not declared yet, and the keys of a backend's mapping are
    # only known from what the user gave.
    given = {key: parameter.value for key, parameter in node._parameter_overrides.items()
             if key.startswith(f"{name}.")}
    config = None if settings is None else nested_config(settings, name, nest_setting(name, {**flat_default, **given}),
                                                           parameters or {})
    fields = described(config) if config is not None else {}
    for dotted in sorted(set(flat_default) | set(given)):
        leaf_default = flat_default.get(dotted, given.get(dotted))
        key = dotted[len(name) + 1:]
        about = fields.get(key)
        text = about.text if about is not None else f"{description}: {key}"
        low, high = _leaf_range(about, leaf_default)
        declare(node, dotted, leaf_default, text, read_only=read_only, min=low, max=high, dynamic_typing=True)
    return nested_value(node, name)


def _leaf_range(about: Any, default: Any) -> tuple[float | None, float | None]:
    """The range a leaf declares: only where its default is the field's kind of number (else the core checks it)."""
    if about is None or isinstance(default, bool) or not isinstance(default, (int, float)):
        return None, None
    bounds = (about.min, about.max)
    if isinstance(default, int) and any(b is not None and b != int(b) for b in bounds):
        return None, None
    return bounds


def nested_value(node: Node, name: str, changed: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The setting ``name`` from the node's parameters, with ``changed`` applied (values about to be set);
    see :func:`robopin.system.nested.setting_from_parameters` (the one-YAML-string form, when not empty, wins)."""
    values = {f"{name}.{key}": parameter.value for key, parameter in node.get_parameters_by_prefix(name).items()}
    values[name] = node.get_parameter(name).value
    return setting_from_parameters(name, values, changed)


class UndeclaredParameterError(SystemFileError):
    """A node was given (``--params-file``, ``-p``, a system file) a parameter it does not declare."""


# Overrides rclpy itself may declare later (QoS overrides of a publisher or subscription that allows them).
_DECLARED_LATER = ("qos_overrides.",)


def undeclared_parameters(node: Node) -> list[str]:
    """The parameter overrides ``node`` was started with that it has not declared (rcl would drop them silently)."""
    return sorted(name for name in node._parameter_overrides
                  if not node.has_parameter(name) and not name.startswith(_DECLARED_LATER))


def refuse_undeclared_parameters(node: Node) -> Node:
    """``node`` itself, once constructed, unless it was given a parameter it does not declare: then it is destroyed
    and :class:`UndeclaredParameterError` names each such parameter with the nearest declared name."""
    unknown = undeclared_parameters(node)
    if not unknown:
        return node
    declared = [name for name in node._parameters if not name.startswith(f"{VIEW_TOPIC_PREFIX}.")]
    lines = [f"  parameter {name!r} is not declared by {type(node).__name__}{did_you_mean(name, declared)}"
             for name in unknown]
    fqn = node.get_fully_qualified_name()
    node.destroy_node()
    raise UndeclaredParameterError("\n".join(
        [f"node {fqn!r}: {len(unknown)} parameter(s) given that it does not declare (it would ignore them):",
         *lines]))
