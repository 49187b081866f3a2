"""A/A false alarms against young baselines: 1, 2 and 5 runs, 10 reruns each.

    python lab/young_baselines.py run DIR [--runs 15] [-- PYTEST ARGS]
    python lab/young_baselines.py judge DIR [--k 1 2 5] [--reruns 10] [--slowdown 0.2]

``run`` makes ``--runs`` fresh, unchanged runs of the CPU bandwidth and GEMM checks (quick
mode unless the pytest arguments say otherwise), one after the other, keeping their
records under ``DIR/reports``.  ``judge`` then takes the first K records as the baseline and
compares each of the next ``--reruns`` records with it, as ``perfsuite compare`` does, and
counts the verdicts: every "regressed" or "improved" is a false alarm, since nothing
changed.  Judging reads only the records, so the same runs can be judged by two versions
of perfsuite (put the other one first on PYTHONPATH) and the difference is the rule's alone.
With ``--slowdown 0.2`` every rerun's work is made 20% slower (a rate times 0.8, a latency
over it, as perfsuite/slowdown.py stretches durations): "regressed" then counts the power.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

from perfsuite.judge.compare import compare_runs
from perfsuite.model import RunRecord
from perfsuite.store.records import load_record

SELECTION = [
    "suites/test_memory_bandwidth.py",
    "suites/test_gemm.py",
    "--hw=auto",
    "--perf-quick",
    "-p",
    "no:cacheprovider",
    "-q",
]


def run(directory: Path, runs: int, extra: list[str]) -> None:
    """Fresh pytest processes, one after the other, each writing its record."""
    root = Path(__file__).resolve().parents[1]
    for i in range(runs):
        started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", *SELECTION, *extra,
             "--perf-report-dir", str(directory / "reports"),
             "--perf-baseline-dir", str(directory / "unused-baselines"),
             "--perf-save-baseline"],
            cwd=root, capture_output=True, text=True, check=False,
        )  # fmt: skip
        last = proc.stdout.strip().splitlines()[-1:] or ["(no output)"]
        print(f"run {i + 1}/{runs}: exit {proc.returncode}, {time.monotonic() - started:.0f} s, "
              f"{last[0]}", flush=True)  # fmt: skip


def slowed(record: RunRecord, fraction: float) -> RunRecord:
    """The record with every check's work ``fraction`` slower."""
    results = []
    for r in record.results:
        factor = 1 - fraction if r.higher_is_better else 1 / (1 - fraction)
        results.append(replace(r, samples=tuple(v * factor for v in r.samples)))
    return replace(record, results=tuple(results))


def judge(directory: Path, ks: list[int], reruns: int, slowdown: float = 0.0) -> None:
    """Each K-run baseline against the next ``reruns`` runs; the verdicts counted."""
    paths = sorted(directory.glob("reports/*/*.json"))
    records = [load_record(p) for p in paths]
    import perfsuite

    print(f"{len(records)} records in {directory}, judged by {Path(perfsuite.__file__).parent}")
    last = f"regressed (power at {slowdown:.0%})" if slowdown else "false alarms"
    print(f"K  reruns  compared  regressed  improved  noisy  ok  {last}")
    for k in ks:
        if len(records) < k + 1:
            print(f"{k}  not enough records")
            continue
        base = records[:k]
        later = records[k : k + reruns]
        counts: Counter[str] = Counter()
        for b in later:
            rows, _, _ = compare_runs(base, slowed(b, slowdown) if slowdown else b, window_s=0)
            counts.update(row.verdict for row in rows)
        total = sum(counts.values())
        alarms = counts["regressed"] if slowdown else counts["regressed"] + counts["improved"]
        print(
            f"{k}  {len(later):6d}  {total:8d}  {counts['regressed']:9d}  "
            f"{counts['improved']:8d}  {counts['noisy']:5d}  {counts['ok']:2d}  "
            f"{alarms / max(total, 1):.1%} ({alarms} of {total})"
        )


def main() -> None:
    """Parse the command line and run or judge."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("directory", type=Path)
    r.add_argument("--runs", type=int, default=15)
    r.add_argument("pytest_args", nargs="*")
    j = sub.add_parser("judge")
    j.add_argument("directory", type=Path)
    j.add_argument("--k", type=int, nargs="+", default=[1, 2, 5])
    j.add_argument("--reruns", type=int, default=10)
    j.add_argument("--slowdown", type=float, default=0.0)
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []  # handed to pytest
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    args.pytest_args = [*args.pytest_args, *extra] if args.command == "run" else []
    if args.command == "run":
        run(args.directory.resolve(), args.runs, args.pytest_args)
    else:
        judge(args.directory, args.k, args.reruns, args.slowdown)


if __name__ == "__main__":
    main()
