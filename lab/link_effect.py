"""Which checks follow the CPUs' link state?  Run medians split by the probe's link reading.

Usage: python lab/link_effect.py RUN.json [RUN.json ...] [--min-effect 0.10]

Reads run records of the same code (a verdict benchmark's baseline and A/A runs).  Every CPU
check's reading of the machine probe carries the link rate measured right before and after
it (``machine``; see ``perfsuite/measure/probe.py``).  The readings are grouped into states
the way the judge groups them (``speed.link_groups``); readings whose link changed during
the check are left out.  For each check measured in at least two states, it prints the
median of its run medians in each state and their ratio (oriented so that above 1 means
faster in the fastest-link state), and lists the checks whose ratio is beyond
``--min-effect``: candidates for like-with-like comparison besides the collectives.  A
benchmark of the machine, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perfsuite.errors import StorageError
from perfsuite.judge import speed
from perfsuite.measure import probe, readings
from perfsuite.store.records import load_record


def main() -> None:
    """Print each check's run medians per link state."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("records", nargs="+", type=Path)
    parser.add_argument("--min-effect", type=float, default=0.10)
    args = parser.parse_args()
    rows: list[tuple[str, float, float, bool]] = []  # check, link, median, higher is better
    for path in args.records:
        try:
            record = load_record(path)
        except StorageError as exc:
            parser.error(f"not a readable run record: {exc}")
        for r in record.results:
            kept = readings.stored(r.machine, link=True)
            if kept is None or kept.rates.link is None:
                continue  # no link reading, or it changed state during this check
            link = kept.rates.link
            rows.append((r.id, link, statistics.median(r.samples), r.higher_is_better))
    if not rows:
        sys.exit("no result carries a steady link reading (records from before the link probe?)")
    groups = speed.link_groups([{probe.LINK: link} for _, link, _, _ in rows]) or []
    state = {i: g for g, members in enumerate(groups) for i in members}
    print(
        f"{len(rows)} readings; link states (M handoffs/s): "
        + ", ".join(
            f"{min(rows[i][1] for i in m):.3g}-{max(rows[i][1] for i in m):.3g} ({len(m)})"
            for m in groups
        )
    )
    per_check: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    higher: dict[str, bool] = {}
    for i, (check, _, median, hib) in enumerate(rows):
        per_check[check][state[i]].append(median)
        higher[check] = hib
    fastest = len(groups) - 1
    effects: list[tuple[float, str, dict[int, list[float]]]] = []
    for check, by_state in per_check.items():
        if len(by_state) < 2 or fastest not in by_state:
            continue
        slowest = min(by_state)
        ratio = statistics.median(by_state[fastest]) / statistics.median(by_state[slowest])
        effects.append((ratio if higher[check] else 1 / ratio, check, by_state))
    effects.sort(key=lambda e: -abs(e[0] - 1))
    print(f"{len(effects)} checks measured in more than one state\n")
    print("| check | fast-link / slow-link (above 1: faster) | runs per state |")
    print("|---|---|---|")
    shown = [e for e in effects if abs(e[0] - 1) > args.min_effect]
    for ratio, check, by_state in shown:
        counts = "/".join(str(len(by_state.get(g, []))) for g in range(len(groups)))
        print(f"| {check.split('::')[-1]} | {ratio:.2f} | {counts} |")
    print(f"\n{len(shown)} of {len(effects)} beyond ±{args.min_effect:.0%}")


if __name__ == "__main__":
    main()
