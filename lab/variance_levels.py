"""Where the run-to-run spread comes from: whole-run spells or drift within a run.

Usage: python lab/variance_levels.py RUN.json [RUN.json ...] [--max-lag 12]

Reads run records of the same code in fresh processes (a verdict benchmark's baseline or
A/A runs; nothing changed between them).  For every check measured in every run, each run's
median is taken on a log scale relative to the check's mean over the runs (its
*deviation*).  The deviations are then split three ways:

* **run-wide**: the run's median deviation over all its checks (a spell in which the whole
  machine ran slower or faster for the entire run);
* **drift**: what is left, and how it correlates between checks that ran one, two, ...
  places apart in the run (a machine that drifts over seconds makes neighbours move
  together);
* **within-run**: the spread of the repetitions inside one check's measurement.

It prints the share of the between-run variance in each part and, from the drift's
correlation, what the between-run spread would become if each check's samples were taken in
R rounds spread over the run instead of in one burst (R = 1, 2, 3, 5): spreading samples in
time can average the drift, never a run-wide spell (that needs more runs, or a probe of
the machine).  A benchmark of the machine, not a test.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np


def load(paths: list[Path]) -> list[list[dict[str, Any]]]:
    """Each run's results, in the order they ran."""
    runs = []
    for path in paths:
        record = json.loads(path.read_text())
        runs.append([r for r in record["results"] if r.get("samples")])
    return runs


def deviations(runs: list[list[dict[str, Any]]]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Checks in every run, their log deviations (runs x checks), and within-run sd's."""
    common = set.intersection(*({r["id"] for r in run} for run in runs))
    order = [r["id"] for r in runs[0] if r["id"] in common]
    logs = np.empty((len(runs), len(order)))
    within = np.empty((len(runs), len(order)))
    for i, run in enumerate(runs):
        by_id = {r["id"]: r for r in run}
        for j, check in enumerate(order):
            r = by_id[check]
            sign = 1.0 if r["higher_is_better"] else -1.0
            values = np.log(np.asarray(r["samples"], dtype=float)) * sign
            logs[i, j] = float(np.median(values))
            within[i, j] = float(np.std(values, ddof=1)) if len(values) > 1 else math.nan
    return order, logs - logs.mean(axis=0), within


def lag_correlation(resid: np.ndarray, max_lag: int) -> list[float]:
    """Correlation of the drift between checks ``lag`` places apart, pooled over runs."""
    out = []
    for lag in range(1, max_lag + 1):
        a = resid[:, :-lag].ravel()
        b = resid[:, lag:].ravel()
        out.append(float(np.corrcoef(a, b)[0, 1]) if len(a) > 2 else math.nan)
    return out


def spread_rounds(var_drift: float, rho: list[float], checks: int, rounds: int) -> float:
    """Variance of the mean of ``rounds`` drift readings spaced evenly over a run."""
    if rounds == 1:
        return var_drift
    gap = max(1, checks // rounds)

    def corr(k: int) -> float:
        lag = k * gap
        # Beyond the measured lags the readings are taken as independent.
        r = rho[lag - 1] if lag <= len(rho) else 0.0
        return max(r, 0.0) if math.isfinite(r) else 0.0

    total = rounds + 2 * sum((rounds - k) * corr(k) for k in range(1, rounds))
    return var_drift * total / rounds**2


def main() -> None:
    """Print the variance split and the effect of spreading samples over the run."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("records", nargs="+", type=Path)
    parser.add_argument("--max-lag", type=int, default=12)
    args = parser.parse_args()
    if len(args.records) < 3:
        parser.error("give at least 3 run records of the same code")
    try:
        runs = load(args.records)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        parser.error(f"cannot read the run records: {type(exc).__name__}: {exc}")
    order, dev, within = deviations(runs)
    run_wide = np.median(dev, axis=1, keepdims=True)
    resid = dev - run_wide
    var_between = float(np.mean(dev.var(axis=0, ddof=1)))
    var_wide = float(run_wide.var(ddof=1))
    var_drift = float(np.mean(resid.var(axis=0, ddof=1)))
    var_within = float(np.nanmean(within**2))
    print(f"{len(runs)} runs, {len(order)} checks measured in every run\n")
    print("| level | sd (log) | share of between-run variance |")
    print("|---|---|---|")
    print(f"| between runs (a check's run medians) | {math.sqrt(var_between):.1%} | 100% |")
    print(f"| run-wide spell | {math.sqrt(var_wide):.1%} | {var_wide / var_between:.0%} |")
    print(f"| drift within a run | {math.sqrt(var_drift):.1%} | {var_drift / var_between:.0%} |")
    print(f"| repetitions inside one measurement | {math.sqrt(var_within):.1%} | - |")
    print("\nrun-wide deviation per run:", ", ".join(f"{v:+.1%}" for v in run_wide.ravel()))
    rho = lag_correlation(resid, args.max_lag)
    print("\ndrift correlation between checks k places apart in a run:")
    print("  " + ", ".join(f"k={k}: {r:+.2f}" for k, r in enumerate(rho, 1)))
    print("\nbetween-run sd if each check's samples came in R rounds spread over the run:")
    for rounds in (1, 2, 3, 5):
        var = var_wide + spread_rounds(var_drift, rho, len(order), rounds)
        print(f"  R={rounds}: {math.sqrt(var):.1%}")
    worst: dict[str, float] = defaultdict(float)
    for j, check in enumerate(order):
        worst[check] = float(np.std(resid[:, j], ddof=1))
    print("\nchecks with the most drift beyond the run-wide part (sd of log):")
    for check, sd in sorted(worst.items(), key=lambda kv: -kv[1])[:10]:
        print(f"  {sd:6.1%}  {check}")
    print(f"\nmedian per-check drift sd: {statistics.median(worst.values()):.1%}")


if __name__ == "__main__":
    main()
