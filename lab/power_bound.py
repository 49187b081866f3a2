"""How much power a check's run medians allow on this machine: the bound, from real runs.

Usage: python lab/power_bound.py RUN.json [RUN.json ...] [--baseline-runs 5]
                                       [--slowdown 0.2] [--false-alarms 0.01] [--limit 1.15]

Reads run records of the same code in fresh processes (a verdict benchmark's baseline and
A/A runs: nothing changed between them).  For each check, the sd of its run medians (log) is
its between-run spread ``s``: what a whole run moves by when it is started again.

A verdict judges a new run's median against the mean of K baseline runs.  Even with ``s``
known exactly (no estimate, no correction for a family, no materiality rule) the difference
varies by ``s * sqrt(1 + 1/K)``, and the most powerful test of "slower by the slowdown" at a
false-alarm rate ``a`` is the one-sided z test (Neyman-Pearson): its power is
``Phi(d - z(1 - a))``, ``d`` being the slowdown's log distance over that sd.  That is the
bound for any test on the check's run medians, with the runs' sample counts and K baseline
runs.  ``s`` is estimated from the runs given, so the bound is too; the script prints, per
check and for the whole suite:

* the bound with every check at the same false-alarm rate ``a``;
* the bound with the false alarms shared out to maximise the mean power (the suite's A/A
  target is on the share of all verdicts, so a rule may spend more on some checks): with
  ``z_i = (ln L + d_i^2 / 2) / d_i`` for one multiplier ``L`` chosen so the false alarms
  average ``a``, which is where every check's extra power per extra false alarm is equal;
* the same with each ``s`` at the low end of its 95% confidence interval (chi-square, runs - 1
  degrees of freedom, 2.5% one-sided per check, so about one check in 40 may be quieter
  still): an upper limit on the bound at that confidence;
* the same with endless repetitions inside each run: ``s`` less the part of a run median's
  variance that the run's own repetitions explain (``(pi/2) s_w^2 / n``, ``s_w`` their sd),
  which more samples per run could average away and nothing else does;
* the chance that K fresh runs of a check all fall within ``--limit`` (max/min) given ``s``.

``--per-machine-speed`` first divides each CPU check's samples by the machine probe's rate
measured beside it (``perfsuite/measure/probe.py``), as a verdict could if the probe were trusted.

Outside the bound: a rule that pools checks (one test of the whole run's shift; a run-wide
shift is what a slow spell of the machine looks like, so only a yardstick outside the
software, the machine probe, could tell one from a regression of everything), and a rule on
a check's ratio to its bare reference (which an upgrade of the framework under both would
cancel).  A benchmark of the machine, not a test.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import numpy as np
from scipy import optimize
from scipy import stats as sps

from lab.variance_levels import deviations, load
from perfsuite.judge import speed
from perfsuite.measure import readings

SEED = 2026
DRAWS = 20000


def power(d: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Power of one-sided z tests with critical values ``z`` at standardised effects ``d``."""
    return np.asarray(sps.norm.sf(z - d), dtype=float)


def shared_out(d: np.ndarray, rate: float) -> np.ndarray:
    """Critical values maximising the mean power when the false alarms average ``rate``."""

    def z_of(log_l: float) -> np.ndarray:
        return np.asarray((log_l + d**2 / 2) / d, dtype=float)

    def excess(log_l: float) -> float:
        return float(np.mean(sps.norm.sf(z_of(log_l)))) - rate

    # Every z below -40 (every false alarm certain) at the low end, above 40 at the high end.
    top = float(np.max(d))
    return z_of(optimize.brentq(excess, -40 * top - top**2 / 2, 40 * top))


def within_limit(sd: float, runs: int, limit: float, rng: np.random.Generator) -> float:
    """Chance that ``runs`` fresh run medians with log sd ``sd`` span at most ``limit``."""
    draws = rng.normal(0.0, sd, size=(DRAWS, runs))
    return float(np.mean(np.ptp(draws, axis=1) <= math.log(limit)))


def per_machine_speed(runs: list[list[dict[str, Any]]]) -> None:
    """Divide each probed check's samples by the probe's speed beside it, in place."""
    for run in runs:
        for result in run:
            machine = result.get("machine") or (result.get("context") or {}).get("machine")
            if readings.own_rate(machine) is None:
                continue
            hib = result["higher_is_better"]
            result["samples"] = [speed.per_speed(float(v), machine, hib) for v in result["samples"]]


def repetition_variance(
    runs: list[list[dict[str, Any]]], order: list[str], within: np.ndarray
) -> np.ndarray:
    """Per check, the mean over runs of ``(pi/2) s_w^2 / n``: its run median's own variance.

    ``within`` is :func:`deviations`' sd of each run's repetitions (runs x checks; NaN for a
    run of one sample, which says nothing and is left out).
    """
    counts = np.array(
        [[len({r["id"]: r for r in run}[c]["samples"]) for c in order] for run in runs]
    )
    part = math.pi / 2 * within**2 / counts
    known = np.isfinite(part)
    return np.where(known, part, 0.0).sum(axis=0) / np.maximum(known.sum(axis=0), 1)


def main() -> None:
    """Print each check's power bound and the suite's."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("records", nargs="+", type=Path)
    parser.add_argument("--baseline-runs", type=int, default=5)
    parser.add_argument("--slowdown", type=float, default=0.2)
    parser.add_argument("--false-alarms", type=float, default=0.01)
    parser.add_argument("--limit", type=float, default=1.15)
    parser.add_argument("--per-machine-speed", action="store_true")
    args = parser.parse_args()
    if len(args.records) < 3:
        parser.error("give at least 3 run records of the same code")
    if not 0 < args.slowdown < 1:
        parser.error("--slowdown must be a fraction between 0 and 1")
    if not 0 < args.false_alarms < 1:
        parser.error("--false-alarms must be a fraction between 0 and 1")
    if args.baseline_runs < 1:
        parser.error("--baseline-runs must be at least 1")
    if args.limit <= 1:
        parser.error("--limit must be above 1")
    try:
        runs = load(args.records)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        parser.error(f"cannot read the run records: {type(exc).__name__}: {exc}")
    if args.per_machine_speed:
        per_machine_speed(runs)
    order, dev, within = deviations(runs)
    n = len(runs)
    # A floor keeps an sd of 0 (identical runs) finite: its power is 1 either way.
    sd = np.maximum(dev.std(axis=0, ddof=1), 1e-9)
    low = sd * math.sqrt((n - 1) / sps.chi2.ppf(0.975, n - 1))
    between = np.sqrt(np.maximum(sd**2 - repetition_variance(runs, order, within), 1e-18))
    effect = -math.log(1 - args.slowdown)
    scale = math.sqrt(1 + 1 / args.baseline_runs)
    rate = args.false_alarms
    z_same = sps.norm.isf(rate)
    rng = np.random.default_rng(SEED)

    print(
        f"{n} runs, {len(order)} checks measured in every run; a {args.slowdown:.0%} slowdown "
        f"(log {effect:.3f}) against {args.baseline_runs} baseline run(s), false alarms "
        f"at most {rate:.2%} of verdicts\n"
    )
    print(
        "| check | between-run sd | 95% CI low | power bound (same rate) | at CI low | "
        f"{args.baseline_runs} runs within {args.limit} |"
    )
    print("|---|---|---|---|---|---|")
    d_measured, d_low = effect / (sd * scale), effect / (low * scale)
    same, same_low = power(d_measured, z_same), power(d_low, z_same)
    within_ok = [within_limit(float(s), args.baseline_runs, args.limit, rng) for s in sd]
    for j in sorted(range(len(order)), key=lambda j: -sd[j]):
        print(
            f"| {order[j]} | {sd[j]:.1%} | {low[j]:.1%} | {same[j]:.0%} | {same_low[j]:.0%} | "
            f"{within_ok[j]:.0%} |"
        )

    print(
        f"\n| the whole suite | power bound at {args.slowdown:.0%} | checks with a bound >= 95% |"
    )
    print("|---|---|---|")
    for label, sds in (
        ("measured sd", sd),
        ("sd at its 95% CI low", low),
        ("endless repetitions in a run", between),
    ):
        d = effect / (sds * scale)
        at_rate = power(d, np.full_like(d, z_same))
        best = power(d, shared_out(d, rate))
        print(
            f"| {label}, same false-alarm rate | {np.mean(at_rate):.1%} | "
            f"{int(np.sum(at_rate >= 0.95))} of {len(d)} |"
        )
        print(
            f"| {label}, false alarms shared out | {np.mean(best):.1%} | "
            f"{int(np.sum(best >= 0.95))} of {len(d)} |"
        )
    needed = effect / (scale * (sps.norm.isf(rate) + sps.norm.isf(0.05)))
    print(
        f"\nA check reaches 95% power at {rate:.2%} false alarms only with a between-run sd of "
        f"at most {needed:.1%}; {int(np.sum(sd <= needed))} of {len(order)} checks have one "
        f"here (median {np.median(sd):.1%}; {np.median(between):.1%} with endless repetitions)."
    )
    expected = np.mean(within_ok)
    print(
        f"Expected share of checks whose {args.baseline_runs} fresh runs stay within "
        f"{args.limit}: {expected:.0%} (of {len(order)})."
    )


if __name__ == "__main__":
    main()
