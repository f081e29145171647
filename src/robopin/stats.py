"""One summary of a set of measurements (count, mean, median, p95, max), used by every report.

Stage timing in results.md, replay lateness, the cuRobo check and the benchmarks all print a median
and a 95th percentile; they compute them here so that one report's p95 means what another's does
(numpy's default linear interpolation between order statistics).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable

import numpy as np

__all__ = ["Summary", "summarize"]


@dataclasses.dataclass(frozen=True)
class Summary:
    """Count, mean, median, 95th percentile and maximum of some values (NaN when there are none)."""

    count: int
    mean: float
    median: float
    p95: float
    max: float

    def scaled(self, factor: float) -> Summary:
        """The same summary in other units (e.g. ``1e3`` for seconds to milliseconds)."""
        return Summary(self.count, self.mean * factor, self.median * factor, self.p95 * factor, self.max * factor)

    def as_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


def summarize(values: Iterable[float]) -> Summary:
    """The :class:`Summary` of ``values``; an empty input gives count 0 and NaN figures."""
    array = np.asarray(list(values), dtype=np.float64)
    if array.size == 0:
        return Summary(0, math.nan, math.nan, math.nan, math.nan)
    median, p95 = np.percentile(array, [50.0, 95.0])
    return Summary(int(array.size), float(array.mean()), float(median), float(p95), float(array.max()))
