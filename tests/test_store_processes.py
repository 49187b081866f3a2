"""Many processes append to one results store at once; a writer killed mid-write."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfsuite.store import Store, load_runs, series

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
WRITERS, RUNS, CHECKS = 8, 20, 5

# One writer: RUNS runs appended one by one, each its own shard, as sessions append them.
WRITER = """
import sys
from perfsuite.model import RunRecord
from perfsuite.store import Store
from tests.test_store_db import result

path, worker, runs, checks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
store = Store.open(__import__("pathlib").Path(path), create=True)
for i in range(runs):
    minute = worker * runs + i
    record = RunRecord(
        run_id=f"w{worker}-r{i}",
        created=f"2026-01-01T{minute // 60:02d}:{minute % 60:02d}:00+00:00",
        hardware_profile={"name": "cpu"},
        environment={"host": {"hostname": f"node{worker}"}},
        results=tuple(result(f"c{c}", 1.0 + c + minute / 1000) for c in range(checks)),
    )
    store.append([record])
    store.tidy()  # as a session does after its append: tiers merged while others write
"""

# A writer of one shard big enough to be caught in the middle of writing it.
BIG = """
import sys
from perfsuite.model import RunRecord
from perfsuite.store import Store
from tests.test_store_db import result

store = Store.open(__import__("pathlib").Path(sys.argv[1]))
records = [
    RunRecord(f"big-{i}", "2026-02-01T00:00:00+00:00", {"name": "cpu"}, {},
              tuple(result(f"c{c}", 1.0) for c in range(40)))
    for i in range(600)
]
print("ready", flush=True)
store.append(records)
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def test_parallel_writers_and_a_compaction_lose_no_run(tmp_path: Path) -> None:
    path = tmp_path / "store"
    Store.open(path, create=True)
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(w), str(RUNS), str(CHECKS)],
            cwd=ROOT,
            env=_env(),
        )
        for w in range(WRITERS)
    ]
    compactions = 0
    while any(w.poll() is None for w in writers):  # compact and read while they write
        merged, _ = Store.open(path).compact()
        compactions += merged > 0
        assert Store.open(path).info().runs <= WRITERS * RUNS
    assert [w.wait(timeout=300) for w in writers] == [0] * WRITERS
    store = Store.open(path)
    info = store.info()
    assert (info.runs, info.results) == (WRITERS * RUNS, WRITERS * RUNS * CHECKS)
    history = series(store, "cpu")
    assert len(history.run_ids) == WRITERS * RUNS
    assert [len(s) for s in history.series] == [WRITERS * RUNS] * CHECKS
    first = history.series[0].median
    assert (first[1:] > first[:-1]).all(), "each series in run-time order"
    store.compact()
    assert store.info().shards == 1 and store.info().runs == WRITERS * RUNS
    assert compactions >= 0  # how many overlapped the writers depends on the machine


def test_a_writer_killed_mid_write_leaves_no_shard_visible(tmp_path: Path) -> None:
    path = tmp_path / "store"
    store = Store.open(path, create=True)
    from tests.test_store_db import run

    store.append([run(1, {"a": 1.0})])
    writer = subprocess.Popen(
        [sys.executable, "-c", BIG, str(path)],
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
    deadline = time.monotonic() + 120
    while not any(
        p.name.endswith(".tmp") for t in ("results", "runs") for p in (path / t).iterdir()
    ):
        assert writer.poll() is None, "the writer finished before it could be caught writing"
        assert time.monotonic() < deadline
        time.sleep(0.002)
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=60)
    writer.stdout.close()
    assert writer.returncode == -signal.SIGKILL
    assert [r.run_id for r in load_runs(path)] == [run(1, {}).run_id]
    assert store.info().runs == 1 and store.info().shards == 1
    # What it left (a temporary, or a results file without its runs file) is there, unread.
    assert len(list((path / "results").iterdir())) + len(list((path / "runs").iterdir())) > 2
