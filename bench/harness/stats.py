"""The order statistics the benches print.

Two definitions of a percentile, each kept by the benches whose published numbers used it: ``percentile`` (nearest
rank, ``q`` in percent: the adapter and fairness benches) and ``quantile`` (linear between the closest ranks, ``q``
in [0, 1]: the full-stack benches). Standard library only.
"""

from __future__ import annotations

import statistics


def percentile(values: list[float], q: float) -> float:
    """The value at nearest rank ``q`` percent of the way through the sorted values; NaN when there are none."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, int(round(q / 100.0 * (len(ordered) - 1)))))
    return ordered[k]


def quantile(values: list[float | None], q: float) -> float | None:
    """The ``q`` quantile (0..1) of the values that are not None, linear between the closest ranks; None when none
    is."""
    vals = sorted(v for v in values if v is not None)
    if not vals:
        return None
    if len(vals) == 1:
        return vals[0]
    pos = (len(vals) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(vals) - 1)
    return vals[lo] + (vals[hi] - vals[lo]) * (pos - lo)


def mean(values: list[float | None]) -> float | None:
    """The mean of the values that are not None; None when none is."""
    vals = [v for v in values if v is not None]
    return statistics.fmean(vals) if vals else None


def peak_concurrency(intervals: list[tuple[float, float]]) -> int:
    """The most intervals (start, end) open at one time; one ending as another starts does not overlap it."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    live = peak = 0
    for _, step in edges:
        live += step
        peak = max(peak, live)
    return peak
