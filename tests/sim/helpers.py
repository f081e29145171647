"""Small helpers shared by the simulator tests."""

from __future__ import annotations

import itertools

_names = itertools.count()


def unique_world_name(prefix: str) -> str:
    """A world name no other test in this process uses (worlds register by name)."""
    return f"{prefix}-{next(_names)}"
