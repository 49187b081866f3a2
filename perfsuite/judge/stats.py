"""Pure statistics: summaries, the floor verdict, and the two-level baseline verdict.

A baseline holds the samples of several accepted runs, each run's samples kept apart.  The
comparison of a new run against it works at both levels of variation that a shared machine
shows (Kalibera & Jones, "Rigorous benchmarking in reasonable time", ISMM 2013):

* **within a run**: repetitions of the same measurement in one process;
* **between runs**: what a whole run shifts by when it is started again a minute later.

Everything is computed on logarithms, oriented so that higher is better (a latency's sign is
flipped), which makes ratios symmetric and lets throughput and latency share every formula.
For one check:

* each run is summarised by its median; the baseline's centre ``B`` is the mean of its run
  medians, the new run's level ``c`` is its median; the ratio is ``exp(c - B)``;
* the within-run variance ``s_w^2`` is pooled over every run; a run median varies by
  ``(pi/2) s_w^2 / n`` from it alone;
* the run-to-run variance of the run medians comes from the baseline's runs.  With few runs
  per check that estimate has few degrees of freedom, so it is moderated with a prior fitted
  across all the checks of the baseline (empirical Bayes, as limma does for few replicates:
  Smyth, 2004); the between-run component is what the run medians vary by beyond the
  within-run part;
* ``Var(c - B) = sb^2 (1 + 1/K) + (pi/2) s_w^2 (1/n_c + mean(1/n_i)/K)``, with Welch-
  Satterthwaite degrees of freedom; the test is Student's t, two-sided.

A verdict (see :func:`decide`) needs a change that is **material** (beyond the tolerance and
beyond the baseline's own run-to-run spread, the largest distance of a baseline run from the
centre) and **significant** after the family's correction for many comparisons
(Benjamini-Hochberg by default, or Holm): :class:`SequentialFamily` while the checks run,
then the whole family at once when the session ends (``judge.finalize``).  A material change
that is not significant is *noisy* (inconclusive) when the check alone, uncorrected and with
the baseline's own variances (the new run assumed as noisy as the baseline's runs), would
reject at the family's alpha; otherwise it is within the run-to-run noise the baseline
shows, and *ok*, unless noise flags, too few samples or a young baseline's assumed spread
keep it *noisy*.  :func:`detectable` gives the smallest change a comparison can detect at a
threshold, before anything is measured.

This module takes numbers and returns numbers and typed findings (:class:`Decision`,
:class:`~perfsuite.model.Why`); :mod:`perfsuite.report.explain` puts them in words.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from perfsuite.model import (
    BaselineLimit,
    BaselineVerdict,
    FloorVerdict,
    Limit,
    Summary,
)

# scipy's stats and special are imported inside the functions that use them: loading them
# takes 0.5 s or more, which every pytest session with the plugin would pay, and an A/B
# side, which judges no baseline, never needs them.

ALPHA = 0.05
CONFIDENCE = 0.95
POWER = 0.8  # the power at which the smallest detectable change is quoted
MIN_SAMPLES = 3
# A run median varies pi/2 times as much as a run mean (the median's asymptotic efficiency).
MEDIAN_FACTOR = math.pi / 2
# An ok verdict whose CI is wider than this many tolerances (+-2 tolerances around the ratio
# by default) cannot rule out a change at the tolerance: its why says so (``ci_width``; the
# comparison's detectability, reported apart, says what it could have seen).
DISPERSION_WIDTH = 4.0
# A baseline of fewer runs than this cannot show its own run-to-run spread: one run shows
# none, two show one degree of freedom, often taken back to back.  Until it has them, its
# run-to-run sd is taken as at least CAUTIOUS_BETWEEN_SD (log scale), about twice what a run
# median moves between fresh runs on a shared 2-core VM (11-13%), so that a young baseline
# calls only changes that large a spread cannot explain.
MIN_RUNS = 3
CAUTIOUS_BETWEEN_SD = 0.25
CAUTIOUS_DF = 1000.0
# Baseline runs accepted closer together than this share the machine's state of those
# minutes: their spread understates the spread between runs hours apart, so they count as one
# session, and a baseline needs runs from MIN_RUNS sessions before its own spread is trusted.
BACK_TO_BACK_S = 30 * 60


def sessions(times: Sequence[float], window_s: float = BACK_TO_BACK_S) -> int:
    """How many sessions runs accepted at ``times`` (seconds) come from.

    A session opens with its first run and takes every run accepted within ``window_s`` of
    that first one; the next run opens the next.  ``window_s`` 0 counts every run as its own.
    """
    if window_s <= 0:
        return len(times)
    count, opened = 0, -math.inf
    for t in sorted(times):
        if t - opened >= window_s:
            count, opened = count + 1, t
    return count


def timestamps(created: Sequence[str]) -> list[float] | None:
    """Runs' ISO 8601 times as seconds since the epoch; None if one is unreadable."""
    try:
        return [dt.datetime.fromisoformat(c).timestamp() for c in created]
    except ValueError:
        return None


def sessions_of(created: Sequence[str], window_s: float = BACK_TO_BACK_S) -> int:
    """:func:`sessions` of runs given by their ISO 8601 times; one a run if one is unreadable."""
    times = timestamps(created)
    return len(created) if times is None else sessions(times, window_s)


def summarize(values: Sequence[float]) -> Summary:
    """Median, extremes, mean, count and coefficient of variation of samples."""
    if not values:
        raise ValueError("cannot summarize an empty sample")
    arr = np.asarray(values, dtype=float)
    mean = float(arr.mean())
    cv = float(arr.std(ddof=1) / mean) if arr.size > 1 and mean != 0 else None
    return Summary(
        median=float(np.median(arr)),
        min=float(arr.min()),
        max=float(arr.max()),
        mean=mean,
        n=int(arr.size),
        cv=cv,
    )


def best(values: Sequence[float], higher_is_better: bool) -> float:
    """The best sample: the largest rate or the smallest time (as STREAM quotes it)."""
    return max(values) if higher_is_better else min(values)


def floor_verdict(
    value: float,
    peak: float | None,
    fraction: float,
    *,
    higher_is_better: bool = True,
    figure: str = "",
    estimated: bool = False,
    advisory: bool = False,
) -> FloorVerdict:
    """Judge the best sample against its reference; no reference means no-reference.

    Why there is none is the caller's to say (``FloorVerdict.because``).

    For a rate the reference is a floor (``value >= peak * fraction``); for a latency it is a
    ceiling (``value <= peak / fraction``).
    """
    if peak is None:
        return FloorVerdict("no-reference", value=value, fraction=fraction, figure=figure)
    threshold = peak * fraction if higher_is_better else peak / fraction
    ok = value >= threshold if higher_is_better else value <= threshold
    return FloorVerdict(
        "pass" if ok else "fail",
        value=value,
        peak=peak,
        fraction=fraction,
        threshold=threshold,
        fraction_of_peak=value / peak if higher_is_better else peak / value,
        figure=figure,
        estimated=estimated,
        advisory=advisory,
    )


def oriented_ratio(current: float, baseline: float, higher_is_better: bool) -> float:
    """current/baseline for rates, baseline/current for times: below 1 is always worse."""
    return current / baseline if higher_is_better else baseline / current


def _oriented_logs(values: Sequence[float], higher_is_better: bool) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        raise ValueError("a run must have at least one sample")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError("samples must be finite and positive")
    logs: np.ndarray = np.log(arr)
    return logs if higher_is_better else -logs


@dataclass(frozen=True)
class Prior:
    """Run-to-run variance shared by a baseline's checks: ``df`` prior degrees, ``var``."""

    df: float = 0.0
    var: float = 0.0


def fit_prior(variances: Sequence[float], dfs: Sequence[int]) -> Prior:
    """Fit the prior of the run-level variances of many checks (limma's ``fitFDist``).

    Returns no prior (``df`` 0) with fewer than three usable checks.  Infinite prior degrees
    (all checks vary alike) are capped at 1000.
    """
    from scipy import special

    pairs = [(v, d) for v, d in zip(variances, dfs, strict=True) if v > 0 and d > 0]
    if len(pairs) < 3:
        return Prior()
    var = np.array([v for v, _ in pairs])
    df = np.array([d for _, d in pairs], dtype=float)
    e = np.log(var) - special.digamma(df / 2) + np.log(df / 2)
    mean_e = float(e.mean())
    n = len(e)
    excess = float(np.sum((e - mean_e) ** 2) / (n - 1) - np.mean(special.polygamma(1, df / 2)))
    if excess <= 0:
        d0 = 1000.0
    else:
        d0 = 2 * _trigamma_inverse(excess)
        d0 = min(d0, 1000.0)
    s0 = math.exp(mean_e + float(special.digamma(d0 / 2)) - math.log(d0 / 2))
    return Prior(df=d0, var=s0)


def _trigamma_inverse(y: float) -> float:
    """The x > 0 with trigamma(x) = y (Newton's method on 1/trigamma, as limma does)."""
    from scipy import special

    if y > 1e7:
        return 1 / math.sqrt(y)
    if y < 1e-6:
        return 1 / y
    x = 0.5 + 1 / y
    for _ in range(50):
        tri = float(special.polygamma(1, x))
        step = tri * (1 - tri / y) / float(special.polygamma(2, x))
        x += step
        if -step / x < 1e-8:
            break
    return x


@dataclass(frozen=True)
class Levels:
    """The two levels of variation of one check's baseline (log scale)."""

    runs: int  # K, accepted runs in the baseline
    within_var: float  # pooled within-run variance of one sample
    within_df: int
    between_var: float | None  # run-to-run variance beyond the within part; None: unknown
    between_df: float
    spread: float | None  # largest |run median - centre|; None with one run
    mean_inv_n: float  # mean over baseline runs of 1/n_i
    # "runs", "runs+prior", "prior" or "unknown"; "cautious" where a baseline of fewer than
    # MIN_RUNS runs is judged with the cautious spread because its own was smaller
    between_source: str
    centre: float = 0.0  # mean of the run medians (oriented log scale)
    sessions: int | None = None  # the sessions the runs come from (:func:`sessions`)

    def variance(
        self, n_current: int, current_var: float | None = None, current_df: int = 0
    ) -> tuple[float, float]:
        """``Var(c - B)`` for a new run of ``n_current`` samples, and its degrees of freedom.

        The new run's own within-run variance is used when given (Welch: a noisier run is
        not judged with the baseline's calmer spread); otherwise the baseline's is assumed.
        """
        own_var = self.within_var if current_var is None else current_var
        own_df = self.within_df if current_var is None else current_df
        parts = [
            (MEDIAN_FACTOR * own_var / n_current, float(max(own_df, 1))),
            (
                MEDIAN_FACTOR * self.within_var * self.mean_inv_n / self.runs,
                float(max(self.within_df, 1)),
            ),
        ]
        if self.between_var is not None and self.between_var > 0:
            parts.append((self.between_var * (1 + 1 / self.runs), max(self.between_df, 1e-9)))
        total = sum(v for v, _ in parts)
        denom = sum(v**2 / df for v, df in parts)
        return total, float(total**2 / denom) if denom > 0 else 1e6


def levels(
    runs: Sequence[Sequence[float]],
    *,
    higher_is_better: bool,
    prior: Prior = Prior(),
    cautious: bool = True,
    sessions: int | None = None,
) -> Levels:
    """Estimate within- and between-run variation from a baseline's runs.

    With runs from fewer than :data:`MIN_RUNS` sessions and ``cautious`` (the default), the
    run-to-run variance is at least ``CAUTIOUS_BETWEEN_SD**2``: the baseline cannot yet show
    its own.  ``sessions``: how many sessions the runs come from (default: one per run).
    """
    if not runs:
        raise ValueError("a baseline needs at least one run")
    logs = [_oriented_logs(r, higher_is_better) for r in runs]
    within_var, within_df = _pooled(logs)
    medians = np.array([np.median(x) for x in logs])
    centre = float(medians.mean())
    k = len(logs)
    states = k if sessions is None else max(1, min(k, sessions))
    mean_inv_n = float(np.mean([1 / x.size for x in logs]))
    within_part = MEDIAN_FACTOR * within_var * mean_inv_n
    spread: float | None = float(np.max(np.abs(medians - centre))) if k >= 2 else None
    if k >= 2:
        run_var, run_df = float(np.var(medians, ddof=1)), float(k - 1)
        if prior.df > 0:
            run_var = (prior.df * prior.var + run_df * run_var) / (prior.df + run_df)
            run_df, source = prior.df + run_df, "runs+prior"
        else:
            source = "runs"
    elif prior.df > 0:
        run_var, run_df, source = prior.var, prior.df, "prior"
    elif not cautious:
        return Levels(
            1, within_var, within_df, None, 0.0, None, mean_inv_n, "unknown", centre, states
        )
    else:
        run_var, run_df, source = 0.0, 0.0, "unknown"
    between = max(0.0, run_var - within_part)
    if cautious and states < MIN_RUNS and between < CAUTIOUS_BETWEEN_SD**2:
        between, run_df, source = CAUTIOUS_BETWEEN_SD**2, CAUTIOUS_DF, "cautious"
    return Levels(
        k, within_var, within_df, between, run_df, spread, mean_inv_n, source, centre, states
    )


def _pooled(logs: Sequence[np.ndarray]) -> tuple[float, int]:
    """Pooled within-run variance of log samples, and its degrees of freedom."""
    ss = sum(float(np.sum((x - x.mean()) ** 2)) for x in logs if x.size > 1)
    df = sum(x.size - 1 for x in logs)
    return (ss / df if df else 0.0), df


def run_variance(run_samples: Sequence[Sequence[float]], higher_is_better: bool) -> float:
    """The variance of a check's run medians (log scale), for :func:`fit_prior`."""
    medians = [float(np.median(_oriented_logs(r, higher_is_better))) for r in run_samples]
    return float(np.var(medians, ddof=1)) if len(medians) > 1 else 0.0


@dataclass(frozen=True)
class Comparison:
    """The statistics of one current-vs-baseline comparison (no verdict yet)."""

    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    n_current: int
    n_baseline: int  # samples over all baseline runs
    runs: int = 1  # baseline runs
    sessions: int | None = None  # the sessions those runs come from
    se: float = 0.0  # standard error of log(ratio)
    df: float = 1.0
    spread: float | None = None  # baseline run-to-run spread, as a ratio distance (log)
    between_sd: float | None = None  # between-run sd (log); None when unknown
    within_sd: float = 0.0
    between_source: str = "unknown"
    # The shift's p-value under the baseline's own noise alone (the new run assumed as
    # noisy as the baseline's runs); None when not known (a comparison rebuilt from a record).
    p_baseline_noise: float | None = None

    @property
    def few_samples(self) -> bool:
        """Fewer samples than a judgement needs on either side."""
        return self.n_current < MIN_SAMPLES or self.n_baseline < MIN_SAMPLES


def compare(
    current: Sequence[float],
    baseline_runs: Sequence[Sequence[float]],
    *,
    higher_is_better: bool,
    prior: Prior = Prior(),
    confidence: float = CONFIDENCE,
    lv: Levels | None = None,
    cautious: bool = True,
    sessions: int | None = None,
) -> Comparison:
    """Ratio of levels, its confidence interval and the two-level t-test's p-value.

    ``lv``: the baseline's :func:`levels`, when the caller has them already; else they are
    estimated with ``prior``, ``cautious`` and ``sessions`` (see :func:`levels`).
    """
    from scipy import stats as sps

    cur = _oriented_logs(current, higher_is_better)
    if lv is None:
        lv = levels(
            baseline_runs,
            higher_is_better=higher_is_better,
            prior=prior,
            cautious=cautious,
            sessions=sessions,
        )
    cur_var, cur_df = _pooled([cur])
    diff = float(np.median(cur)) - lv.centre
    var, df = lv.variance(cur.size, cur_var if cur_df else None, cur_df)
    se = math.sqrt(var)
    p_value = _two_sided_p(diff, var, df)
    half = float(sps.t.ppf((1 + confidence) / 2, df)) * se if se > 0 else 0.0
    p_base = _two_sided_p(diff, *lv.variance(cur.size))
    return Comparison(
        ratio=math.exp(diff),
        ci_low=math.exp(diff - half),
        ci_high=math.exp(diff + half),
        p_value=p_value,
        n_current=int(cur.size),
        n_baseline=int(sum(len(r) for r in baseline_runs)),
        runs=lv.runs,
        sessions=lv.sessions,
        se=se,
        df=df,
        spread=lv.spread,
        between_sd=math.sqrt(lv.between_var) if lv.between_var is not None else None,
        within_sd=math.sqrt(cur_var if cur_df else lv.within_var),
        between_source=lv.between_source,
        p_baseline_noise=p_base,
    )


def _two_sided_p(diff: float, var: float, df: float) -> float:
    """Student's two-sided p-value of a log shift with variance ``var`` (0 or 1 without any)."""
    from scipy import stats as sps

    if var > 0:
        return float(2 * sps.t.sf(abs(diff) / math.sqrt(var), df))
    return 1.0 if diff == 0 else 0.0


def comparison_of(verdict: BaselineVerdict, n_current: int) -> Comparison:
    """The comparison a stored verdict was decided from (what :func:`decide` reads of it)."""
    if verdict.ratio is None or verdict.p_value is None:
        raise ValueError(f"a {verdict.verdict!r} verdict holds no comparison")
    return Comparison(
        ratio=verdict.ratio,
        ci_low=verdict.ci_low if verdict.ci_low is not None else verdict.ratio,
        ci_high=verdict.ci_high if verdict.ci_high is not None else verdict.ratio,
        p_value=verdict.p_value,
        n_current=n_current,
        n_baseline=verdict.n_baseline or 0,
        runs=verdict.baseline_runs or 1,
        sessions=verdict.baseline_sessions,
        spread=None if verdict.run_spread is None else math.log1p(verdict.run_spread),
        between_sd=verdict.between_run_sd,
        within_sd=verdict.within_run_sd or 0.0,
        between_source=verdict.between_source or "unknown",
    )


def critical_t(threshold: float, df: float) -> float:
    """The two-sided critical value of Student's t at significance ``threshold``."""
    from scipy import stats as sps

    return float(sps.t.ppf(1 - threshold / 2, max(df, 1e-9)))


def detectable(
    lv: Levels,
    n_current: int,
    threshold: float,
    power: float = POWER,
    current: Sequence[float] = (),
    higher_is_better: bool = True,
) -> float:
    """The smallest slowdown (a fraction) detectable at ``threshold`` with ``power``.

    Before measuring, the new run is assumed as noisy as the baseline's runs; after, its
    ``current`` samples say how noisy it was.  The result is never below the baseline's
    own run-to-run spread, which no change within it can exceed (a change must be material
    to count).
    """
    from scipy import stats as sps

    if len(current) > 1:
        cur_var, cur_df = _pooled([_oriented_logs(current, higher_is_better)])
        var, df = lv.variance(n_current, cur_var, cur_df)
    else:
        var, df = lv.variance(n_current)
    effect = (critical_t(threshold, df) + float(sps.t.ppf(power, df))) * math.sqrt(var)
    effect = max(effect, lv.spread or 0.0)
    return 1 - math.exp(-effect)


def baseline_limit(lv: Levels, tolerance: float) -> BaselineLimit:
    """What in a baseline keeps any sample count from detecting ``tolerance``.

    The parts of :meth:`Levels.variance` that more samples of the new run cannot shrink:
    the scatter within the baseline's runs (through its centre) and the run-to-run spread
    (the new run's own run-to-run deviation and the centre's), and the floor that no change
    within the runs' own spread counts.
    """
    if lv.spread and 1 - math.exp(-lv.spread) > tolerance:
        return BaselineLimit(Limit.SPREAD, math.exp(lv.spread) - 1, lv.runs)
    within = MEDIAN_FACTOR * lv.within_var * lv.mean_inv_n / lv.runs
    between = (lv.between_var or 0.0) * (1 + 1 / lv.runs)
    if within > between:
        return BaselineLimit(Limit.WITHIN_RUN_SCATTER, math.sqrt(lv.within_var), lv.runs)
    if lv.between_var is None:
        return BaselineLimit(Limit.UNKNOWN_SPREAD, None, lv.runs)
    if lv.between_source == "cautious":
        return BaselineLimit(Limit.CAUTIOUS_SPREAD, CAUTIOUS_BETWEEN_SD, lv.runs, lv.sessions)
    borrowed = lv.between_source == "prior"
    kind = Limit.BORROWED_RUN_TO_RUN if borrowed else Limit.RUN_TO_RUN
    return BaselineLimit(kind, math.sqrt(lv.between_var), lv.runs)


def samples_needed(
    lv: Levels, tolerance: float, threshold: float, planned: int, limit: int
) -> int | None:
    """Samples the new run needs to detect ``tolerance``; None when no count up to ``limit`` can."""
    for n in range(planned, limit + 1):
        if detectable(lv, n, threshold) <= tolerance:
            return n
    return None


CORRECTIONS = ("fdr", "holm")
DEFAULT_CORRECTION = "fdr"
