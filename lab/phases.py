"""Where a run's time went, per phase and per check kind, from its run record.

    python lab/phases.py RECORD.json [RECORD.json ...]

Each result carries ``phases`` (seconds): building the workload, the machine probe before
and after, the noise guard's readings, the warm-up, the timed samples, the waits between
samples while ``perfsuite ab``'s other side had the machine, and what the
measuring loop spent besides (the bare reference's samples, calibration, rank launches,
the loop's own overhead), then judging.  The session's ``duration_s`` less their sum is
what happened outside the checks' measure calls: imports, collection, fixtures (datasets),
checks that skipped, and the end of the session up to the record.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from perfsuite.store.records import load_record

PHASES = (
    "build", "probe", "noise", "warmup", "samples", "waiting", "reference_and_overhead", "judge"
)  # fmt: skip


def main() -> None:
    """Print one table per record, then the phases summed over all of them."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", nargs="+", type=Path)
    args = parser.parse_args()
    for path in args.records:
        record = load_record(path)
        by_kind: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(PHASES, 0.0))
        counts: dict[str, int] = defaultdict(int)
        for r in record.results:
            counts[r.check] += 1
            for phase in PHASES:
                by_kind[r.check][phase] += float(r.phases.get(phase, 0.0))
        total = {p: sum(k[p] for k in by_kind.values()) for p in PHASES}
        inside = sum(total.values())
        duration = record.duration_s or 0.0
        print(f"{path.name}: {len(record.results)} checks, {duration:.1f} s in all")
        header = ["check kind", "n", *PHASES, "sum"]
        rows = [header]
        for kind in sorted(by_kind, key=lambda k: -sum(by_kind[k].values())):
            values = by_kind[kind]
            rows.append(
                [kind, str(counts[kind]), *(f"{values[p]:.1f}" for p in PHASES),
                 f"{sum(values.values()):.1f}"]
            )  # fmt: skip
        rows.append(
            ["all", str(len(record.results)), *(f"{total[p]:.1f}" for p in PHASES),
             f"{inside:.1f}"]
        )  # fmt: skip
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        for row in rows:
            print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in
                            enumerate(zip(row, widths, strict=True))))  # fmt: skip
        print(f"outside the checks' measuring (imports, collection, fixtures, skips): "
              f"{max(0.0, duration - inside):.1f} s\n")  # fmt: skip


if __name__ == "__main__":
    main()
