"""Do two versions of quick mode judge as well as each other?  Interleaved, in the same hour.

Quick mode went from many cases per family to one.  Every check it keeps is measured as
before, so what could change its verdicts is the family (fewer checks to fit the prior and to
correct over) and the neighbours each check runs beside.  Runs taken an hour apart differ
by more than either (the host's own state moves), so this benchmark alternates the two
checkouts run by run, each with its own baseline:

1. ``--baseline-runs`` runs of each, alternating which goes first;
2. then, alternating, ``--reruns`` A/A runs and ``--power-runs`` runs with a 20% slowdown
   injected (``perfsuite.slowdown``) of each.

Power and A/A are counted as ``lab/verdicts.py`` counts them, for each checkout over all its
checks, and for the old one also over only the checks the new one keeps.

``--judge-only`` runs nothing: it judges the records of an earlier run again with
``perfsuite compare``'s test (``compare_runs``), crossed: each side's A/A and power runs
against each side's 5 baseline runs, over the checks both sides have (the new one's
family) and, for the old side against its own baseline, over all its checks.  Which
baseline a run meets and which runs are judged can then be told apart from the family.

    python -m lab.quick_family_power --old ../wt-old --new . [--baseline-runs 5]
        [--reruns 3] [--power-runs 4] [--select EXPR] [--work DIR]
        [--old-args "PYTEST ARGS"] [--new-args "PYTEST ARGS"]
    python -m lab.quick_family_power --old ../wt-old --judge-only [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from lab.verdicts import alternate, baseline_runs, judged, pytest_run, share, tally
from perfsuite.judge.compare import compare_runs
from perfsuite.model import RunRecord
from perfsuite.store.records import load_record

ROOT = Path(__file__).resolve().parent.parent
SLOW = {"PERFSUITE_INJECT_SLOWDOWN": "0.2"}


def main() -> None:
    """Run both checkouts interleaved and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", type=Path, required=True, help="checkout of the old quick mode")
    parser.add_argument("--new", type=Path, default=ROOT, help="checkout of the new one")
    parser.add_argument("--baseline-runs", type=int, default=5)
    parser.add_argument("--reruns", type=int, default=3)
    parser.add_argument("--power-runs", type=int, default=4)
    parser.add_argument("--old-args", default="", help="more pytest arguments for the old side")
    parser.add_argument("--new-args", default="", help="more pytest arguments for the new side")
    parser.add_argument("--select", default="", help="pytest -k expression (a smoke test)")
    parser.add_argument("--work", type=Path, default=ROOT / "reports" / "quick-family-power")
    parser.add_argument("--judge-only", action="store_true", help="judge earlier records again")
    args = parser.parse_args()
    if args.judge_only:
        if not all((args.work / s / "baselines").is_dir() for s in ("old", "new")):
            parser.error(f"--judge-only: no earlier run's records under {args.work}")
        cross_judge(args.work)
        return
    if min(args.baseline_runs, args.reruns, args.power_runs) < 1:
        parser.error("--baseline-runs, --reruns and --power-runs must be at least 1")
    sides = {"old": args.old.resolve(), "new": args.new.resolve()}
    for label, root in sides.items():
        if not (root / "suites").is_dir():
            parser.error(f"--{label} {root}: not a perfsuite checkout (no suites/)")
        shutil.rmtree(args.work / label, ignore_errors=True)
    select = ["-k", args.select] if args.select else []
    more = {"old": shlex.split(args.old_args), "new": shlex.split(args.new_args)}
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {s: {"aa": [], "power": []} for s in sides}
    walls: dict[str, list[float]] = {s: [] for s in sides}
    started = time.strftime("%H:%M", time.gmtime())

    def run(label: str, name: str, extra: list[str], env: dict[str, str] | None = None) -> Any:
        suite = ["suites/", "--perf-quick", *select, *more[label], *extra]
        root = sides[label]
        record, wall, status = pytest_run(args.work / label, name, suite, env=env, root=root)
        walls[label].append(wall)
        verdicts = Counter(r["baseline"]["verdict"] for r in record["results"])
        print(f"  {label} {name}: {wall:.0f} s, exit {status}: {dict(verdicts)}", flush=True)
        return record

    order = list(sides)
    for i in range(args.baseline_runs):
        for label in order if i % 2 == 0 else order[::-1]:
            run(label, f"baseline-{i}", ["--perf-save-baseline", "--perf-force-baseline"])
    # A/A and power runs alternate, so neither kind is all early or all late.
    seen: Counter[str] = Counter()
    for n, kind in enumerate(alternate(args.reruns, args.power_runs)):
        for label in order if n % 2 == 0 else order[::-1]:
            record = run(label, f"{kind}-{seen[kind]}", [], SLOW if kind == "power" else None)
            runs[label][kind].append(record)
        seen[kind] += 1
    ended = time.strftime("%H:%M", time.gmtime())

    kept = {r["id"] for rec in runs["new"]["aa"] for r in judged(rec)}
    rows = []
    for label in sides:
        base = baseline_runs(args.work / label)
        family = runs[label]["aa"][0]["settings"].get("family", {}).get("size")
        rows.append((f"{label}, all checks (family {family})", runs[label], base))
        if label == "old":
            cut = {k: v for k, v in base.items() if k in kept}
            rows.append((f"old, the checks new keeps (family {family})", runs[label], cut))
    print(f"\n### Quick mode, old and new interleaved ({started}-{ended} UTC)\n")
    print("| checkout | A/A regressed | A/A improved | A/A noisy | cannot detect | power at 20% |")
    print("|---|---|---|---|---|---|")
    for name, kinds_runs, base in rows:
        aa, power = tally(kinds_runs["aa"], base), tally(kinds_runs["power"], base, True)
        c, p = aa["counts"]["perfsuite"], power["counts"]["perfsuite"]
        print(
            f"| {name} | {share(c, 'regressed', aa['total'])} ({c['regressed']} of {aa['total']})"
            f" | {c['improved']} | {share(c, 'noisy', aa['total'])} | {aa['blind']} of "
            f"{aa['total']} | {share(p, 'regressed', power['total'])} ({p['regressed']} of "
            f"{power['total']}) |"
        )
    medians = {k: sorted(v)[len(v) // 2] for k, v in walls.items()}
    per_run = ", ".join(f"{k} {v:.0f} s" for k, v in medians.items())
    print(f"\nwall time per run (median): {per_run}")
    (args.work / "summary.json").write_text(json.dumps({"walls": walls, "kept": sorted(kept)}))


def _records(work: Path, label: str, kind: str) -> list[RunRecord]:
    return [load_record(p) for p in sorted((work / label / "reports").glob(f"{kind}-*/*/*.json"))]


def _cut(record: RunRecord, keep: set[str]) -> RunRecord:
    return replace(record, results=tuple(r for r in record.results if r.id in keep))


def cross_judge(work: Path) -> None:
    """Each side's A/A and power runs against each side's baseline runs, compare's test."""
    sides = ("old", "new")
    base = {s: _records(work, s, "baseline") for s in sides}
    judged_runs = {(s, kind): _records(work, s, kind) for s in sides for kind in ("aa", "power")}
    kept = {r.id for r in base["new"][0].results}
    print(
        "| runs judged | against the baseline of | family | A/A regressed | A/A improved "
        "| A/A noisy | power at 20% |"
    )
    print("|---|---|---|---|---|---|---|")
    for runs in sides:
        for against in sides:
            families = [kept] if runs == "new" or against == "new" else [None, kept]
            for keep in families:
                before = [_cut(a, keep) if keep else a for a in base[against]]
                counts = {}
                for kind in ("aa", "power"):
                    c: Counter[str] = Counter()
                    for b in judged_runs[(runs, kind)]:
                        rows, _, _ = compare_runs(before, _cut(b, keep) if keep else b, window_s=0)
                        c.update(r.verdict for r in rows if kind == "aa" or r.unit != "ratio")
                    counts[kind] = c
                aa, pw = counts["aa"], counts["power"]
                n_aa, n_pw = sum(aa.values()), sum(pw.values())
                family = len(keep) if keep else len(base[against][0].results)
                print(
                    f"| {runs} | {against} | {family} | {share(aa, 'regressed', n_aa)} "
                    f"| {aa['improved']} | {share(aa, 'noisy', n_aa)} "
                    f"| {share(pw, 'regressed', n_pw)} ({pw['regressed']} of {n_pw}) |"
                )


if __name__ == "__main__":
    main()
