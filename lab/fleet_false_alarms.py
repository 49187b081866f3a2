"""False alarms and power of ``perfsuite fleet report``'s rule, on simulated fleets.

Usage: python -m lab.fleet_false_alarms [--fleets 2000] [--checks 10] [--sd 0.03]
                                        [--alpha 0.01] [--tolerance 0.10] [--seed 1]

For fleet sizes 4, 16, 100 and 1000, it simulates fleets in which no node is slow: each
node's figure at each check is the check's level times log-normal noise of ``--sd``
(``normal``), or times the exponential of a Student t with 3 degrees of freedom scaled to the
same sd (``t3``: heavier tails, a node now and then far off).  The false-alarm rate is the
fraction of fleets in which any node is flagged at any check.  Power is the fraction of
fleets with one node 20% slow (on every check, or on one check) in which that node is flagged,
and the rate at which another node is flagged beside it.  The rule is
:func:`perfsuite.fleet.judge.judge`, as the report runs it; with ``--tolerance 0`` the
statistical part is measured alone.
"""

from __future__ import annotations

import argparse

import numpy as np

from perfsuite.fleet import judge

SIZES = (4, 16, 100, 1000)
SLOW = 0.20


def noise(rng: np.random.Generator, shape: tuple[int, int], sd: float, tails: str) -> np.ndarray:
    """Log-scale noise of standard deviation ``sd``."""
    if tails == "normal":
        return rng.normal(0.0, sd, shape)
    return rng.standard_t(3, shape) * sd / np.sqrt(3.0)  # t3 has variance 3


def trial(
    rng: np.random.Generator, n: int, args: argparse.Namespace, tails: str, slow: str
) -> tuple[bool, bool]:
    """One fleet: (the slow node flagged, another node flagged)."""
    logs = noise(rng, (n, args.checks), args.sd, tails)
    if slow == "all":
        logs[0] += np.log(1 - SLOW)
    elif slow == "one":
        logs[0, 0] += np.log(1 - SLOW)
    hib = np.arange(args.checks) % 2 == 0  # half throughputs, half latencies
    values = np.exp(np.where(hib, logs, -logs)) * 100.0
    rule = judge.Rule(alpha=args.alpha, tolerance=args.tolerance, min_spread=args.min_spread)
    flagged = judge.judge(values, hib, None, rule).flagged.any(axis=1)
    return bool(flagged[0]), bool(flagged[1:].any())


def main() -> None:
    """Print the false-alarm rate and the power, by fleet size and noise kind."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fleets", type=int, default=2000)
    ap.add_argument("--checks", type=int, default=10)
    ap.add_argument("--sd", type=float, default=0.03)
    ap.add_argument("--alpha", type=float, default=judge.Rule.alpha)
    ap.add_argument("--tolerance", type=float, default=judge.Rule.tolerance)
    ap.add_argument("--min-spread", type=float, default=judge.Rule.min_spread)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print(
        f"{args.fleets} fleets per cell, {args.checks} checks per node, noise sd "
        f"{args.sd:.0%}, alpha {args.alpha}, tolerance {args.tolerance:.0%}, "
        f"min spread {args.min_spread:.0%}"
    )
    print("noise   nodes  false alarm  power(20% slow, all checks)  power(one check)  "
          "others flagged beside it")  # fmt: skip
    for tails in ("normal", "t3"):
        for n in SIZES:
            fleets = args.fleets if n < 1000 else max(200, args.fleets // 5)
            alarms = sum(trial(rng, n, args, tails, "none")[1] for _ in range(fleets))
            all_hits = [trial(rng, n, args, tails, "all") for _ in range(fleets)]
            one_hits = [trial(rng, n, args, tails, "one") for _ in range(fleets)]
            print(
                f"{tails:7s} {n:5d}  {alarms / fleets:11.4f}  "
                f"{np.mean([h for h, _ in all_hits]):27.3f}  "
                f"{np.mean([h for h, _ in one_hits]):16.3f}  "
                f"{np.mean([o for _, o in all_hits]):.4f}"
            )


if __name__ == "__main__":
    main()
