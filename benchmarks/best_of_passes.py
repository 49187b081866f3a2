"""Several passes of every check, minutes apart, keeping the fastest: what would it change.

    python benchmarks/best_of_passes.py WORK [--passes 2] [--slowdown 0.2] [--tolerance 0.05]

``WORK`` is the ``--work DIR/MODE`` folder of ``benchmarks/verdicts.py`` after a run.  Its
baseline and A/A runs are fresh processes of the same code, a few minutes apart.  This
script groups them in time order into sessions of ``--passes`` consecutive runs, and judges
each session against the others (leave one out) in two ways, from the same records:

* **one pass**: the session's first run, against the other sessions' first runs;
* **best of N**: for every check, the run of the session whose median is fastest, against
  the other sessions' fastest runs.

Power is the same with ``--slowdown`` applied to the judged session's samples (a rate times
1 - s, a latency over it, as ``benchmarks/slowdown.py`` does).  With ``--rule raw`` (the
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
import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from perfsuite import stats
from perfsuite.compare import compare_runs, fastest_passes
from perfsuite.model import RunRecord

Run = dict[str, dict[str, Any]]  # check id -> result
RECORDS: list[dict[str, Any]] = []  # the runs' whole records, oldest first


def runs_in_time_order(work: Path) -> list[Run]:
    """The baseline and A/A runs' results, oldest first."""
    records = []
    for folder in sorted((work / "reports").iterdir()):
        if folder.name.split("-")[0] not in ("baseline", "aa"):
            continue
        paths = [p for p in folder.glob("*/*.json")]
        if len(paths) != 1:
            continue  # a run stopped before it wrote its record
        try:
            record = json.loads(paths[0].read_text())
        except (OSError, ValueError) as exc:
            raise SystemExit(f"{paths[0]}: not a readable run record ({exc})") from exc
        records.append(record)
    records.sort(key=lambda r: r["created"])
    RECORDS[:] = records
    return [{r["id"]: r for r in rec["results"] if r.get("samples")} for rec in records]


def level(result: dict[str, Any]) -> float:
    """A run's median, oriented so that higher is faster."""
    median = float(statistics.median(result["samples"]))
    return median if result["higher_is_better"] else -median


def kept(session: tuple[Run, ...], check: str, best: bool) -> dict[str, Any]:
    """The session's result for a check: its first pass, or its fastest."""
    return max((run[check] for run in session), key=level) if best else session[0][check]


def slowed(result: dict[str, Any], slowdown: float) -> list[float]:
    """The samples with the check's work made ``slowdown`` slower."""
    factor = 1 - slowdown if result["higher_is_better"] else 1 / (1 - slowdown)
    return [s * factor for s in result["samples"]]


def judge(
    groups: list[tuple[Run, ...]],
    i: int,
    checks: list[str],
    best: bool,
    slowdown: float,
    tol: float,
) -> Counter[str]:
    """Verdicts of session ``i`` against all the others, the family corrected at once."""
    others = [s for j, s in enumerate(groups) if j != i]
    baseline = {c: [kept(s, c, best)["samples"] for s in others] for c in checks}
    hib = {c: bool(groups[i][0][c]["higher_is_better"]) for c in checks}
    prior = stats.fit_prior(
        [stats.run_variance(baseline[c], hib[c]) for c in checks], [len(others) - 1] * len(checks)
    )
    comparisons = []
    for c in checks:
        result = kept(groups[i], c, best)
        current = slowed(result, slowdown) if slowdown else result["samples"]
        comparisons.append(
            stats.compare(current, baseline[c], higher_is_better=hib[c], prior=prior)
        )
    significant = stats.correct([c.p_value for c in comparisons], stats.ALPHA)
    return Counter(
        stats.decide(c, tolerance=tol, significant=s)[0]
        for c, s in zip(comparisons, significant, strict=True)
    )


def slowed_record(record: RunRecord, slowdown: float) -> RunRecord:
    """A record whose every check's work was ``slowdown`` slower."""
    results = []
    for r in record.results:
        factor = 1 - slowdown if r.higher_is_better else 1 / (1 - slowdown)
        results.append(dataclasses.replace(r, samples=tuple(s * factor for s in r.samples)))
    return dataclasses.replace(record, results=tuple(results))


def judge_compare(
    records: list[RunRecord], passes: int, i: int, slowdown: float, best: bool, tol: float
) -> Counter[str]:
    """Session ``i`` against the others, as ``perfsuite compare`` judges them."""
    count = len(records) // passes
    groups = [records[k * passes : (k + 1) * passes] for k in range(count)]
    if not best:
        groups = [g[:1] for g in groups]
    kept = [fastest_passes(g) for g in groups]
    after = slowed_record(kept[i], slowdown) if slowdown else kept[i]
    rows, _, _ = compare_runs([s for j, s in enumerate(kept) if j != i], after, tolerance=tol)
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
    records = [RunRecord.from_dict(r) for r in RECORDS]
    count = len(runs) // args.passes
    if count < 3:
        raise SystemExit(f"{len(runs)} runs make {count} sessions of {args.passes}; need 3")
    groups = [tuple(runs[k * args.passes : (k + 1) * args.passes]) for k in range(count)]
    checks = sorted(set.intersection(*(set(run) for run in runs[: count * args.passes])))
    print(
        f"{len(runs)} runs, {count} sessions of {args.passes} passes, {len(checks)} checks; "
        f"each session against the other {count - 1}"
    )
    print("| way | A/A regressed | A/A noisy | power (regressed) | power noisy |")
    print("|---|---|---|---|---|")
    for best in (False, True):
        aa: Counter[str] = Counter()
        power: Counter[str] = Counter()
        for i in range(count):
            if args.rule == "compare":
                aa.update(judge_compare(records, args.passes, i, 0.0, best, args.tolerance))
                power.update(
                    judge_compare(records, args.passes, i, args.slowdown, best, args.tolerance)
                )
                continue
            aa.update(judge(groups, i, checks, best, 0.0, args.tolerance))
            power.update(judge(groups, i, checks, best, args.slowdown, args.tolerance))
        n = sum(aa.values())
        way = f"best of {args.passes}" if best else "one pass"
        print(
            f"| {way} | {aa['regressed'] / n:.1%} ({aa['regressed']}/{n}) | "
            f"{aa['noisy'] / n:.1%} | {power['regressed'] / n:.1%} ({power['regressed']}/{n}) | "
            f"{power['noisy'] / n:.1%} |"
        )


if __name__ == "__main__":
    main()
