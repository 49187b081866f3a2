"""Trends over a profile's run history, with change-point detection.

Pairwise comparisons miss gradual drift: each run is within tolerance of the last.  Over the
whole series of per-run medians (log scale), PELT (``ruptures``) finds the points where the
level shifts.  The penalty is BIC-like, 2·ln(n), on the series scaled by a robust noise
estimate (the MAD of successive differences, which a step or a slow drift barely moves).  A
change point is reported when the levels either side differ by more than the tolerance, and
drift when the first and last segments do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from perfsuite.model import RunRecord

SPARKS = "▁▂▃▄▅▆▇█"
MIN_SEGMENT = 3


@dataclass(frozen=True)
class Point:
    """One run's summary of one check."""

    run_id: str
    created: str
    median: float


@dataclass(frozen=True)
class Series:
    """One check across runs."""

    id: str
    unit: str
    higher_is_better: bool
    points: tuple[Point, ...]


@dataclass(frozen=True)
class ChangePoint:
    """A shift in level: ``index`` is the first run of the new level."""

    index: int
    ratio: float  # level after / level before, oriented so below 1 is worse


def series(records: Sequence[RunRecord]) -> list[Series]:
    """Each check's medians across runs, oldest first."""
    points: dict[str, list[Point]] = {}
    meta: dict[str, tuple[str, bool]] = {}
    for record in records:
        for result in record.results:
            points.setdefault(result.id, []).append(
                Point(record.run_id, record.created, result.summary.median)
            )
            meta[result.id] = (result.unit, result.higher_is_better)
    return [Series(i, *meta[i], tuple(p)) for i, p in sorted(points.items())]


def _segments_levels(log_values: np.ndarray, bounds: list[int]) -> list[float]:
    starts = [0, *bounds[:-1]]
    return [float(np.mean(log_values[s:e])) for s, e in zip(starts, bounds, strict=True)]


def change_points(
    values: Sequence[float], *, higher_is_better: bool, tolerance: float
) -> tuple[list[ChangePoint], float | None]:
    """Material level shifts in a series, and the drift first-to-last segment (or None)."""
    if len(values) < 2 * MIN_SEGMENT:
        return [], None
    import ruptures

    logs = np.log(np.asarray(values, dtype=float))
    diffs = np.diff(logs)
    sigma = 1.4826 * float(np.median(np.abs(diffs - np.median(diffs)))) / math.sqrt(2)
    sigma = max(sigma, 1e-3)  # a perfectly flat series: shifts below 0.1% are not change
    algo = ruptures.Pelt(model="l2", min_size=MIN_SEGMENT, jump=1).fit(logs / sigma)
    bounds = algo.predict(pen=2 * math.log(len(values)))
    levels = _segments_levels(logs, bounds)
    sign = 1 if higher_is_better else -1
    found = []
    for k in range(1, len(levels)):
        ratio = math.exp(sign * (levels[k] - levels[k - 1]))
        if abs(ratio - 1) > tolerance:
            found.append(ChangePoint(bounds[k - 1], ratio))
    # With a single step the drift is that step; it says something new only over several.
    drift = math.exp(sign * (levels[-1] - levels[0])) if len(levels) > 2 else None
    if drift is not None and abs(drift - 1) <= tolerance:
        drift = None
    return found, drift


def sparkline(values: Sequence[float]) -> str:
    """A one-line chart of a series."""
    lo, hi = min(values), max(values)
    if hi == lo:
        return SPARKS[3] * len(values)
    return "".join(SPARKS[round((v - lo) / (hi - lo) * (len(SPARKS) - 1))] for v in values)
