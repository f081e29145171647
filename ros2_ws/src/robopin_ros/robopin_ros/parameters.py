"""Parameter declaration with descriptors: what `ros2 param describe` shows for every robopin node.

Every node declares through :func:`declare`, so each parameter carries a description, is read-only
unless its node's set-parameters callback really applies a change at run time, and carries the range
rclpy enforces (on the override at start and on every later set) where one holds.
"""

from __future__ import annotations

import math
from typing import Any

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.exceptions import InvalidParameterValueException
from rclpy.node import Node

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
        bound = f"in [{min}, {max}]" if min is not None and max is not None else (
            f">= {min}" if min is not None else f"<= {max}")
        raise ParameterRangeError(f"parameter {name} must be {bound}, got {value!r}") from None
