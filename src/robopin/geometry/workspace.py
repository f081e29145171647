"""The workspace box: the region of the base frame the arm may be sent to (axis-aligned, metres)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["WorkspaceBox", "WorkspaceError"]


class WorkspaceError(ValueError):
    """A workspace description that cannot be used."""


@dataclass(frozen=True)
class WorkspaceBox:
    """Axis-aligned box ``[min_xyz, max_xyz]`` in ``frame`` (normally ``base``), bounds inclusive."""

    min_xyz: tuple[float, float, float]
    max_xyz: tuple[float, float, float]
    frame: str = "base"

    def __post_init__(self) -> None:
        lo = tuple(float(x) for x in self.min_xyz)
        hi = tuple(float(x) for x in self.max_xyz)
        if len(lo) != 3 or len(hi) != 3:
            raise WorkspaceError(f"min_xyz and max_xyz need 3 numbers each, got {lo} and {hi}")
        if not all(math.isfinite(x) for x in lo + hi):
            raise WorkspaceError(f"workspace bounds must be finite, got min {lo}, max {hi}")
        if any(a >= b for a, b in zip(lo, hi, strict=True)):
            raise WorkspaceError(f"workspace min_xyz {lo} must be below max_xyz {hi} on every axis")
        object.__setattr__(self, "min_xyz", lo)
        object.__setattr__(self, "max_xyz", hi)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WorkspaceBox:
        """From ``{min_xyz: [...], max_xyz: [...], frame: base}`` (a config section)."""
        try:
            return cls(tuple(data["min_xyz"]), tuple(data["max_xyz"]), str(data.get("frame", "base")))
        except KeyError as exc:
            raise WorkspaceError(f"workspace needs 'min_xyz' and 'max_xyz', got keys {sorted(data)}") from exc

    def contains(self, points: ArrayLike) -> NDArray[np.bool_] | bool:
        """Whether point(s) ``(3,)`` / ``(N, 3)`` lie inside the box (NaN is outside)."""
        p = np.asarray(points, dtype=np.float64)
        inside = np.all((p >= self.min_xyz) & (p <= self.max_xyz), axis=-1)
        return bool(inside) if inside.ndim == 0 else inside

    def clearance(self, point: Sequence[float]) -> float:
        """Signed distance to the nearest face in metres: positive inside, negative outside."""
        p = np.asarray(point, dtype=np.float64)
        return float(np.min(np.minimum(p - self.min_xyz, np.asarray(self.max_xyz) - p)))
