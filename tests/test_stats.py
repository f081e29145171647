"""The one summary every report prints (robopin.stats)."""

import math
import statistics

import numpy as np

from robopin.stats import summarize


def test_summary_matches_the_standard_definitions():
    values = [0.3, 0.1, 0.7, 0.2, 0.9, 0.4]
    summary = summarize(values)
    assert summary.count == 6
    assert summary.mean == statistics.fmean(values)
    # Even count: the median is the mean of the two middle values, as statistics.median has it.
    assert summary.median == statistics.median(values)
    assert summary.p95 == float(np.percentile(values, 95))
    assert summary.max == 0.9


def test_summary_of_nothing_is_nan_not_an_error():
    summary = summarize([])
    assert summary.count == 0
    assert all(math.isnan(x) for x in (summary.mean, summary.median, summary.p95, summary.max))


def test_scaled_changes_units_only():
    ms = summarize(iter([0.001, 0.002, 0.003])).scaled(1e3)
    assert ms.count == 3
    assert math.isclose(ms.median, 2.0) and math.isclose(ms.max, 3.0)
