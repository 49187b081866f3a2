"""False alarms and power of ``perfsuite fleet report``'s rule, on simulated fleets.

Usage: python -m lab.fleet_false_alarms [--fleets 5000] [--checks 10] [--sd 0.03]
                                        [--alpha 0.01] [--tolerance 0.10] [--seed 1]
                                        [--sizes 4,16,100,1000] [--noise normal,t3]
                                        [--markdown]

For fleet sizes 4, 16, 100 and 1000, it simulates fleets in which no node is slow: each
node's figure at each check is the check's level times log-normal noise of ``--sd``
(``normal``), or times the exponential of a Student t with 3 degrees of freedom scaled to the
same sd (``t3``: heavier tails, a node now and then far off).  Each fleet is judged twice:

* one run: :func:`perfsuite.fleet.judge.judge`, as ``fleet report DIR`` runs it; a node is
  drained when it is flagged;
* confirmed: every node's figures are drawn again, independently (a rerun), and
  :func:`perfsuite.fleet.judge.confirm` judges the candidates' rerun against the first run's
  fleet, as ``fleet report DIR --confirm DIR/confirm`` does; a node is drained when its
  rerun confirms a check it was flagged at;
* confirmed twice: the nodes still standing after that (confirmed, or still to rerun) are
  drawn again, and ``confirm(..., before=...)`` judges only their standing cells; a node
  is drained when the second rerun confirms it too.

The false-alarm rate is the fraction of healthy fleets in which any node is drained, with a
95% Wilson interval.  Power is the fraction of fleets with one node 20% slow (at every check,
or at one check), slow in both runs, in which that node is drained.  ``--tolerance 0``
measures the statistical part alone.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from perfsuite.fleet import judge

SIZES = (4, 16, 100, 1000)
SLOW = 0.20
SCENARIOS = ("none", "all", "one")


def noise(rng: np.random.Generator, shape: tuple[int, int], sd: float, tails: str) -> np.ndarray:
    """Log-scale noise of standard deviation ``sd``."""
    if tails == "normal":
        return rng.normal(0.0, sd, shape)
    return rng.standard_t(3, shape) * sd / np.sqrt(3.0)  # t3 has variance 3


def figures(
    rng: np.random.Generator, n: int, args: argparse.Namespace, tails: str, slow: str
) -> np.ndarray:
    """One run's figures: node 0 slow at every check, at check 0, or not at all."""
    logs = noise(rng, (n, args.checks), args.sd, tails)
    if slow == "all":
        logs[0] += np.log(1 - SLOW)
    elif slow == "one":
        logs[0, 0] += np.log(1 - SLOW)
    hib = np.arange(args.checks) % 2 == 0  # half throughputs, half latencies
    values: np.ndarray = np.exp(np.where(hib, logs, -logs)) * 100.0
    return values


def trial(
    rng: np.random.Generator, n: int, args: argparse.Namespace, tails: str, slow: str
) -> tuple[bool, ...]:
    """One fleet: (node 0 drained, another drained) after one run, one rerun and two."""
    hib = np.arange(args.checks) % 2 == 0
    rule = judge.Rule(alpha=args.alpha, tolerance=args.tolerance, min_spread=args.min_spread)
    first = judge.judge(figures(rng, n, args, tails, slow), hib, None, rule)
    flagged = first.flagged.any(axis=1)
    if not flagged.any():
        return (False,) * 6
    out = [bool(flagged[0]), bool(flagged[1:].any())]
    c = None
    for _ in range(2):
        rerun = figures(rng, n, args, tails, slow)  # every node afresh; only candidates count
        c = judge.confirm(first, rerun, hib, before=c)
        drained = c.verdicts == judge.Verdict.CONFIRMED
        out += [bool(drained[0]), bool(drained[1:].any())]
    return tuple(out)


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson interval of a binomial proportion k / n."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _rate(k: int, n: int, ci: bool = False) -> str:
    text = f"{k / n:.2%}" if ci else f"{k / n:.1%}"
    if ci:
        lo, hi = wilson(k, n)
        text += f" ({lo:.2%}-{hi:.2%})"
    return text


def main() -> None:
    """Print the false-alarm rate and the power, one run and confirmed, by size and noise."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fleets", type=int, default=5000, help="fleets per row and scenario")
    ap.add_argument("--checks", type=int, default=10)
    ap.add_argument("--sd", type=float, default=0.03)
    ap.add_argument("--alpha", type=float, default=judge.Rule.alpha)
    ap.add_argument("--tolerance", type=float, default=judge.Rule.tolerance)
    ap.add_argument("--min-spread", type=float, default=judge.Rule.min_spread)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--sizes", default=",".join(map(str, SIZES)), help="fleet sizes, comma-separated"
    )
    ap.add_argument("--noise", default="normal,t3", help="noise tails, comma-separated")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print(
        f"{args.fleets} fleets per row and scenario, {args.checks} checks per node, noise sd "
        f"{args.sd:.0%}, alpha {args.alpha}, tolerance {args.tolerance:.0%}, min spread "
        f"{args.min_spread:.0%}; a rerun draws every node's noise afresh"
    )
    head = (
        "noise", "checks", "nodes", "false alarm: one run (95% CI)",
        "false alarm: confirmed once (95% CI)", "false alarm: confirmed twice (95% CI)",
        "power, 20% slow at every check: one run / once / twice",
        "power, 20% slow at one check: one run / once / twice",
        "others drained beside a slow node: one run / once / twice",
    )  # fmt: skip
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
    else:
        print("  ".join(head))
    for tails in args.noise.split(","):
        for n in (int(s) for s in args.sizes.split(",")):
            started = time.monotonic()
            hits = {
                scenario: np.array(
                    [trial(rng, n, args, tails, scenario) for _ in range(args.fleets)]
                )
                for scenario in SCENARIOS
            }
            f = args.fleets
            none = hits["none"]  # every node healthy: any one drained is a false alarm
            null = [int((none[:, k] | none[:, k + 1]).sum()) for k in (0, 2, 4)]
            every, one = hits["all"].sum(axis=0), hits["one"].sum(axis=0)

            def stages(counts: np.ndarray, node: int, f: int = f) -> str:
                return " / ".join(_rate(int(counts[node + k]), f) for k in (0, 2, 4))

            row = (
                tails,
                str(args.checks),
                str(n),
                *(_rate(k, f, ci=True) for k in null),
                stages(every, 0),
                stages(one, 0),
                stages(every, 1),
            )
            if args.markdown:
                print("| " + " | ".join(row) + " |", flush=True)
            else:
                print("  ".join(row) + f"  [{time.monotonic() - started:.0f} s]", flush=True)


if __name__ == "__main__":
    main()
