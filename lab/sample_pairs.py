"""What pairing samples, not rounds, would do to an A/B's spread and verdicts.

    python lab/sample_pairs.py AB.json [AB.json ...]

In ``--interleave samples`` the two sides take turns sample by sample, so A's i-th sample of
a check and B's i-th sample are a turn apart.  Today a round's evidence is the log ratio of
the two sides' medians; a load that starts or stops within the check (a bursty neighbour)
then lands on some samples of one side and not on the other's.  This replays recorded A/Bs
(``ab.json``) with the round's value taken three ways, and judges each run's family once, at
its last round, with the same rule the A/B uses (:func:`perfsuite.ab.paired.judge_family`):

* **medians**: ``ln(median B / median A)``, as rounds were judged before ``422f6fd``;
* **pairs, median**: the median over i of ``ln(B_i / A_i)``;
* **pairs, mean**: their mean.

It prints, per run, the median over checks of the round-to-round spread (sd of the round
values) and the verdict counts; ``--slowdown F`` scales B's samples by ``1 - F`` (a
throughput check; a latency by ``1 / (1 - F)``) to replay power on an A/A.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perfsuite.ab import paired
from perfsuite.ab.rounds import Reading, unshared

WAYS = ("medians", "pairs, median", "pairs, mean")


def reading(d: dict[str, Any]) -> Reading:
    """A reading as ``ab.json`` keeps it."""
    return Reading(
        d["unit"],
        d["higher_is_better"],
        d["tolerance"],
        tuple(d["samples"]),
        d["floor"],
        tuple(d.get("flags", ())),
        d.get("load"),
        tuple(d.get("states", ())),
    )


def value(way: str, a: Reading, b: Reading) -> float:
    """One round's log ratio B/A, taken ``way``."""
    if way == "medians":
        return math.log(b.median / a.median)
    logs = [math.log(y / x) for x, y in zip(a.samples, b.samples, strict=False) if x > 0 < y]
    return statistics.median(logs) if way == "pairs, median" else statistics.fmean(logs)


def slowed(r: Reading, slowdown: float) -> Reading:
    """B's reading as a slowdown of ``slowdown`` would have left it."""
    f = (1 - slowdown) if r.higher_is_better else 1 / (1 - slowdown)
    return Reading(**{**r.__dict__, "samples": tuple(s * f for s in r.samples)})


def replay(path: Path, slowdown: float) -> dict[str, tuple[float, Counter[str]]]:
    """Per way: the median round-to-round spread over checks, and the verdict counts."""
    ab = json.loads(path.read_text())
    rounds: dict[int, dict[str, dict[str, Reading]]] = {}
    for run in ab["rounds"]:
        if run["failed"]:
            continue
        sides = rounds.setdefault(run["round"], {})
        for check, d in run["readings"].items():
            sides.setdefault(check, {})[run["side"]] = reading(d)
    out = {}
    for way in WAYS:
        series: dict[str, list[float]] = {}
        meta: dict[str, Reading] = {}
        for rnd in sorted(rounds):
            for check, both in rounds[rnd].items():
                if set(both) != {"A", "B"}:
                    continue
                a, b = both["A"], both["B"]
                if slowdown:
                    b = slowed(b, slowdown)
                if unshared(a, b) or a.median <= 0 or b.median <= 0:
                    continue
                meta[check] = a
                series.setdefault(check, []).append(value(way, a, b))
        ready = [c for c in sorted(series) if len(series[c]) >= 2]
        judged = paired.judge_family(
            [
                (paired.summarize(series[c]), meta[c].higher_is_better, meta[c].tolerance)
                for c in ready
            ],
            ab["alpha"],
            ab["correction"],
        )
        spread = statistics.median(statistics.stdev(series[c]) for c in ready)
        out[way] = (spread, Counter(j.verdict for j in judged))
    return out


def main() -> None:
    """Print one block per run."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--slowdown", type=float, default=0.0)
    args = parser.parse_args()
    print("| run | way | median sd of round values | regressed | improved | same | unknown |")
    print("|---|---|---|---|---|---|---|")
    for path in args.runs:
        for way, (spread, counts) in replay(path, args.slowdown).items():
            cells = " | ".join(str(counts[v]) for v in ("regressed", "improved", "same", "unknown"))
            print(f"| {path.parents[2].name} | {way} | {spread:.4f} | {cells} |")


if __name__ == "__main__":
    main()
