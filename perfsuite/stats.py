"""Pure statistics: summaries, the floor verdict, and the noise-aware baseline verdict.

A baseline comparison gives, for one check:

* the ratio of medians current/baseline, oriented so that below 1 is always worse;
* its bootstrap confidence interval (percentile method, ``scipy.stats.bootstrap``);
* the two-sided Mann-Whitney U p-value (``scipy.stats.mannwhitneyu``).

The verdict (see :func:`decide`):

* **regressed** / **improved**: the ratio is beyond the tolerance in that direction *and*
  the difference is significant after the run's multiple-comparison control (Holm);
* **noisy**: beyond the tolerance but not significant; or within the tolerance but the CI
  is too wide to tell (wider than ``DISPERSION_WIDTH`` x tolerance); or a regression
  measured while the machine was throttled or under foreign load;
* **ok**: otherwise.  **new**: no baseline samples.

Defaults (chosen from the simulations in ``tests/test_stats_power.py``; figures in README):
tolerance 5%, alpha 0.05 family-wise over a run's checks, 95% CI, at least 10 repetitions
in full mode.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from perfsuite.model import BaselineVerdict, FloorVerdict, Summary

ALPHA = 0.05
CONFIDENCE = 0.95
N_RESAMPLES = 2000
MIN_SAMPLES = 5
# Within tolerance, a CI wider than this many tolerances (+-2 tolerances around the ratio
# by default) cannot tell "ok" from a regression at the tolerance: the verdict is noisy.
DISPERSION_WIDTH = 4.0


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
    reason: str = "",
) -> FloorVerdict:
    """Judge the best sample against ``peak * fraction``; no peak means no-reference."""
    if peak is None:
        return FloorVerdict(
            "no-reference", value=value, fraction=fraction, figure=figure, reason=reason
        )
    if not higher_is_better:
        raise ValueError("floors are defined for rates (higher is better) only")
    threshold = peak * fraction
    verdict = "pass" if value >= threshold else "fail"
    return FloorVerdict(
        verdict,
        value=value,
        peak=peak,
        fraction=fraction,
        threshold=threshold,
        fraction_of_peak=value / peak,
        figure=figure,
        estimated=estimated,
        reason=reason,
    )


def oriented_ratio(current: float, baseline: float, higher_is_better: bool) -> float:
    """current/baseline for rates, baseline/current for times: below 1 is always worse."""
    return current / baseline if higher_is_better else baseline / current


@dataclass(frozen=True)
class Comparison:
    """The statistics of one current-vs-baseline comparison (no verdict yet)."""

    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    n_current: int
    n_baseline: int

    @property
    def few_samples(self) -> bool:
        """Fewer samples than a judgement needs on either side."""
        return min(self.n_current, self.n_baseline) < MIN_SAMPLES


def _median_ratio(higher_is_better: bool):  # type: ignore[no-untyped-def]
    def statistic(cur: np.ndarray, base: np.ndarray, axis: int = -1) -> np.ndarray:
        c = np.median(cur, axis=axis)
        b = np.median(base, axis=axis)
        ratio: np.ndarray = c / b if higher_is_better else b / c
        return ratio

    return statistic


def compare(
    current: Sequence[float],
    baseline: Sequence[float],
    *,
    higher_is_better: bool,
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> Comparison:
    """Ratio of medians, its bootstrap CI and the Mann-Whitney p-value."""
    cur = np.asarray(current, dtype=float)
    base = np.asarray(baseline, dtype=float)
    if cur.size == 0 or base.size == 0:
        raise ValueError("both samples must be non-empty")
    ratio = oriented_ratio(float(np.median(cur)), float(np.median(base)), higher_is_better)
    if cur.size > 1 and base.size > 1 and np.ptp(np.concatenate([cur, base])) > 0:
        with warnings.catch_warnings():
            # Tiny or tied samples give degenerate bootstrap distributions; the CI then
            # collapses to the point estimate, which is what it should report.
            warnings.simplefilter("ignore", sps.DegenerateDataWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            boot = sps.bootstrap(
                (cur, base),
                _median_ratio(higher_is_better),
                vectorized=True,
                n_resamples=n_resamples,
                confidence_level=confidence,
                method="percentile",
                rng=np.random.default_rng(seed),
            )
        low, high = float(boot.confidence_interval.low), float(boot.confidence_interval.high)
        p_value = float(sps.mannwhitneyu(cur, base, alternative="two-sided").pvalue)
    else:
        low = high = ratio
        p_value = 1.0
    if not (math.isfinite(low) and math.isfinite(high)):
        low = high = ratio
    return Comparison(ratio, min(low, ratio), max(high, ratio), p_value, cur.size, base.size)


def holm(p_values: Sequence[float], alpha: float = ALPHA, m: int | None = None) -> list[bool]:
    """Holm's step-down: which hypotheses are rejected, family-wise error <= alpha.

    ``m`` is the size of the family; it may exceed ``len(p_values)`` when only some
    p-values are known yet.  A rejection decided on such a prefix of the family stays a
    rejection whatever the remaining p-values turn out to be, which is what lets a test
    fail as soon as its own comparison is made.
    """
    m = len(p_values) if m is None else m
    if m < len(p_values):
        raise ValueError("the family cannot be smaller than the p-values in it")
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    rejected = [False] * len(p_values)
    for rank, i in enumerate(order):
        if p_values[i] > alpha / (m - rank):
            break
        rejected[i] = True
    return rejected


class SequentialHolm:
    """Holm over a family of known size whose p-values arrive one by one."""

    def __init__(self, m: int, alpha: float = ALPHA) -> None:
        """Start a family of ``m`` hypotheses."""
        self.m = max(1, m)
        self.alpha = alpha
        self.p_values: list[float] = []

    def add(self, p_value: float) -> bool:
        """Add a p-value; return whether it is rejected given all seen so far."""
        self.p_values.append(p_value)
        self.m = max(self.m, len(self.p_values))
        return holm(self.p_values, self.alpha, self.m)[-1]


def decide(
    comparison: Comparison,
    *,
    tolerance: float,
    significant: bool,
    guards: Sequence[str] = (),
) -> tuple[str, str]:
    """Turn a comparison into a verdict and the reason for it."""
    c = comparison
    stat = f"ratio {c.ratio:.3f} [{c.ci_low:.3f}, {c.ci_high:.3f}], p={c.p_value:.2g}"
    few = f"; only {min(c.n_current, c.n_baseline)} samples" if c.few_samples else ""
    worse, better = c.ratio < 1 - tolerance, c.ratio > 1 + tolerance
    if worse or better:
        direction = "slower" if worse else "faster"
        if not significant:
            return "noisy", f"{direction} beyond {tolerance:.0%} but not significant ({stat}){few}"
        if worse and guards:
            return "noisy", f"slower ({stat}) but measured {'; '.join(guards)}"
        return (
            "regressed" if worse else "improved"
        ), f"{direction} beyond {tolerance:.0%} ({stat})"
    width = (c.ci_high - c.ci_low) / c.ratio
    if width > DISPERSION_WIDTH * tolerance:
        return "noisy", f"too dispersed to judge: CI width {width:.1%} ({stat}){few}"
    return "ok", f"within {tolerance:.0%} ({stat}){few}"


def baseline_verdict(
    current: Sequence[float],
    baseline: Sequence[float] | None,
    *,
    higher_is_better: bool,
    tolerance: float,
    baseline_run_id: str = "",
    holm_family: SequentialHolm | None = None,
    alpha: float = ALPHA,
    guards: Sequence[str] = (),
    seed: int = 0,
) -> BaselineVerdict:
    """Compare samples with the baseline's; no baseline samples means *new*."""
    if not baseline:
        return BaselineVerdict("new", tolerance=tolerance, reason="no baseline for this check")
    c = compare(current, baseline, higher_is_better=higher_is_better, seed=seed)
    significant = holm_family.add(c.p_value) if holm_family else c.p_value <= alpha
    verdict, reason = decide(c, tolerance=tolerance, significant=significant, guards=guards)
    return BaselineVerdict(
        verdict,
        ratio=c.ratio,
        tolerance=tolerance,
        baseline_median=float(np.median(baseline)),
        baseline_run_id=baseline_run_id,
        reason=reason,
        ci_low=c.ci_low,
        ci_high=c.ci_high,
        p_value=c.p_value,
        significant=significant,
        n_baseline=c.n_baseline,
        few_samples=c.few_samples,
    )
