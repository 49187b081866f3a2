"""Statistics on paired rounds: numbers in, numbers out (no I/O, no sentences).

The unit of evidence is one round's log ratio of B over A, each side's median of its samples
in that round.  Drift that holds for minutes moves both sides of a round alike and cancels in
the ratio.

The test is Student's paired t on those log ratios, two-sided, with its 95% confidence
interval.  Pinpoint uses the Wilcoxon signed-rank test, but Pinpoint runs tens of attempts:
with n rounds the signed-rank test cannot give a p-value below 2/2**n (0.25 at 3 rounds,
0.0039 at 9), so within a budget of a few rounds it could never pass a correction over a
family of tens of checks.  A round's log ratio of two medians is close to normal, and a
round hit by a burst on one side widens the t interval rather than narrowing it, so the t-test
errs towards "unknown".  The false-alarm rate of the whole procedure (sequential looks,
correction, tolerance) is measured by ``lab/ab_verdicts.py``, not assumed.

Orientation: ``speed`` is the log ratio made positive for "B better": ``ln(B/A)`` for a
higher-is-better metric, ``-ln(B/A)`` for a latency.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from perfsuite import stats

# scipy.stats is imported where Student's t is needed, not here: a side imports this package
# (-p perfsuite.ab.side) and would pay half a second for it in every round.

CONFIDENCE = 0.95
TEST = "paired t on the rounds' log ratios B/A, two-sided"
VERDICTS = ("regressed", "improved", "same", "unknown")


@dataclass(frozen=True)
class Pairs:
    """One check's rounds, summarised on the log scale of the metric (B over A)."""

    n: int
    mean: float  # mean of ln(B/A)
    sd: float
    low: float  # the confidence interval of the mean, ln(B/A)
    high: float
    p: float  # two-sided, the mean against 0

    @property
    def ratio(self) -> float:
        """The geometric mean of B/A over the rounds."""
        return math.exp(self.mean)


def summarize(log_ratios: Sequence[float], confidence: float = CONFIDENCE) -> Pairs:
    """The paired t-test and confidence interval of ``log_ratios`` (at least one)."""
    x = np.asarray(log_ratios, dtype=float)
    n = int(x.size)
    if n == 0:
        raise ValueError("no rounds to summarise")
    mean = float(x.mean())
    if n == 1:
        return Pairs(1, mean, math.nan, -math.inf, math.inf, 1.0)
    sd = float(x.std(ddof=1))
    if sd == 0.0:
        p = 1.0 if mean == 0.0 else 0.0
        return Pairs(n, mean, 0.0, mean, mean, p)
    from scipy import stats as sps

    se = sd / math.sqrt(n)
    t = mean / se
    df = n - 1
    half = float(sps.t.ppf(0.5 + confidence / 2, df)) * se
    p = float(2 * sps.t.sf(abs(t), df))
    return Pairs(n, mean, sd, mean - half, mean + half, p)


def band(tolerance: float) -> float:
    """The tolerance as a distance on the log scale: a fall to ``1 - tolerance`` of A."""
    if not 0 < tolerance < 1:
        raise ValueError(f"tolerance must lie between 0 and 1, got {tolerance}")
    return -math.log1p(-tolerance)


@dataclass(frozen=True)
class Judged:
    """One check's verdict on its rounds, after the correction over the family."""

    pairs: Pairs
    higher_is_better: bool
    tolerance: float
    significant: bool
    verdict: str  # one of VERDICTS
    # The smallest change (a fraction) the interval rules out in both directions: "B is
    # within +-x% of A"; inf with fewer than two rounds.
    ruled_out: float
    # Rounds in all that would decide the check if the change measured so far held; None
    # when it is decided or cannot be decided (a change sitting on the tolerance).
    rounds_needed: int | None

    @property
    def speed(self) -> float:
        """The oriented log ratio: positive when B is better."""
        return self.pairs.mean if self.higher_is_better else -self.pairs.mean


def _oriented(pairs: Pairs, higher_is_better: bool) -> tuple[float, float, float]:
    if higher_is_better:
        return pairs.mean, pairs.low, pairs.high
    return -pairs.mean, -pairs.high, -pairs.low


def ruled_out(pairs: Pairs) -> float:
    """The smallest change, as a fraction of A, outside the interval on both sides."""
    if not math.isfinite(pairs.low) or not math.isfinite(pairs.high):
        return math.inf
    return max(abs(math.expm1(pairs.low)), abs(math.expm1(pairs.high)))


def verdict_of(pairs: Pairs, higher_is_better: bool, tolerance: float, significant: bool) -> str:
    """The one place a paired verdict is decided.

    ``regressed``/``improved``: the mean change is beyond the tolerance and significant after
    the correction; ``same``: the whole interval lies inside +-tolerance (equivalence, not a
    failure to reject); ``unknown``: neither yet.
    """
    limit = band(tolerance)
    speed, low, high = _oriented(pairs, higher_is_better)
    if significant and abs(speed) > limit:
        return "improved" if speed > 0 else "regressed"
    if pairs.n >= 2 and -limit < low and high < limit:
        return "same"
    return "unknown"


def rounds_needed(pairs: Pairs, tolerance: float, threshold: float, cap: int = 1000) -> int | None:
    """Rounds in all that would decide a check whose change and spread stayed as measured.

    A change beyond the tolerance needs its t to pass the ``threshold`` p-value (the
    correction's, for the next rejection); a change inside it needs the interval to shrink
    inside the band.  None where even ``cap`` rounds would not (a change on the tolerance).
    """
    if pairs.n < 2 or not math.isfinite(pairs.sd):
        return None
    limit = band(tolerance)
    distance = abs(pairs.mean)
    if pairs.sd == 0.0:
        return pairs.n
    from scipy import stats as sps

    # Every candidate count at once: this runs for each undecided check after every round.
    n = np.arange(max(pairs.n, 2), cap + 1)
    se = pairs.sd / np.sqrt(n)
    if distance > limit:
        decided = 2 * sps.t.sf(distance / se, n - 1) <= threshold
    else:
        decided = distance + sps.t.ppf(0.5 + CONFIDENCE / 2, n - 1) * se < limit
    hits = np.flatnonzero(decided)
    return int(n[hits[0]]) if hits.size else None


def judge_family(
    checks: Sequence[tuple[Pairs, bool, float]],
    alpha: float = stats.ALPHA,
    correction: str = stats.DEFAULT_CORRECTION,
) -> list[Judged]:
    """Judge each check's pairs, ``(pairs, higher_is_better, tolerance)``, as one family.

    The correction (Benjamini-Hochberg or Holm, :func:`perfsuite.stats.correct`) runs over
    every check compared, decided or not.
    """
    if not checks:
        return []
    p_values = [pairs.p for pairs, _, _ in checks]
    significant = stats.correct(p_values, alpha, len(p_values), correction)
    rejected = sum(significant)
    # The threshold the next rejection has to pass (BH's at rank k+1; Holm's likewise).
    m = len(p_values)
    if correction == "holm":
        threshold = alpha / max(1, m - rejected)
    else:
        threshold = alpha * (rejected + 1) / m
    judged = []
    for (pairs, hib, tolerance), sig in zip(checks, significant, strict=True):
        verdict = verdict_of(pairs, hib, tolerance, sig)
        needed = None if verdict != "unknown" else rounds_needed(pairs, tolerance, threshold)
        judged.append(Judged(pairs, hib, tolerance, sig, verdict, ruled_out(pairs), needed))
    return judged
