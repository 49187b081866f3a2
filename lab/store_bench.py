"""What the results store costs: ingest, compaction, and the history of every series.

    python lab/store_bench.py                  # 10^4, 10^5, 10^6 readings and 100,000 x 1
    python lab/store_bench.py --levels 1e4     # a quick look

A reading is one run's median of one check.  Each level is a store of R runs x C checks
(10^4 = 100 x 100, 10^5 = 1,000 x 100, 10^6 = 10,000 x 100, and 100,000 runs x 1 check),
written through the store's own append (``Store.append_data``, records in their JSON layout,
in batches of BATCH runs, one shard each, as ``perfsuite store import`` writes them; the time
to make the records is left out), then compacted.  "series" is
``perfsuite.store.series(store, profile)``: every check's per-run medians in run-time order,
as numpy arrays (what ``perfsuite history`` reads).  Each step runs in a fresh process, and
its peak RSS (``ru_maxrss``: interpreter, numpy and DuckDB included) is that process's.

Beside it, the same query on SQLite (the standard library's ``sqlite3``), the other
embedded database the issue names: the same rows in one SQLite file with an index on each
table's key, read into the same arrays.  And the 10^5 store written as nightly sessions
write it: one shard per run, each append followed by the session's tiered merge
(``Store.tidy``); "series, shards" reads it as they leave it, before a full compaction.

Targets (issue 65): 10^6 readings in <= 10 s and <= 1 GB; 100,000 runs of one check in
<= 5 s; on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perfsuite.model import (  # noqa: E402
    BaselineVerdict,
    FloorVerdict,
    Result,
    RunRecord,
    Summary,
    Work,
)

BATCH = 250  # runs per shard an ingest writes
PROFILE = "bench"
SAMPLES = 5  # readings behind each median


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _template(c: int) -> dict[str, Any]:
    """Check ``c``'s result in the record's JSON layout, made by the model itself."""
    return Result(
        id=f"suites/test_bench.py::test_check[{c:03d}]",
        check="bench",
        params={"case": c},
        metric="bandwidth",
        unit="GB/s",
        higher_is_better=True,
        samples=(1.0,) * SAMPLES,
        seconds=(1.0,) * SAMPLES,
        summary=Summary(1.0, 1.0, 1.0, 1.0, SAMPLES, 0.03),
        work=Work(1e9, "B"),
        floor=FloorVerdict("no-reference"),
        baseline=BaselineVerdict("ok", ratio=1.0, p_value=0.4, significant=False),
        outcome="passed",
    ).to_dict()


def _record(i: int, templates: list[dict[str, Any]], rng: np.random.Generator) -> dict[str, Any]:
    """Run ``i`` in the JSON layout: each check's samples around a level that steps."""
    results = []
    noise = rng.lognormal(0, 0.03, (len(templates), SAMPLES))
    for c, template in enumerate(templates):
        level = 100.0 * (1 + c % 7) * (1.1 if (i // 500 + c) % 3 == 0 else 1.0)
        samples = [float(v) for v in level * noise[c]]
        ordered = sorted(samples)
        summary = {"median": ordered[SAMPLES // 2], "min": ordered[0], "max": ordered[-1],
                   "mean": sum(samples) / SAMPLES, "n": SAMPLES, "cv": 0.03}  # fmt: skip
        seconds = [1 / v for v in samples]
        results.append({**template, "samples": samples, "seconds": seconds, "summary": summary})
    day, rest = divmod(i, 24 * 60)
    return RunRecord(
        run_id=f"run-{i:06d}",
        created=f"{np.datetime64('2020-01-01') + np.timedelta64(day, 'D')}T"
        f"{rest // 60:02d}:{rest % 60:02d}:00+00:00",
        hardware_profile={"name": PROFILE},
        environment={"host": {"hostname": "bench"}, "software": {"numpy": {"version": "2"}}},
        results=(),
        settings={"quick": False},
        duration_s=60.0,
    ).to_dict() | {"results": results}


# The steps, each run in a child process ---------------------------------------------------


def step_ingest(path: str, runs: int, checks: int, batch: int, tidy: bool) -> dict[str, Any]:
    from perfsuite.store import Store

    store = Store.open(Path(path), create=True)
    rng = np.random.default_rng(0)
    templates = [_template(c) for c in range(checks)]
    made = 0.0
    began = time.perf_counter()
    for first in range(0, runs, batch):
        t = time.perf_counter()
        records = [_record(i, templates, rng) for i in range(first, min(runs, first + batch))]
        made += time.perf_counter() - t
        store.append_data(records)
        if tidy:  # as each session does after its append
            store.tidy()
    # The store's own cost: making the records (the bench's, not the store's) left out.
    return {"s": time.perf_counter() - began - made, "peak_mb": _peak_mb()}


def step_compact(path: str) -> dict[str, Any]:
    from perfsuite.store import Store

    began = time.perf_counter()
    merged, _ = Store.open(Path(path)).compact()
    return {"s": time.perf_counter() - began, "peak_mb": _peak_mb(), "merged": merged}


def step_series(path: str) -> dict[str, Any]:
    from perfsuite.store import Store, series

    store = Store.open(Path(path))
    began = time.perf_counter()
    history = series(store, PROFILE)
    took = time.perf_counter() - began
    points = sum(len(s) for s in history.series)
    return {"s": took, "peak_mb": _peak_mb(), "series": len(history.series), "points": points}


def step_sqlite_load(path: str, target: str) -> dict[str, Any]:
    """The compacted store's rows into one SQLite file (the peer's data, not timed)."""
    from perfsuite.store import Store

    def rows(con: Any) -> tuple[list[Any], list[Any]]:
        runs = con.execute("SELECT run_id, profile, created_s FROM runs").fetchall()
        results = con.execute("SELECT run_id, id, unit, higher_is_better, median FROM results")
        return runs, results.fetchall()

    runs, results = Store.open(Path(path)).read(rows)
    db = sqlite3.connect(target)
    db.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, profile TEXT, created_s REAL)")
    db.execute(
        "CREATE TABLE results (run_id TEXT, id TEXT, unit TEXT, higher_is_better INTEGER, "
        "median REAL)"
    )
    db.executemany("INSERT INTO runs VALUES (?, ?, ?)", runs)
    db.executemany("INSERT INTO results VALUES (?, ?, ?, ?, ?)", results)
    db.execute("CREATE INDEX runs_profile ON runs (profile, created_s)")
    db.execute("CREATE INDEX results_run ON results (run_id)")
    db.commit()
    db.close()
    return {"s": 0.0, "peak_mb": _peak_mb()}


def step_sqlite_series(target: str) -> dict[str, Any]:
    """The same answer from SQLite: each check's medians in run order, as numpy arrays."""
    began = time.perf_counter()
    db = sqlite3.connect(target)
    got = db.execute(
        "WITH span AS (SELECT run_id, created_s, row_number() OVER (ORDER BY created_s, "
        "run_id) - 1 AS n FROM runs WHERE profile = ?) SELECT r.id, s.n, s.created_s, "
        "r.median FROM results r JOIN span s USING (run_id) ORDER BY r.id, s.n",
        [PROFILE],
    ).fetchall()
    ids = np.array([g[0] for g in got], dtype=object)
    n = np.fromiter((g[1] for g in got), dtype=np.int64, count=len(got))
    created = np.fromiter((g[2] for g in got), dtype=np.float64, count=len(got))
    median = np.fromiter((g[3] for g in got), dtype=np.float64, count=len(got))
    cuts = np.flatnonzero(ids[1:] != ids[:-1]) + 1
    series = [(a, b, c) for a, b, c in zip(np.split(n, cuts), np.split(created, cuts),
                                            np.split(median, cuts), strict=True)]  # fmt: skip
    took = time.perf_counter() - began
    return {"s": took, "peak_mb": _peak_mb(), "series": len(series), "points": len(got)}


STEPS = {
    "ingest": step_ingest,
    "compact": step_compact,
    "series": step_series,
    "sqlite_load": step_sqlite_load,
    "sqlite_series": step_sqlite_series,
}


def child(step: str, *args: Any) -> dict[str, Any]:
    """Run one step in a fresh process; its answer."""
    out = subprocess.run(
        [sys.executable, __file__, "--step", step, json.dumps(args)],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    answer: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return answer


# The table -----------------------------------------------------------------------------


def _size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def level(work: Path, runs: int, checks: int, batch: int, sqlite: bool) -> dict[str, Any]:
    path = work / f"store-{runs}x{checks}-{batch}"
    shutil.rmtree(path, ignore_errors=True)
    ingest = child("ingest", str(path), runs, checks, batch, batch == 1)
    shards = len(list((path / "runs").glob("v*.parquet")))
    before = child("series", str(path))
    compact = child("compact", str(path))
    after = child("series", str(path))
    row = {"runs": runs, "checks": checks, "shards": shards, "ingest": ingest,
           "shards_series": before, "compact": compact, "series": after,
           "store_mb": _size_mb(path)}  # fmt: skip
    assert after["points"] == runs * checks and after["series"] == checks, after
    if sqlite:
        target = str(work / f"sqlite-{runs}x{checks}.db")
        Path(target).unlink(missing_ok=True)
        child("sqlite_load", str(path), target)
        row["sqlite"] = child("sqlite_series", target)
        row["sqlite_mb"] = Path(target).stat().st_size / 1e6
        Path(target).unlink()
    shutil.rmtree(path, ignore_errors=True)
    return row


def _cell(step: dict[str, Any] | None) -> str:
    return "-" if step is None else f"{step['s']:.2f} s, {step['peak_mb']:.0f} MB"


def show(rows: list[dict[str, Any]]) -> None:
    print(
        "| readings | runs x checks | shards before compaction | ingest | compact | "
        "series, shards | series, compacted | store MB | SQLite series | SQLite MB |"
    )
    print("|" + "---|" * 10)
    for r in rows:
        shards = r["shards"]
        sqlite_mb = f"{r['sqlite_mb']:.1f}" if "sqlite_mb" in r else "-"
        print(
            f"| {r['runs'] * r['checks']:,} | {r['runs']:,} x {r['checks']} | {shards:,} | "
            f"{_cell(r['ingest'])} | {_cell(r['compact'])} | {_cell(r['shards_series'])} | "
            f"{_cell(r['series'])} | {r['store_mb']:.1f} | {_cell(r.get('sqlite'))} | "
            f"{sqlite_mb} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step", help=argparse.SUPPRESS)
    parser.add_argument("args", nargs="?", help=argparse.SUPPRESS)
    parser.add_argument(
        "--levels", default="1e4,1e5,1e6", help="readings per level, of 100 checks each "
        "(default 1e4,1e5,1e6)"
    )  # fmt: skip
    parser.add_argument(
        "--single", type=int, default=100_000, help="runs of the one-check level (default "
        "100000; 0 for none)"
    )  # fmt: skip
    parser.add_argument("--no-sqlite", action="store_true", help="skip the SQLite peer")
    parser.add_argument(
        "--per-run", type=int, default=1000, help="runs of the 100-check store left as one "
        "shard per run, uncompacted (default 1000; 0 for none)"
    )  # fmt: skip
    args = parser.parse_args()
    if args.step:
        print(json.dumps(STEPS[args.step](*json.loads(args.args))))
        return
    print(f"uptime: {os.popen('uptime').read().strip()}; cores: {os.cpu_count()}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="store-bench-") as tmp:
        work = Path(tmp)
        for readings in (int(float(x)) for x in args.levels.split(",") if x):
            rows.append(level(work, readings // 100, 100, BATCH, not args.no_sqlite))
        if args.single:
            rows.append(level(work, args.single, 1, 10 * BATCH * 4, not args.no_sqlite))
        if args.per_run:
            rows.append(level(work, args.per_run, 100, 1, sqlite=False))
    show(rows)
    print(f"uptime: {os.popen('uptime').read().strip()}")


if __name__ == "__main__":
    main()
