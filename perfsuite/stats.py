"""Pure functions: summaries of samples and the two verdicts (floor and baseline)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from perfsuite.model import BaselineVerdict, FloorVerdict, Summary


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


def baseline_verdict(
    current: Sequence[float],
    baseline: Sequence[float] | None,
    *,
    higher_is_better: bool,
    tolerance: float,
    baseline_run_id: str = "",
) -> BaselineVerdict:
    """Compare medians within a tolerance; no baseline samples means *new*."""
    if not baseline:
        return BaselineVerdict("new", tolerance=tolerance, reason="no baseline for this check")
    cur = float(np.median(current))
    base = float(np.median(baseline))
    ratio = oriented_ratio(cur, base, higher_is_better)
    if ratio < 1 - tolerance:
        verdict = "regressed"
    elif ratio > 1 + tolerance:
        verdict = "improved"
    else:
        verdict = "ok"
    return BaselineVerdict(
        verdict,
        ratio=ratio,
        tolerance=tolerance,
        baseline_median=base,
        baseline_run_id=baseline_run_id,
        reason=f"median ratio {ratio:.3f} against tolerance {tolerance:.0%}",
    )
