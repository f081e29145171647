"""Exceptions of the model registry and model fetching; each message names the bad value and what was expected."""

from __future__ import annotations


class ModelError(Exception):
    """Base class of every model registry, fetch and serve error."""


class ModelRegistryError(ModelError, ValueError):
    """The registry file is missing, unreadable, or an entry has a field with a bad value."""


class UnknownModelError(ModelError, KeyError):
    """A model name that the registry does not list."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class ModelFetchError(ModelError, RuntimeError):
    """A model could not be brought into the local models folder."""


class ModelSourceUnreachableError(ModelFetchError):
    """The hub (or its mirror) could not be reached and no complete cached copy exists."""


class IncompleteModelError(ModelFetchError):
    """A model folder lacks files a server needs (config, weights, shards named by the index)."""


class ModelServeError(ModelError, RuntimeError):
    """A model cannot be served as asked (an endpoint entry, no vLLM on this machine, a bad override)."""
