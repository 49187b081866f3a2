"""Several passes of every check, minutes apart, keeping the fastest: what would it change.

    python lab/best_of_passes.py WORK [--passes 2] [--slowdown 0.2] [--tolerance 0.05]

``WORK`` is the ``--work DIR/MODE`` folder of ``lab/verdicts.py`` after a run.  Its
baseline and A/A runs are fresh processes of the same code, a few minutes apart.  This
script groups them in time order into sessions of ``--passes`` consecutive runs, and judges
each session against the others (leave one out) in two ways, from the same records:

* **one pass**: the session's first run, against the other sessions' first runs;
* **best of N**: for every check, the run of the session whose median is fastest, against
  the other sessions' fastest runs.

Power is the same with ``--slowdown`` applied to the judged session's samples (a rate times
1 - s, a latency over it, as ``perfsuite/slowdown.py`` does).  With ``--rule raw`` (the
default) every session is judged with the plugin's two-level test, the run-to-run prior
fitted across checks, and the family corrected at once (Benjamini-Hochberg), without the
machine probe or the load guard, so the two ways differ only in what a session keeps.  With
``--rule compare`` it is judged as ``perfsuite compare --passes N`` judges it: the probe's
adjustment and guard, the link state, the load flags, all of it.

On a machine whose slow spells last longer than a check, the slow runs form a long tail that
one pass cannot step over; the fastest of passes minutes apart can, unless a spell catches
every pass.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from perfsuite.errors import PerfsuiteError
from perfsuite.judge.compare import compare_runs, fastest_passes
from perfsuite.judge.family import SampleCheck, judge_samples
from perfsuite.model import RunRecord
from perfsuite.store.records import load_record


def runs_in_time_order(work: Path) -> list[RunRecord]:
    """The baseline and A/A runs' records, oldest first."""
    records = []
    for folder in sorted((work / "reports").iterdir()):
        if folder.name.split("-")[0] not in ("baseline", "aa"):
            continue
        paths = list(folder.glob("*/*.json"))
        if len(paths) != 1:
            continue  # a run stopped before it wrote its record
        try:
            records.append(load_record(paths[0]))
        except PerfsuiteError as exc:
            raise SystemExit(str(exc)) from exc
    return sorted(records, key=lambda r: r.created)


def slowed_record(record: RunRecord, slowdown: float) -> RunRecord:
    """A record whose every check's work was ``slowdown`` slower."""
    results = []
    for r in record.results:
        factor = 1 - slowdown if r.higher_is_better else 1 / (1 - slowdown)
        results.append(dataclasses.replace(r, samples=tuple(s * factor for s in r.samples)))
    return dataclasses.replace(record, results=tuple(results))


def judge_raw(before: list[RunRecord], after: RunRecord, tol: float) -> Counter[str]:
    """The two-level test alone over the checks every session kept, the family at once."""
    runs = [{r.id: r for r in record.results} for record in before]
    current = [r for r in after.results if all(r.id in run for run in runs)]
    return two_level(
        [(r.samples, [run[r.id].samples for run in runs], r.higher_is_better) for r in current],
        tol,
    )


def two_level(
    family: Sequence[tuple[Sequence[float], Sequence[Sequence[float]], bool]], tol: float
) -> Counter[str]:
    """Each check's verdict: (samples now, baseline runs' samples, higher is better) each.

    The plugin's two-level test, the run-to-run prior fitted across the family, and the
    family corrected at once (no probe, no guard).
    """
    judged = judge_samples([SampleCheck(now, runs, higher, tol) for now, runs, higher in family])
    return Counter(decision.verdict for _, decision, _ in judged)


def judge(kept: list[RunRecord], i: int, slowdown: float, tol: float, rule: str) -> Counter[str]:
    """Session ``i`` against all the others, by the raw test or as ``perfsuite compare``."""
    before = [s for j, s in enumerate(kept) if j != i]
    after = slowed_record(kept[i], slowdown) if slowdown else kept[i]
    if rule == "raw":
        return judge_raw(before, after, tol)
    rows, _, _ = compare_runs(before, after, tolerance=tol, window_s=0)
    return Counter(row.verdict for row in rows)


def main() -> None:
    """Print the A/A and power counts of both ways."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", type=Path)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--slowdown", type=float, default=0.2)
    parser.add_argument("--tolerance", type=float, default=0.05)
    parser.add_argument("--rule", choices=["raw", "compare"], default="raw")
    args = parser.parse_args()
    if args.passes < 2 or not 0 < args.slowdown < 1 or args.tolerance <= 0:
        parser.error("--passes must be 2 or more, --slowdown in (0, 1), --tolerance positive")
    if not (args.work / "reports").is_dir():
        raise SystemExit(f"{args.work}: no reports/ (give the --work DIR/MODE folder)")
    runs = runs_in_time_order(args.work)
    count = len(runs) // args.passes
    if count < 3:
        raise SystemExit(f"{len(runs)} runs make {count} sessions of {args.passes}; need 3")
    groups = [runs[k * args.passes : (k + 1) * args.passes] for k in range(count)]
    checks = set.intersection(*({r.id for r in run.results} for run in runs[: count * args.passes]))
    print(
        f"{len(runs)} runs, {count} sessions of {args.passes} passes, {len(checks)} checks; "
        f"each session against the other {count - 1}"
    )
    print("| way | A/A regressed | A/A noisy | power (regressed) | power noisy |")
    print("|---|---|---|---|---|")
    for best in (False, True):
        kept = [fastest_passes(g if best else g[:1]) for g in groups]
        aa: Counter[str] = Counter()
        power: Counter[str] = Counter()
        for i in range(count):
            aa.update(judge(kept, i, 0.0, args.tolerance, args.rule))
            power.update(judge(kept, i, args.slowdown, args.tolerance, args.rule))
        print(table_row(f"best of {args.passes}" if best else "one pass", aa, power))


def table_row(way: str, aa: Counter[str], power: Counter[str]) -> str:
    """One Markdown row: A/A regressed and noisy, power and power noisy, as shares."""
    n = sum(aa.values())
    return (
        f"| {way} | {aa['regressed'] / n:.1%} ({aa['regressed']}/{n}) | "
        f"{aa['noisy'] / n:.1%} | {power['regressed'] / n:.1%} ({power['regressed']}/{n}) | "
        f"{power['noisy'] / n:.1%} |"
    )


if __name__ == "__main__":
    main()
