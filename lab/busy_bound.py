"""What ``perfsuite ab`` and the stored baseline can see on a busy machine, from A/A records.

    python -m lab.busy_bound quiet=Q/ab.json steady=S/ab.json bursty=B/ab.json
                             [--replays 400] [--slowdowns 0.1,0.2] [--baseline-runs 5]

Each argument is a condition's name and the ``ab.json`` of an A/A ``perfsuite ab`` run under
it (``python -m lab.ab_repeat --burner steady|bursty|none``).  For each condition it prints:

* the spreads the machine gave: per check, the sd of the rounds' log B/A (what a pair leaves)
  and the sd of the rounds' log A medians (what fresh processes minutes apart leave: the
  stored baseline's run-to-run level), medians over each family of checks;
* the pairs kept under a shared load and the pairs left out, with their reasons;
* **A/B power, replayed**: each check's recorded log ratios, centred on zero, resampled with
  replacement for as many rounds as the A/A record judged it on, shifted by ``log(1 - s)``,
  and judged as one family by the product's own rule (``perfsuite.ab.paired``); the share
  of checks called ``regressed``.  With ``s = 0`` it is the A/A false-alarm rate.  A real
  run at a slowdown stops the decided checks and fits more rounds in its budget, so the
  replay's power is a lower bound;
* **the stored baseline's bound**: Phi(d / (s * sqrt(1 + 1/K)) - z(a)) with s the median
  check's run-to-run sd, d = -log(1 - slowdown), K stored runs and a = 0.01 one-sided (the
  brief's bound): the power of any one-run test
  against K stored runs, whatever the rule.  (perfsuite calls a check measured under foreign
  load ``noisy``, never ``regressed``: its stored-baseline power under load is 0 by design.)
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scipy.stats import norm

from perfsuite.ab import paired

ALPHA_ONE_SIDED = 0.01


def family(check: str) -> str:
    """``numpy STREAM``, ``torch GEMM``: a check's backend and kind."""
    name = check.rsplit("::", 1)[-1]
    kind = "STREAM" if name.startswith("test_stream") else "GEMM"
    backend = name.split("[", 1)[-1].split("-", 1)[0]
    return f"{backend} {kind}"


def a_medians(data: dict[str, Any]) -> dict[str, list[float]]:
    """Each check's A median per round, in round order."""
    out: dict[str, list[float]] = defaultdict(list)
    for run in data["rounds"]:
        if run["side"] == "A" and not run["failed"]:
            for check, reading in run["readings"].items():
                if reading["median"] > 0:
                    out[check].append(reading["median"])
    return out


def sd(values: list[float]) -> float:
    """Sample sd (nan below 2 values)."""
    return statistics.stdev(values) if len(values) > 1 else float("nan")


def replay_power(
    checks: list[dict[str, Any]], slowdown: float, replays: int, seed: int, rounds: int = 0
) -> float:
    """Share of check verdicts ``regressed`` when B is ``slowdown`` slower, replayed.

    At no slowdown: the share ``regressed`` or ``improved`` (every one a false alarm).
    """
    rng = random.Random(seed)
    shift = math.log(1 - slowdown) if slowdown else 0.0
    usable = [c for c in checks if len(c["log_ratios"]) >= 2]
    called = Counter()
    for _ in range(replays):
        family_ = []
        for c in usable:
            logs = c["log_ratios"]
            centre = statistics.fmean(logs)
            # B slower: a rate's B/A falls, a latency's rises.
            signed = shift if c["higher_is_better"] else -shift
            draw = [rng.choice(logs) - centre + signed for _ in range(rounds or len(logs))]
            family_.append((paired.summarize(draw), c["higher_is_better"], c["tolerance"]))
        for judged in paired.judge_family(family_):
            called[judged.verdict] += 1
    total = sum(called.values())
    wrong = called["regressed"] + (called["improved"] if not slowdown else 0)
    return wrong / total if total else float("nan")


def baseline_bound(sigma: float, slowdown: float, runs: int) -> float:
    """The brief's bound: power of one run against ``runs`` stored runs at run sd ``sigma``."""
    delta = -math.log(1 - slowdown)
    return float(
        norm.cdf(delta / (sigma * math.sqrt(1 + 1 / runs)) - norm.ppf(1 - ALPHA_ONE_SIDED))
    )


def main() -> None:
    """Print one block per condition, then the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("records", nargs="+", metavar="NAME=AB.json")
    parser.add_argument("--replays", type=int, default=400)
    parser.add_argument("--slowdowns", default="0.1,0.2")
    parser.add_argument("--baseline-runs", type=int, default=5)
    parser.add_argument(
        "--rounds",
        default="",
        help="also replay at these round counts (comma-separated): the power a longer "
        "budget would buy, each check's rounds resampled to that many",
    )
    args = parser.parse_args()
    slowdowns = [float(x) for x in args.slowdowns.split(",")]
    rows = []
    for spec in args.records:
        name, _, path = spec.partition("=")
        data = json.loads(Path(path).read_text())
        checks = data["checks"]
        medians = a_medians(data)
        pair_sd: dict[str, list[float]] = defaultdict(list)
        run_sd: dict[str, list[float]] = defaultdict(list)
        for c in checks:
            if len(c["log_ratios"]) > 1:
                pair_sd[family(c["id"])].append(sd(c["log_ratios"]))
            logs = [math.log(m) for m in medians.get(c["id"], [])]
            if len(logs) > 1:
                run_sd[family(c["id"])].append(sd(logs))
        kept = [x for c in checks for x in c.get("shared_loads", [])]
        busy = [x for x in kept if x > 0.25]
        left = Counter(w for c in checks for w in c.get("left_out", []))
        verdicts = Counter(c["verdict"] for c in checks)
        print(f"## {name}: {path}")
        print(
            f"{len(data['order'])} rounds in {data['seconds']:.0f} s; verdicts "
            + ", ".join(f"{v} {n}" for v, n in verdicts.most_common())
        )
        print(
            f"pairs judged {len(kept)}, of them under a shared load > 0.25 cores {len(busy)}"
            + (f" ({min(busy):.2f}-{max(busy):.2f} cores)" if busy else "")
            + f"; left out {sum(left.values())}"
            + (f" ({', '.join(f'{n} {w}' for w, n in left.items())})" if left else "")
        )
        print("| family | checks | sd of log B/A per round (median) | sd of log A per round |")
        print("|---|---|---|---|")
        for fam in sorted(pair_sd):
            print(
                f"| {fam} | {len(pair_sd[fam])} | {statistics.median(pair_sd[fam]):.3f} "
                f"| {statistics.median(run_sd.get(fam, [float('nan')])):.3f} |"
            )
        all_run = [x for v in run_sd.values() for x in v]
        sigma = statistics.median(all_run) if all_run else float("nan")
        aa = replay_power(checks, 0.0, args.replays, 1)
        power = {s: replay_power(checks, s, args.replays, 2) for s in slowdowns}
        bound = {s: baseline_bound(sigma, s, args.baseline_runs) for s in slowdowns}
        rows.append((name, len(data["order"]), data["seconds"], verdicts, aa, power, sigma, bound))
        per_round = data["seconds"] / max(1, len(data["order"]))
        for n in [int(x) for x in args.rounds.split(",") if x]:
            more = {s: replay_power(checks, s, args.replays, 3, n) for s in slowdowns}
            print(
                f"{n} rounds (about {n * per_round / 60:.0f} min at this round's pace): "
                f"A/A {replay_power(checks, 0.0, args.replays, 4, n):.1%}, "
                + ", ".join(f"{s:.0%} slower {p:.1%}" for s, p in more.items())
            )
        print()
    print(
        "| condition | rounds | wall s | A/A verdicts (real run) "
        "| A/A regressed or improved, replayed | "
        + " | ".join(f"ab power {s:.0%}, replayed" for s in slowdowns)
        + " | run-to-run sd (median) | "
        + " | ".join(f"stored-baseline bound {s:.0%}" for s in slowdowns)
        + " |"
    )
    print("|---" * (6 + 2 * len(slowdowns)) + "|")
    for name, n, secs, verdicts, aa, power, sigma, bound in rows:
        real = ", ".join(f"{v} {k}" for v, k in verdicts.most_common())
        print(
            f"| {name} | {n} | {secs:.0f} | {real} | {aa:.1%} | "
            + " | ".join(f"{power[s]:.1%}" for s in slowdowns)
            + f" | {sigma:.3f} | "
            + " | ".join(f"{bound[s]:.1%}" for s in slowdowns)
            + " |"
        )


if __name__ == "__main__":
    main()
