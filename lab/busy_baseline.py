"""The stored baseline on a busy machine: saved and judged beside a burner, by paired ratios.

    python -m lab.busy_baseline run DIR --condition quiet|steady|bursty [--saves 3]
                                        [--judged 4] [-- PYTEST ARGS]
    python -m lab.busy_baseline judge DIR [DIR ...] [--slowdown 0.1 0.2]

``run`` starts the condition's burner outside pytest's process tree (``steady``: ``python -c
'while True: pass'`` for the whole run; ``bursty``: the same loop 3 s on, 3 s off; ``quiet``:
none), then makes ``--saves`` runs that save a baseline and ``--judged`` runs judged against
it, one after the other, each a fresh pytest with ``--perf-fidelity`` (every check beside
its bare reference, sample by sample) and ``--perf-baseline-window 0`` (each save a session
of its own, as saves hours apart would be).  It prints each run's wall time, exit status and
last line.

``judge`` counts, for each DIR, the judged runs' verdicts as the plugin decided them (the
A/A: every ``regressed`` or ``improved`` is a false alarm), then the power: each judged
run's work made ``--slowdown`` slower (a rate times 1 - s, the pairs' ratios alike, as
``perfsuite/slowdown.py`` stretches durations) and judged against the saved runs by
``perfsuite.judge.compare.compare_runs``, which judges by the same rule as the plugin.
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

ROOT = Path(__file__).resolve().parents[1]
SELECTION = [
    "suites/test_memory_bandwidth.py",
    "suites/test_gemm.py",
    "--hw=auto",
    "-k",
    "(numpy or torch) and (stream or fp32)",
    "--perf-fidelity",
    "--perf-baseline-window",
    "0",
    "-p",
    "no:cacheprovider",
    "-q",
]
BURNERS = {
    "quiet": None,
    "steady": "while True: pass",
    "bursty": (
        "import time\n"
        "while True:\n"
        "    t = time.monotonic()\n"
        "    while time.monotonic() - t < 3: pass\n"
        "    time.sleep(3)"
    ),
}


def run(directory: Path, condition: str, saves: int, judged: int, extra: list[str]) -> None:
    """The saves, then the judged runs, each a fresh pytest, beside the condition's burner."""
    (directory / "baselines").mkdir(parents=True, exist_ok=True)
    code = BURNERS[condition]
    burner = subprocess.Popen([sys.executable, "-c", code]) if code else None
    try:
        for i in range(saves + judged):
            save = i < saves
            folder = directory / ("saves" if save else "judged")
            started = time.monotonic()
            proc = subprocess.run(
                [sys.executable, "-m", "pytest", *SELECTION, *extra,
                 "--perf-report-dir", str(folder),
                 "--perf-baseline-dir", str(directory / "baselines"),
                 *(["--perf-save-baseline"] if save else [])],
                cwd=ROOT, capture_output=True, text=True, check=False,
            )  # fmt: skip
            lines = proc.stdout.strip().splitlines()
            verdict = [x for x in lines if x.startswith("perfsuite:")]
            print(
                f"{condition} {'save' if save else 'judged'} {i + 1}: exit {proc.returncode}, "
                f"{time.monotonic() - started:.0f} s, {' | '.join(verdict) or lines[-1:]}",
                flush=True,
            )
    finally:
        if burner is not None:
            burner.kill()
            burner.wait()


def slowed(record: RunRecord, fraction: float) -> RunRecord:
    """The record with every check's work ``fraction`` slower; its bare references unchanged."""
    results = []
    for r in record.results:
        factor = 1 - fraction if r.higher_is_better else 1 / (1 - fraction)
        bare = r.bare_reference
        if bare is not None and bare.pair_ratios:
            bare = replace(bare, pair_ratios=tuple(v * factor for v in bare.pair_ratios))
        results.append(
            replace(r, samples=tuple(v * factor for v in r.samples), bare_reference=bare)
        )
    return replace(record, results=tuple(results))


def _records(folder: Path) -> list[RunRecord]:
    return [load_record(p) for p in sorted(folder.glob("*/*.json"))]


def judge(directory: Path, slowdowns: list[float]) -> None:
    """The judged runs' own verdicts, then each slowdown's, judged against the saves."""
    saves, judged = _records(directory / "saves"), _records(directory / "judged")
    plugin: Counter[str] = Counter(r.baseline.verdict for rec in judged for r in rec.results)
    by_ratio = sum(1 for rec in judged for r in rec.results if r.facts.load_cancelled is not None)
    loads = [
        f.cores or 0.0
        for rec in [*saves, *judged]
        for r in rec.results
        for f in r.noise_flags
        if f.kind == "foreign-load"
    ]
    total = sum(plugin.values())
    alarms = plugin["regressed"] + plugin["improved"]
    print(
        f"{directory.name}: {len(saves)} saves, {len(judged)} judged runs, {total} verdicts; "
        f"A/A (plugin): {dict(plugin)}; false alarms {alarms} of {total}; "
        f"{by_ratio} judged by the paired ratio; "
        f"loaded results {len(loads)}, cores {min(loads, default=0):.2f}-"
        f"{max(loads, default=0):.2f}"
    )
    for fraction in [0.0, *slowdowns]:
        counts: Counter[str] = Counter()
        for rec in judged:
            rows, _, _ = compare_runs(saves, slowed(rec, fraction), window_s=0)
            counts.update(row.verdict for row in rows)
        n = sum(counts.values())
        hit = counts["regressed"] if fraction else counts["regressed"] + counts["improved"]
        what = f"power at {fraction:.0%}" if fraction else "A/A (compare)"
        print(f"  {what}: {hit} of {n} = {hit / max(n, 1):.1%}  {dict(counts)}")


def main() -> None:
    """Parse the command line and run or judge."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("directory", type=Path)
    r.add_argument("--condition", choices=sorted(BURNERS), required=True)
    r.add_argument("--saves", type=int, default=3)
    r.add_argument("--judged", type=int, default=4)
    j = sub.add_parser("judge")
    j.add_argument("directories", type=Path, nargs="+")
    j.add_argument("--slowdown", type=float, nargs="*", default=[0.1, 0.2])
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []  # handed to pytest
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if args.command == "run":
        run(args.directory.resolve(), args.condition, args.saves, args.judged, extra)
    else:
        for directory in args.directories:
            judge(directory, args.slowdown)


if __name__ == "__main__":
    main()
