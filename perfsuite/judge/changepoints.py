"""Level shifts in a nightly series, each with a significance, found in about linear time.

A nightly series is one reading per run (a check's median).  What a user needs from it is
the night a level changed, by how much, and how sure that is; what must never happen is a
bad night read as two changes (a dip and a recovery).  The steps, on log values:

1. **Outliers.**  A point above (or below) both the median of the (up to) three points
   before it and the median of the (up to) three after it, by more than :data:`OUTLIER_Z`
   robust spreads, is set aside.  One bad night, or two, is such a point.  So is a one-run
   value half way through a step (far from two flat sides), which would otherwise add a
   phantom change; a point of a drift, between sides that are not flat, is kept.  At an end
   a point must stand out twice as far.  A level that lasts three runs or more is kept.
2. **Candidates.**  Binary segmentation: in a segment, the split that maximises the
   standardised difference of the means either side (cumulative sums: O(n) per segment);
   a segment is split again while its best split passes :func:`_scan_p` at ``alpha``.
3. **Pruning.**  Each candidate is retested between its neighbouring candidates: a
   two-sample t statistic with the pooled spread of those two segments, turned into a
   p-value that accounts for the split having been chosen as the best of the segment's
   (Siegmund's approximation for the maximum of a standardised Brownian bridge).  The least
   significant candidate above ``alpha``, or below the minimum effect, is dropped, and its
   neighbours retested, until every one left passes.
4. **Family.**  The p-values of every candidate of every series of a profile (and, for a
   series with none, its best split's) form one family, corrected with the run verdict's
   rule (:func:`perfsuite.judge.family.correct`, Benjamini-Hochberg by default).  A change is
   reported when it survives the correction and its size is at least the minimum effect.

``lab/history_bench.py`` measures this against Apache Otava and asv on their own test series
and on a synthetic set made to the TCPDBench protocol.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from perfsuite.judge import family, stats

OUTLIER_Z = 4.0  # robust spreads from both neighbourhoods that set a point aside
NEIGHBOURS = 3  # points each side whose median a point is compared with
MIN_SEGMENT = 2  # runs on each side of a change, at the least
SPREAD_FLOOR = 1e-3  # a perfectly flat series: a level change below 0.1% is not measurable
MIN_POINTS = 2 * MIN_SEGMENT


@dataclass(frozen=True)
class Change:
    """A shift in level: ``index`` is the first point of the new level."""

    index: int
    before: float  # the level before (geometric mean of the segment, in the series' unit)
    after: float
    ratio: float  # after / before, oriented so that below 1 is worse
    low: float  # the 95% interval of ``ratio``
    high: float
    p_value: float
    direction: str  # "regressed" or "improved"


@dataclass(frozen=True)
class Scan:
    """One series' candidates before the family correction."""

    n: int
    spread: float  # the robust run-to-run spread (sd of log values)
    outliers: tuple[int, ...]
    candidates: tuple[Change, ...]
    p_values: tuple[float, ...]  # what the series adds to its profile's family


def robust_spread(logs: np.ndarray) -> float:
    """The run-to-run sd of log values from successive differences (steps barely move it)."""
    if len(logs) < 3:
        return SPREAD_FLOOR
    diffs = np.diff(logs)
    mad = float(np.median(np.abs(diffs - np.median(diffs))))
    return max(1.4826 * mad / math.sqrt(2), SPREAD_FLOOR)


def outliers(logs: np.ndarray, spread: float) -> np.ndarray:
    """A mask of the points that differ from both their neighbourhoods (see the module doc)."""
    n = len(logs)
    mask = np.zeros(n, dtype=bool)
    if n < 3:
        return mask
    limit = OUTLIER_Z * spread
    k = NEIGHBOURS
    padded = np.concatenate([np.full(k, np.nan), logs, np.full(k, np.nan)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, k)
    left = windows[:n]  # the k points before each point
    right = windows[k + 1 : k + 1 + n]  # the k points after it
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an end has no side: all-NaN
        left_med = np.nanmedian(left, axis=1)
        right_med = np.nanmedian(right, axis=1)
    # A spike stands out of both sides the same way.  A point between its sides is a level
    # (a drift), unless both sides are flat and it is far from each: a night half way
    # through a step, which would otherwise make a phantom change beside the real one.
    up = (logs - left_med > limit) & (logs - right_med > limit)
    down = (left_med - logs > limit) & (right_med - logs > limit)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        flat = (np.nanmax(left, axis=1) - np.nanmin(left, axis=1) < limit) & (
            np.nanmax(right, axis=1) - np.nanmin(right, axis=1) < limit
        )
    between = flat & (np.abs(logs - left_med) > limit) & (np.abs(logs - right_med) > limit)
    # At an end one side is missing: the point must stand out twice as far from the other
    # side and from its only neighbour (a drift's first or last run does not).
    first = (np.abs(logs - right_med) > 2 * limit) & (np.abs(logs - np.roll(logs, -1)) > limit)
    last = (np.abs(logs - left_med) > 2 * limit) & (np.abs(logs - np.roll(logs, 1)) > limit)
    mask = np.where(
        np.isnan(left_med),
        first,
        np.where(np.isnan(right_med), last, up | down | between),
    )
    return np.asarray(mask, dtype=bool)


def _best_split(y: np.ndarray) -> tuple[int, float] | None:
    """The split of ``y`` maximising the standardised mean difference, and that statistic."""
    n = len(y)
    if n < 2 * MIN_SEGMENT:
        return None
    c = np.cumsum(y)
    k = np.arange(MIN_SEGMENT, n - MIN_SEGMENT + 1)
    left = c[k - 1] / k
    right = (c[-1] - c[k - 1]) / (n - k)
    score = np.abs(right - left) / np.sqrt(1.0 / k + 1.0 / (n - k))
    i = int(np.argmax(score))
    return int(k[i]), float(score[i])


def _normal_p(b: float, n: int) -> float:
    """P of a best split at least ``b`` normal deviates among a segment of ``n``, no change.

    Siegmund's approximation for the maximum of a standardised Brownian bridge over
    [m/n, 1 - m/n], two-sided, capped by Bonferroni over the splits and floored by one
    split's own two-sided p.
    """
    tail = 0.5 * math.erfc(b / math.sqrt(2))
    t0 = MIN_SEGMENT / n
    splits = max(1, n - 2 * MIN_SEGMENT + 1)
    density = math.exp(-b * b / 2) / math.sqrt(2 * math.pi)
    siegmund = b * density * 2 * math.log((1 - t0) / t0)
    return float(min(1.0, 2 * tail * splits, max(siegmund, 2 * tail)))


def _scan_p(t: float, n: int, df: float) -> float:
    """:func:`_normal_p` of a t statistic, mapped first to the normal deviate of its tail.

    A small segment estimates its spread: its t has heavier tails than a normal deviate.
    """
    from scipy import stats as sps

    if not math.isfinite(t):
        return 0.0
    tail = float(sps.t.sf(abs(t), df)) if df > 0 else 0.5
    b = float(sps.norm.isf(tail)) if tail > 0 else 40.0
    return _normal_p(b, n)


def _test(y: np.ndarray, k: int, floor: float) -> tuple[float, float, float, int]:
    """Two-sample t of ``y[:k]`` against ``y[k:]``: (difference of means, its se, t, df)."""
    a, b = y[:k], y[k:]
    diff = float(b.mean() - a.mean())
    df = len(y) - 2
    ss = float(((a - a.mean()) ** 2).sum() + ((b - b.mean()) ** 2).sum())
    sd = max(math.sqrt(ss / df) if df > 0 else 0.0, floor)
    se = sd * math.sqrt(1.0 / len(a) + 1.0 / len(b))
    return diff, se, diff / se, df


def _candidates(y: np.ndarray, alpha: float, floor: float) -> tuple[list[int], float]:
    """Binary segmentation of ``y``: split points, and the whole series' best-split p."""
    found: list[int] = []
    first_p = 1.0
    stack = [(0, len(y))]
    while stack:
        a, b = stack.pop()
        best = _best_split(y[a:b])
        if best is None:
            continue
        k = best[0]
        _, _, t, df = _test(y[a:b], k, floor)
        p = _scan_p(t, b - a, df)
        if a == 0 and b == len(y):
            first_p = p
        if p <= alpha:
            found.append(a + k)
            stack += [(a, a + k), (a + k, b)]
    return sorted(found), first_p


def _retest(y: np.ndarray, cuts: list[int], floor: float) -> list[tuple[float, float, float, int]]:
    """Each cut tested between its neighbours: (p, diff, se, df)."""
    bounds = [0, *cuts, len(y)]
    out = []
    for i in range(1, len(bounds) - 1):
        seg = y[bounds[i - 1] : bounds[i + 1]]
        diff, se, t, df = _test(seg, bounds[i] - bounds[i - 1], floor)
        out.append((_scan_p(t, len(seg), df), diff, se, df))
    return out


def _pruned(
    y: np.ndarray, cuts: list[int], alpha: float, min_log: float, floor: float
) -> tuple[list[int], list[tuple[float, float, float, int]], list[float]]:
    """Drop the weakest cut above ``alpha`` or below the minimum effect until none is left.

    Returns the cuts kept, their tests, and the p-values of the cuts dropped.
    """
    dropped: list[float] = []
    while True:
        tests = _retest(y, cuts, floor)
        weak = [
            (p, i) for i, (p, diff, _, _) in enumerate(tests) if p > alpha or abs(diff) < min_log
        ]
        if not weak:
            return cuts, tests, dropped
        p, i = max(weak)
        dropped.append(p)
        cuts = cuts[:i] + cuts[i + 1 :]


def scan(
    values: Sequence[float],
    *,
    higher_is_better: bool,
    min_effect: float,
    alpha: float = stats.ALPHA,
) -> Scan:
    """One series' candidate changes (before the profile's family correction)."""
    logs = np.log(np.asarray(values, dtype=float))
    n = len(logs)
    spread = robust_spread(logs)
    if n < MIN_POINTS:
        return Scan(n, spread, (), (), ())
    out = outliers(logs, spread)
    kept = np.flatnonzero(~out)
    y = logs[kept]
    cuts, first_p = _candidates(y, alpha, SPREAD_FLOOR)
    min_log = math.log1p(min_effect)
    cuts, tests, dropped = _pruned(y, cuts, alpha, min_log, SPREAD_FLOOR)
    bounds = [0, *cuts, len(y)]
    sign = 1.0 if higher_is_better else -1.0
    changes = []
    for i, (p, diff, se, df) in enumerate(tests):
        from scipy import stats as sps

        half = float(sps.t.isf(0.025, max(df, 1))) * se
        before = math.exp(float(y[bounds[i] : bounds[i + 1]].mean()))
        after = math.exp(float(y[bounds[i + 1] : bounds[i + 2]].mean()))
        lo, hi = sorted((math.exp(sign * (diff - half)), math.exp(sign * (diff + half))))
        ratio = math.exp(sign * diff)
        direction = "regressed" if ratio < 1 else "improved"
        changes.append(Change(int(kept[cuts[i]]), before, after, ratio, lo, hi, p, direction))
    p_values = tuple(c.p_value for c in changes) + tuple(dropped)
    return Scan(
        n,
        spread,
        tuple(int(i) for i in np.flatnonzero(out)),
        tuple(changes),
        p_values or (first_p,),
    )


def significant(
    scans: Sequence[Scan],
    *,
    alpha: float = stats.ALPHA,
    correction: str = stats.DEFAULT_CORRECTION,
) -> list[list[Change]]:
    """The changes of each series that survive the profile's family correction."""
    p_values = [p for s in scans for p in s.p_values]
    passed = iter(family.correct(p_values, alpha, correction=correction) if p_values else [])
    out: list[list[Change]] = []
    for s in scans:
        flags = [next(passed) for _ in s.p_values]
        out.append([c for c, ok in zip(s.candidates, flags, strict=False) if ok])
    return out


def detect(
    values: Sequence[float],
    *,
    higher_is_better: bool,
    min_effect: float,
    alpha: float = stats.ALPHA,
    correction: str = stats.DEFAULT_CORRECTION,
) -> list[Change]:
    """The changes of one series, as its own family (a profile of one check)."""
    one = scan(values, higher_is_better=higher_is_better, min_effect=min_effect, alpha=alpha)
    return significant([one], alpha=alpha, correction=correction)[0]


@functools.lru_cache(maxsize=4096)
def critical_t(n: int, alpha: float) -> float:
    """The best-split statistic a segment of ``n`` points needs for ``p <= alpha``."""
    from scipy import stats as sps

    lo, hi = 0.0, 40.0
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _normal_p(mid, n) > alpha else (lo, mid)
    return float(sps.t.isf(0.5 * math.erfc(hi / math.sqrt(2)), max(n - 2, 1)))


def nights_to_detect(
    spread: float,
    step: float,
    *,
    before: int,
    min_effect: float,
    alpha: float = stats.ALPHA,
    power: float = 0.95,
    limit: int = 10_000,
) -> int | None:
    """Nights after a step of ``step`` (a fraction) until it is found with ``power``.

    A series with ``before`` nights at one level and run-to-run ``spread`` (sd of logs):
    the step is found once the t statistic of the split at the step reaches
    :func:`critical_t` and its measured size the minimum effect, each with probability
    ``power`` (normal approximation of the two-sample test at the true split).  ``alpha``
    is the threshold the change must reach: ``alpha / m`` for one change among ``m``
    checks of a profile.  None when it takes more than ``limit`` nights, or never (a step
    below the minimum effect).  ``lab/history_bench.py`` checks it by simulation.
    """
    from scipy import stats as sps

    diff = abs(math.log1p(step))
    min_log = math.log1p(min_effect)
    if diff <= min_log or before < MIN_SEGMENT:
        return None
    z = float(sps.norm.isf(1 - power))

    def found(k: int) -> bool:
        se = max(spread, SPREAD_FLOOR) * math.sqrt(1 / before + 1 / k)
        return diff - z * se >= critical_t(before + k, alpha) * se and diff - z * se >= min_log

    if not found(limit):
        return None
    lo, hi = MIN_SEGMENT - 1, limit  # found(hi) holds; found(lo) does not count
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if found(mid) else (mid, hi)
    return hi
