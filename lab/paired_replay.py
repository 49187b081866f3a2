"""What judging each check against its paired bare reference would do to the verdicts.

    python lab/paired_replay.py RUN.json [RUN.json ...] [--slowdown 0.2]

Reads run records of the same code on the same machine (fresh processes, nothing changed),
keeps the checks whose bare reference was sampled in pairs with them (``pair_ratios``), and
judges every run against all the others (leave one out), with the plugin's two-level test,
the run-to-run prior fitted across checks, and the family corrected at once, in two ways:

* **raw**: the check's own samples, as the verdict judges them today;
* **paired**: each sample divided by the reference sample taken right before it, so a
  machine that moved between runs moves both and cancels.

Power is the same with ``--slowdown`` applied to the judged run's check samples only (the
reference did not change).  The paired way is an upper bound for a framework-independent
yardstick sampled the same way: the bare reference runs the very same operation, so it
tracks the machine as closely as any kernel can, and it would also move with a framework
change, which is why it cannot be the verdict itself.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lab.best_of_passes import table_row, two_level
from perfsuite.errors import StorageError
from perfsuite.model import Result
from perfsuite.store.records import load_record


def paired_samples(result: Result) -> tuple[float, ...] | None:
    """The check's samples over its paired reference samples, or None where not paired."""
    bare = result.bare_reference
    if bare is None or not bare.pair_ratios:
        return None
    return bare.pair_ratios


def verdicts(
    runs: list[dict[str, tuple[tuple[float, ...], bool]]], i: int, slowdown: float, tol: float
) -> Counter[str]:
    """Run ``i`` (slowed by ``slowdown``) against the others, by the two-level test."""
    before = [run for j, run in enumerate(runs) if j != i]
    family = []
    for check, (samples, higher) in runs[i].items():
        factor = (1 - slowdown) if higher else 1 / (1 - slowdown)
        family.append(([s * factor for s in samples], [run[check][0] for run in before], higher))
    return two_level(family, tol)


def main() -> None:
    """Print A/A and power under both ways."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="+", type=Path)
    parser.add_argument("--slowdown", type=float, default=0.2)
    parser.add_argument("--tolerance", type=float, default=0.05)
    args = parser.parse_args()
    if len(args.records) < 3 or not 0 < args.slowdown < 1 or args.tolerance <= 0:
        parser.error("give 3 or more records, --slowdown in (0, 1), a positive --tolerance")
    try:
        records = [load_record(p) for p in args.records]
    except StorageError as exc:
        raise SystemExit(f"not a readable run record: {exc}") from None
    paired = [{r.id: paired_samples(r) for r in rec.results} for rec in records]
    checks = set.intersection(*({k for k, v in run.items() if v} for run in paired))
    if not checks:
        raise SystemExit("no check has paired reference samples in every record")
    raw_runs = [
        {r.id: (tuple(r.samples), r.higher_is_better) for r in rec.results if r.id in checks}
        for rec in records
    ]
    # A ratio is oriented as a rate: below 1, the check is slower than its reference.
    paired_runs = [{k: (run[k] or (), True) for k in checks} for run in paired]
    print(f"{len(records)} runs, {len(checks)} checks with paired references, leave one out")
    print("| way | A/A regressed | A/A noisy | power (regressed) | power noisy |")
    print("|---|---|---|---|---|")
    for way, runs in (("raw", raw_runs), ("paired", paired_runs)):
        aa: Counter[str] = Counter()
        power: Counter[str] = Counter()
        for i in range(len(runs)):
            aa.update(verdicts(runs, i, 0.0, args.tolerance))
            power.update(verdicts(runs, i, args.slowdown, args.tolerance))
        print(table_row(way, aa, power))


if __name__ == "__main__":
    main()
