"""One lazy registry for every backend family (cameras, arms, planners, VLMs, reasoners).

A family's registry maps a type name (the ``type`` key of a YAML block, the ``type`` class variable
of a config dataclass) to its config class and its backend class. Both register themselves when
they are defined: the family's config base derives from :class:`RegisteredConfig` and its backend
base from :class:`RegisteredBackend`, each naming the registry (``class CameraConfig(RegisteredConfig,
registry=CAMERAS)``); a config subclass that sets ``type`` and a backend subclass that names its
``config_class`` are then entered under that type.

Built-in backends are *declared* by module path only, so a backend's module (and the SDK it needs:
cuRobo, pyrealsense2, the xArm SDK, franky, torch) is imported the first time that type is asked for.
This is the shape of LeRobot's camera registry (``cameras/configs.py``: config classes registered
by type name; ``cameras/utils.py``: the backend module imported only for the configured type).
"""

from __future__ import annotations

import dataclasses
import importlib
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from robopin.errors import nearest_name

__all__ = [
    "DuplicateTypeError",
    "RegisteredBackend",
    "RegisteredConfig",
    "Registry",
    "UnknownTypeError",
    "config_fields",
    "registered_type",
    "unknown_keys",
]

ConfigT = TypeVar("ConfigT")
BackendT = TypeVar("BackendT")


class UnknownTypeError(KeyError):
    """A type name no backend of the family is registered or declared under.

    Each family raises its own subclass (``UnknownCameraTypeError``, ``UnknownPlannerError``, …), so
    callers can catch one family or every family; ``known`` holds the type names there are.
    """

    family: str = ""
    type_name: object = None
    known: tuple[str, ...] = ()

    def __str__(self) -> str:  # a KeyError subclass would repr() the message
        return str(self.args[0]) if self.args else ""


class DuplicateTypeError(TypeError):
    """Two different classes claim the same type name of one family."""


def registered_type(cls: type, family: str) -> str:
    """The type name ``cls`` declares itself (``type`` in its own class body), or ``""`` if none.

    An intermediate base or a test's subclass that inherits ``type`` does not register again. The
    one key name is ``type``; ``type_name`` (the name some families used) is refused by name so a
    backend written against it fails at import instead of silently not registering.
    """
    if "type_name" in cls.__dict__:
        raise TypeError(f"{cls.__qualname__}: a {family} config names its registry key 'type', not 'type_name'")
    value = cls.__dict__.get("type", "")
    if not isinstance(value, str):
        raise TypeError(f"{cls.__qualname__}.type must be a string, got {value!r}")
    return value


@dataclass(frozen=True)
class _Declaration:
    module: str  # defines the backend class; imported to build one
    config_module: str  # defines the config class; imported to read a config (never heavier than module)
    requires: tuple[str, ...]  # what the module needs installed, named when it fails to import


class Registry(Generic[ConfigT, BackendT]):
    """Type name → config class and backend class of one family, importing declared modules lazily.

    Args:
        family: the family's name in messages ("camera", "arm", "planner", "VLM backend", "reasoner").
        unknown_error: raised for a type name nobody registered or declared; subclass of
            :class:`UnknownTypeError` and of the family's own error base.
        config_error: raised for a mapping the family's config class cannot take (no ``type``,
            unknown fields) or a config of the wrong class.
        unavailable_error: raised when a declared module fails to import (its SDK is missing);
            ``None`` lets the ImportError through.
    """

    def __init__(
        self,
        family: str,
        *,
        unknown_error: type[UnknownTypeError],
        config_error: type[Exception],
        unavailable_error: type[Exception] | None = None,
    ) -> None:
        self.family = family
        self._unknown_error = unknown_error
        self._config_error = config_error
        self._unavailable_error = unavailable_error
        self._declared: dict[str, _Declaration] = {}
        self._configs: dict[str, type[ConfigT]] = {}
        self._backends: dict[str, BackendT | type[BackendT]] = {}

    def __repr__(self) -> str:
        return f"Registry({self.family!r}, types={list(self.types())})"

    # --- registration -----------------------------------------------------------------------------

    def declare(
        self, type_name: str, module: str, *, config_module: str | None = None, requires: tuple[str, ...] = ()
    ) -> None:
        """Name the module that defines ``type_name``'s backend (and, if apart, its config); nothing is imported."""
        if not isinstance(type_name, str) or not type_name:
            raise self._config_error(f"a {self.family} type name must be a non-empty string, got {type_name!r}")
        self._declared[type_name] = _Declaration(module, config_module or module, tuple(requires))

    def add_config(self, cls: type[ConfigT]) -> None:
        """Register a config class under the ``type`` its own class body sets (no-op without one)."""
        type_name = registered_type(cls, self.family)
        if type_name:
            self._put(self._configs, type_name, cls)

    def add_backend(self, type_name: str, backend: BackendT | type[BackendT]) -> None:
        """Register the backend (a class, or a factory for families without config classes) of ``type_name``."""
        if not type_name:
            raise TypeError(f"{_origin(backend)} registers as a {self.family} backend but its config sets no type")
        self._put(self._backends, type_name, backend)

    def register(self, type_name: str) -> Callable[[Any], Any]:
        """Decorator form of :meth:`add_backend`: ``@REASONERS.register("etts")`` above a factory."""

        def decorate(backend: Any) -> Any:
            self.add_backend(type_name, backend)
            return backend

        return decorate

    def _put(self, table: dict[str, Any], type_name: str, obj: Any) -> None:
        previous = table.get(type_name)
        # The same definition seen again (a module reloaded, a test's class defined once per call) replaces
        # itself; a different one would silently hijack every config of that type, so it is refused.
        if previous is not None and previous is not obj and _origin(previous) != _origin(obj):
            raise DuplicateTypeError(
                f"{self.family} type {type_name!r} is already served by {_origin(previous)}; "
                f"{_origin(obj)} cannot claim it too"
            )
        table[type_name] = obj

    # --- lookup -----------------------------------------------------------------------------------

    def types(self) -> tuple[str, ...]:
        """Every type name declared or registered, sorted."""
        return tuple(sorted({*self._declared, *self._configs, *self._backends}))

    def declared_modules(self) -> set[str]:
        """The module paths declared for this family's types (backend and config modules)."""
        return {m for d in self._declared.values() for m in (d.module, d.config_module)}

    def config_class(self, type_name: str) -> type[ConfigT]:
        """The config dataclass of ``type_name``, importing its config module the first time."""
        return self._lookup(self._configs, type_name, "config class", config=True)

    def backend_class(self, type_name: str) -> Any:
        """The backend of ``type_name`` (its class, or a reasoner's factory), importing its module the first time."""
        return self._lookup(self._backends, type_name, "backend", config=False)

    def _lookup(self, table: dict[str, Any], type_name: Any, what: str, *, config: bool) -> Any:
        if isinstance(type_name, str) and type_name in table:
            return table[type_name]
        declaration = self._declared.get(type_name) if isinstance(type_name, str) else None
        if declaration is None:
            best = nearest_name(type_name, self.types()) if isinstance(type_name, str) else None
            hint = f" (did you mean {best!r}?)" if best is not None else ""
            message = f"unknown {self.family} type {type_name!r}{hint}; expected one of {list(self.types())}"
            raise self._unknown(type_name, message)
        module = declaration.config_module if config else declaration.module
        self._import(type_name, module, declaration.requires)
        if type_name not in table:
            message = f"{self.family} type {type_name!r} is declared in {module}, which defines no {what} of that type"
            raise self._unknown(type_name, message)
        return table[type_name]

    def _unknown(self, type_name: Any, message: str) -> UnknownTypeError:
        error = self._unknown_error(message)
        error.family, error.type_name, error.known = self.family, type_name, self.types()
        return error

    def _import(self, type_name: str, module: str, requires: tuple[str, ...]) -> None:
        try:
            importlib.import_module(module)
        except ImportError as error:
            if self._unavailable_error is None or isinstance(error, self._unavailable_error):
                raise
            needs = f" (needs {', '.join(requires)})" if requires else ""
            raise self._unavailable_error(
                f"{self.family} {type_name!r} cannot be imported from {module}{needs}: {error}"
            ) from error

    # --- building ---------------------------------------------------------------------------------

    def config_from_dict(self, values: Mapping[str, Any]) -> ConfigT:
        """Build the config a YAML-style mapping describes: ``type`` picks the class, unknown keys are refused."""
        if not isinstance(values, Mapping):
            raise self._config_error(f"a {self.family} config must be a mapping, got {type(values).__name__}")
        values = dict(values)
        if "type" not in values:
            raise self._config_error(
                f"a {self.family} config needs a 'type' key (one of {list(self.types())}), got {values}"
            )
        type_name = values.pop("type")
        cls = self.config_class(type_name)
        known = config_fields(cls)
        unknown = sorted(set(values) - known, key=str)
        if unknown:
            hints = "".join(f" {key!r}: did you mean {best!r}?" for key in unknown
                            if (best := nearest_name(key, known)) is not None)
            raise self._config_error(
                f"unknown field(s) {unknown} for {self.family} type {type_name!r} ({cls.__name__} has no field "
                f"of that name);{hints} expected some of {sorted(known)}"
            )
        return cls(**values)

    def build(self, config: ConfigT, *args: Any, **kwargs: Any) -> BackendT:
        """The backend ``config.type`` names, constructed from ``config`` (and any further arguments)."""
        type_name = getattr(config, "type", "")
        backend = self.backend_class(type_name)
        expected = getattr(backend, "config_class", None)
        if expected is not None and not isinstance(config, expected):
            raise self._config_error(
                f"{self.family} {type_name!r} expects a {expected.__name__}, got {type(config).__name__}"
            )
        return backend(config, *args, **kwargs)


def config_fields(cls: type) -> set[str]:
    """The keys a config dataclass takes (its ``__init__`` fields)."""
    return {f.name for f in dataclasses.fields(cls) if f.init}


def _dataclass_of(hint: Any) -> type | None:
    """The dataclass a field's type names (``X``, ``X | None``, ``Optional[X]``), or None."""
    if isinstance(hint, type):
        return hint if dataclasses.is_dataclass(hint) else None
    for arg in typing.get_args(hint):
        if isinstance(arg, type) and dataclasses.is_dataclass(arg):
            return arg
    return None


def unknown_keys(cls: type, values: Mapping[str, Any]) -> list[tuple[tuple[str, ...], type, set[str]]]:
    """Every key of ``values`` (a YAML-style mapping) that config dataclass ``cls`` does not take, at any depth.

    Returns ``(path, owner, known)`` per unknown key: ``path`` from ``values`` down to the key, ``owner`` the
    dataclass it was looked up in and ``known`` that class's keys. A field typed as a dataclass
    (``safety: SafetyConfig``) given as a mapping is searched too; other mappings are free-form.
    """
    known = config_fields(cls)
    found: list[tuple[tuple[str, ...], type, set[str]]] = [((key,), cls, known) for key in values if key not in known]
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # a forward reference only a type checker resolves: look no deeper
        hints = {}
    for key, value in values.items():
        inner = _dataclass_of(hints.get(key)) if key in known else None
        if inner is not None and isinstance(value, Mapping):
            found += [((key, *path), owner, names) for path, owner, names in unknown_keys(inner, value)]
    return found


def _origin(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


class RegisteredConfig:
    """Base of a family's config base: each subclass that sets its own ``type`` registers as that type's config."""

    _registry: ClassVar[Registry[Any, Any]]

    def __init_subclass__(cls, registry: Registry[Any, Any] | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if registry is not None:  # the family's base class names its registry
            cls._registry = registry
        else:
            cls._registry.add_config(cls)


class RegisteredBackend:
    """Base of a family's backend base: each subclass that names its own ``config_class`` registers as the
    backend of that config's ``type`` (a subclass of a backend, inheriting ``config_class``, does not)."""

    _registry: ClassVar[Registry[Any, Any]]
    config_class: ClassVar[type]

    def __init_subclass__(cls, registry: Registry[Any, Any] | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if registry is not None:
            cls._registry = registry
        elif "config_class" in cls.__dict__:
            cls._registry.add_backend(cls.config_class.type, cls)
