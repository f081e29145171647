"""Described settings: a config dataclass field that carries its own description and range.

A node's ROS parameters are generated from the fields of the core config dataclasses it reads (name,
default, type, description, range), so the core's default is the node's default and a field documents itself
once, in the dataclass (``robopin_ros.parameters.declare_settings`` declares them). A field made with
:func:`setting` is a parameter of every node that reads that dataclass; a field without it is not.
The keys of a nested setting (``board.squares_x``, ``vlm.timeout_s``) are described the same way by the fields of
the config they are read into, and a config checks its described ranges however it is built
(:func:`check_ranges`). No rclpy here.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import numbers
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["Setting", "bound_text", "check_fields", "check_ranges", "described", "fraction", "positive", "setting"]


@dataclasses.dataclass(frozen=True)
class Setting:
    """A field's description, its inclusive range, and its parameter name where that is not the field's."""

    text: str
    min: float | None = None
    max: float | None = None
    parameter: str = ""
    dynamic: bool = False  # the node applies a change at run time (a writable parameter); else read-only
    any_type: bool = False  # the parameter takes a value of any type (a serial given as digits arrives as an int)


def setting(default: Any, text: str, *, min: float | None = None, max: float | None = None,
            parameter: str = "", dynamic: bool = False, any_type: bool = False) -> Any:
    """A dataclass field with ``default``, described by ``text`` (and its range: ``min``/``max``, inclusive).

    A list or mapping default is copied for each instance (a nested setting: a mapping, declared as dotted
    parameters by the node)."""
    metadata = {"setting": Setting(text, min, max, parameter, dynamic, any_type)}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: copy.deepcopy(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def described(config: Any) -> dict[str, Setting]:
    """The described fields of a config dataclass (class or instance), in declaration order."""
    return {f.name: f.metadata["setting"] for f in dataclasses.fields(config) if "setting" in f.metadata}


def bound_text(min: float | None, max: float | None) -> str:
    """An inclusive range in words: ``in [0, 1]``, ``>= 4``, ``<= 90``."""
    if min is not None and max is not None:
        return f"in [{min}, {max}]"
    return f">= {min}" if min is not None else f"<= {max}"


def check_ranges(config: Any, error: type[Exception], *, prefix: str = "") -> None:
    """Refuse the first described field of ``config`` outside its range (inclusive) or not a finite number (an
    integer where the default is one): ``error("<prefix><name> must be <range>, got <value>")``; the range its parameter
    declares holds however the config is built."""
    defaults = {f.name: f.default for f in dataclasses.fields(config)}
    for name, about in described(config).items():
        if about.min is None and about.max is None:
            continue
        value = getattr(config, name)
        kind = numbers.Integral if type(defaults[name]) is int else numbers.Real
        number = isinstance(value, kind) and not isinstance(value, bool) and math.isfinite(value)
        if not number or (about.min is not None and value < about.min) or (about.max is not None and value > about.max):
            whole = "an integer " if kind is numbers.Integral else ""
            raise error(f"{prefix}{name} must be {whole}{bound_text(about.min, about.max)}, got {value!r}")


def positive(value: Any) -> bool:
    """A finite number above zero (a bool is not a number here)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def fraction(value: Any) -> bool:
    """A number in [0, 1]."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and 0.0 <= value <= 1.0


def check_fields(config: Any, names: Iterable[str], ok: Callable[[Any], bool], error: type[Exception],
                 requirement: str, *, prefix: str = "") -> None:
    """Refuse the first of ``names`` whose value in ``config`` fails ``ok``: ``error("<prefix><name> must be
    <requirement>, got <value>")``. One check for the many config fields that share a rule."""
    for name in names:
        value = getattr(config, name)
        if not ok(value):
            raise error(f"{prefix}{name} must be {requirement}, got {value!r}")
