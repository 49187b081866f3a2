"""Statistics on paired rounds: numbers in, numbers out (no I/O, no sentences).

The unit of evidence is one round's log ratio of B over A: the median of its turn pairs'
ratios where the sides took turns sample by sample, else the ratio of the sides' medians
(``perfsuite.ab.rounds.round_value``).  Drift that holds for minutes moves both sides of a
round alike and cancels in the ratio.

The test is Student's paired t on those log ratios, two-sided, with its 95% confidence
interval, corrected over the family; a change is called only where the exact sign-flip test
on the same ratios also rejects at ``SIGNS_ALPHA`` (2/2**5), uncorrected.

Why both.  Pinpoint uses the Wilcoxon signed-rank test, but Pinpoint runs tens of attempts:
with n rounds a rank or sign test cannot give a p-value below 2/2**n (0.25 at 3 rounds,
0.0039 at 9), so within a budget of a few rounds it could never pass a correction over a
family of tens of checks, while the t-test can.  But the t-test trusts its few rounds to show
the spread, and some checks' rounds do not: a host's memory bandwidth sits in plateaus of
10-20 s at about 40 or 65 GB/s, so a STREAM round's ratio is near 1, 0.6 or 1.6.  In an A/A,
three rounds that all drew 0.6 gave t's p = 0.0008 and a false "regressed".  The sign-flip
test is exact whatever the ratios' distribution, because the random order makes A and B
exchangeable under no change: it needs at least 5 rounds leaning the same way (p = 2/32)
before a change is called.  The false-alarm rate of the whole procedure (sequential looks,
correction, tolerance) is measured by ``lab/ab_verdicts.py`` and ``lab/ab_repeat.py``, not
assumed.

Orientation: ``speed`` is the log ratio made positive for "B better": ``ln(B/A)`` for a
higher-is-better metric, ``-ln(B/A)`` for a latency.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from perfsuite.judge import family, stats

# scipy.stats is imported where Student's t is needed, not here: a side imports this package
# (-p perfsuite.ab.side) and would pay half a second for it in every round.

CONFIDENCE = 0.95
TEST = (
    "paired t on the rounds' log ratios B/A, two-sided, corrected; and the exact sign-flip "
    "test on them at 2/2**5, uncorrected"
)
# The sign-flip test must reject at this level too (uncorrected) before a change is called:
# 2/2**5, which 5 rounds that all lean the same way reach.  In a simulated A/A of 51 checks,
# 12 of them bimodal as STREAM's are here, it let 4.7% of sessions call a false change (the
# t-test alone 25%, a guard of 4 rounds 8.7%, of 6 rounds 1.7%); in a replay of recorded
# rounds it kept 79% of the t-test's 84% power at a 10% slowdown (6 rounds: 70%).
SIGNS_ALPHA = 2 / 2**5
# Past this many rounds the sign-flip p-value is estimated from this many random sign
# patterns (seeded: the same rounds give the same p-value) rather than all 2**n.
EXACT_SIGNS = 16
SIGN_DRAWS = 1 << 16
# The fewest rounds whose sign-flip p-value can reach SIGNS_ALPHA: all of them one way.
MIN_SIGN_ROUNDS = math.ceil(math.log2(2 / SIGNS_ALPHA))
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
    p_signs: float = 1.0  # the exact sign-flip test's two-sided p-value (sign_flip_p)

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
    p_signs = sign_flip_p(x)
    sd = float(x.std(ddof=1))
    if sd == 0.0:
        p = 1.0 if mean == 0.0 else 0.0
        return Pairs(n, mean, 0.0, mean, mean, p, p_signs)
    from scipy import special  # Student's t as ufuncs: scipy.stats.t without its overhead

    se = sd / math.sqrt(n)
    t = mean / se
    df = n - 1
    half = float(special.stdtrit(df, 0.5 + confidence / 2)) * se
    p = float(2 * special.stdtr(df, -abs(t)))
    return Pairs(n, mean, sd, mean - half, mean + half, p, p_signs)


def sign_flip_p(log_ratios: Sequence[float] | np.ndarray) -> float:
    """The two-sided p-value of the sign-flip (randomization) test of ``log_ratios``' mean.

    Under no change each round's ratio is as likely B/A as A/B (the order is random), so its
    sign is a coin: the p-value is the share of the 2**n sign patterns whose sum lies as far
    from 0 as the rounds' own.  Exact up to :data:`EXACT_SIGNS` rounds; past that, from
    :data:`SIGN_DRAWS` seeded random patterns.
    """
    x = np.abs(np.asarray(log_ratios, dtype=float))
    n = int(x.size)
    if n == 0:
        return 1.0
    observed = abs(float(np.sum(log_ratios)))
    hits = int(np.count_nonzero(np.abs(_patterns(n) @ x) >= observed * (1 - 1e-12)))
    if n <= EXACT_SIGNS:
        return hits / (1 << n)
    return (hits + 1) / (SIGN_DRAWS + 1)  # the rounds' own pattern counted among the draws


@functools.cache
def _patterns(n: int) -> np.ndarray:
    """Every sign pattern of ``n`` rounds, or :data:`SIGN_DRAWS` seeded random ones."""
    if n <= EXACT_SIGNS:
        return ((np.arange(1 << n)[:, None] >> np.arange(n)) & 1) * 2.0 - 1
    return np.random.default_rng(n).choice((-1.0, 1.0), size=(SIGN_DRAWS, n))


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

    ``regressed``/``improved``: the mean change is beyond the tolerance, significant after
    the correction, and the sign-flip test rejects too (:data:`SIGNS_ALPHA`); ``same``: the
    whole interval lies inside +-tolerance (equivalence, not a failure to reject);
    ``unknown``: neither yet.
    """
    limit = band(tolerance)
    speed, low, high = _oriented(pairs, higher_is_better)
    if significant and pairs.p_signs <= SIGNS_ALPHA and abs(speed) > limit:
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
    from scipy import special

    # Every candidate count at once: this runs for each undecided check after every round.
    n = np.arange(max(pairs.n, 2), cap + 1)
    se = pairs.sd / np.sqrt(n)
    if distance > limit:
        decided = 2 * special.stdtr(n - 1, -distance / se) <= threshold
    else:
        decided = distance + _t_quantiles(cap)[n - 2] * se < limit
    if distance > limit:  # the sign-flip test needs rounds enough for 2/2**n to pass
        decided &= n >= MIN_SIGN_ROUNDS
    hits = np.flatnonzero(decided)
    return int(n[hits[0]]) if hits.size else None


def judge_family(
    checks: Sequence[tuple[Pairs, bool, float]],
    alpha: float = stats.ALPHA,
    correction: str = stats.DEFAULT_CORRECTION,
) -> list[Judged]:
    """Judge each check's pairs, ``(pairs, higher_is_better, tolerance)``, as one family.

    The correction (Benjamini-Hochberg or Holm, :func:`perfsuite.judge.family.correct`) runs over
    every check compared, decided or not.
    """
    if not checks:
        return []
    p_values = [pairs.p for pairs, _, _ in checks]
    significant = family.correct(p_values, alpha, len(p_values), correction)
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


@functools.cache
def _t_quantiles(cap: int) -> np.ndarray:
    """Student's t at :data:`CONFIDENCE` (two-sided) for 1 to ``cap - 1`` degrees of freedom."""
    from scipy import special

    return np.asarray(special.stdtrit(np.arange(1, cap), 0.5 + CONFIDENCE / 2), dtype=float)
