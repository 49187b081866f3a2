"""The results store: round trips, series, import, compaction, versions (records built here)."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from perfsuite.cli import main
from perfsuite.errors import StorageError
from perfsuite.judge.outcome import EXIT_OK, EXIT_USAGE
from perfsuite.model import (
    BaselineVerdict,
    FloorVerdict,
    Result,
    RunRecord,
    Summary,
    Work,
)
from perfsuite.store import Store, append_run, import_dir, load_runs, schema, series
from perfsuite.store.files import write_json_atomic
from perfsuite.store.records import load_record

FIXTURES = Path(__file__).parent / "fixtures"


def result(check: str, median: float, unit: str = "GB/s", verdict: str = "ok") -> Result:
    samples = (median * 0.99, median, median * 1.01)
    return Result(
        id=f"suite.py::test[{check}]",
        check="toy",
        params={"n": 1, "name": check},
        metric="bandwidth",
        unit=unit,
        higher_is_better=True,
        samples=samples,
        seconds=tuple(1 / s for s in samples),
        summary=Summary(median, min(samples), max(samples), median, 3, 0.01),
        work=Work(1e9, "B"),
        floor=FloorVerdict("no-reference"),
        baseline=BaselineVerdict(verdict, ratio=1.0, p_value=0.5, significant=False),
        outcome="passed",
    )


def run(
    day: int, medians: dict[str, float], profile: str = "cpu", host: str = "node1"
) -> RunRecord:
    return RunRecord(
        run_id=f"202601{day:02d}-{profile}-{host}",
        created=f"2026-01-{day:02d}T01:00:00+00:00",
        hardware_profile={"name": profile},
        environment={"host": {"hostname": host}, "software": {"numpy": {"version": "2.0"}}},
        results=tuple(result(c, m) for c, m in medians.items()),
        settings={"quick": False},
        duration_s=12.5,
    )


def key(check: str) -> str:
    return f"suite.py::test[{check}]"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store.open(tmp_path / "store", create=True)


def test_runs_read_back_equal_to_the_records_written(store: Store) -> None:
    runs = [run(3, {"a": 3.0, "b": 30.0}), run(1, {"a": 1.0}), run(2, {"a": 2.0, "b": 20.0})]
    store.append(runs[:1])
    store.append(runs[1:])
    assert load_runs(store.path) == sorted(runs, key=lambda r: r.created)
    assert load_runs(store.path, run_ids=[runs[2].run_id]) == [runs[2]]
    info = store.info()
    assert (info.runs, info.results, info.shards, info.versions) == (3, 5, 2, (1,))


def test_a_store_and_a_folder_of_records_give_the_same_runs(store: Store, tmp_path: Path) -> None:
    runs = [run(1, {"a": 1.0}), run(2, {"a": 2.0}), run(3, {"a": 1.5}, profile="gpu")]
    reports = tmp_path / "reports"
    for r in runs:
        write_json_atomic(reports / r.hardware_profile["name"] / f"{r.run_id}.json", r.to_dict())
    store.append(runs)
    assert load_runs(reports) == load_runs(store.path) == runs
    assert load_runs(reports, profile="gpu") == load_runs(store.path, profile="gpu") == runs[2:]
    assert load_runs(reports / "cpu") == runs[:2]
    assert load_runs(reports / "cpu" / f"{runs[0].run_id}.json") == runs[:1]
    with pytest.raises(StorageError, match="holds no run 'nope'"):
        load_runs(store.path, run_ids=["nope"])


def test_series_orders_by_run_time_and_counts_the_profile_runs(store: Store) -> None:
    store.append([run(2, {"a": 2.0}), run(1, {"a": 1.0}), run(5, {"a": 5.0, "b": 50.0})])
    store.append([run(4, {"a": 4.0, "b": 40.0}), run(3, {"b": 30.0})])
    store.append([run(6, {"a": 9.0}, profile="gpu")])
    history = series(store, "cpu")
    assert len(history.run_ids) == 5 and history.run.tolist() == [0, 1, 2, 3, 4]
    a, b = history.of(key("a")), history.of(key("b"))
    assert a is not None and b is not None
    assert a.median.tolist() == [1.0, 2.0, 4.0, 5.0] and a.run.tolist() == [0, 1, 3, 4]
    assert b.median.tolist() == [30.0, 40.0, 50.0] and b.run.tolist() == [2, 3, 4]
    assert str(b.created[0]) == "2026-01-03T01:00:00"
    assert a.median.dtype == np.float64 and a.run.dtype == np.int64
    assert (a.unit, a.higher_is_better) == ("GB/s", True)


def test_last_and_since_keep_the_profile_run_numbers(store: Store) -> None:
    store.append([run(d, {"a": float(d), "b": 10.0 * d}) for d in range(1, 7)])
    last = series(store, "cpu", last=2)
    assert last.run.tolist() == [4, 5]
    a = last.of(key("a"))
    assert a is not None and a.median.tolist() == [5.0, 6.0] and a.run.tolist() == [4, 5]
    since = series(store, "cpu", since="2026-01-03T00:00:00", checks=[key("b")])
    assert [s.check for s in since.series] == [key("b")]
    assert since.series[0].run.tolist() == [2, 3, 4, 5]
    assert series(store, "cpu", since="2026-01-05", last=5).run.tolist() == [4, 5]
    assert series(store, "other").series == ()
    with pytest.raises(StorageError, match="last: expected 1 or more"):
        series(store, "cpu", last=0)


def test_points_in_an_earlier_unit_are_left_out(store: Store) -> None:
    old = run(1, {"a": 1.0})
    old = RunRecord(**{**old.__dict__, "results": (result("a", 1000.0, unit="MB/s"),)})
    store.append([old, run(2, {"a": 2.0}), run(3, {"a": 3.0})])
    (a,) = series(store, "cpu").series
    assert a.unit == "GB/s" and a.median.tolist() == [2.0, 3.0] and a.run.tolist() == [1, 2]


def test_tidy_merges_shards_of_one_size_a_fanout_at_a_time(store: Store) -> None:
    from perfsuite.store import db

    counts = []
    for d in range(1, 21):
        store.append([run(d, {"a": float(d)})])
        store.tidy()
        counts.append(len(store.shards("runs")))
    assert max(counts) < db.FANOUT and counts[db.FANOUT - 2] == db.FANOUT - 1
    assert counts[db.FANOUT - 1] == 1, "the eighth one-run shard merges the tier"
    (a,) = series(store, "cpu").series
    assert a.median.tolist() == [float(d) for d in range(1, 21)]


def test_a_bad_since_is_one_line(store: Store) -> None:
    with pytest.raises(StorageError, match="since: expected a date or an ISO 8601 time"):
        series(store, "cpu", since="last tuesday")


def test_a_run_stored_twice_is_read_once(store: Store) -> None:
    twice = run(1, {"a": 1.0})
    store.append([twice])
    store.append([twice, run(2, {"a": 2.0})])
    assert [r.run_id for r in load_runs(store.path)] == [twice.run_id, run(2, {}).run_id]
    (a,) = series(store, "cpu").series
    assert a.median.tolist() == [1.0, 2.0]


def test_import_is_idempotent_and_names_each_unreadable_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "records"
    shutil.copytree(
        FIXTURES, folder, ignore=shutil.ignore_patterns("baselines", "profiles", "*.py")
    )
    (folder / "broken.json").write_text('{"schema_version": 3, "run_id": ')
    (folder / "deep").mkdir()
    (folder / "deep" / "other.json").write_text("[]")
    target = tmp_path / "store"
    assert main(["store", "import", str(folder), "--store", str(target)]) == EXIT_OK
    out, err = capsys.readouterr()
    fixtures = sorted(FIXTURES.glob("*.json"))
    assert f"{len(fixtures)} run(s) added, 0 already there, 2 file(s) unreadable" in out
    assert len(err.splitlines()) == 2 and "Traceback" not in err
    assert all(line.startswith("perfsuite: skipped: ") for line in err.splitlines())
    assert main(["store", "import", str(folder), "--store", str(target)]) == EXIT_OK
    out, _ = capsys.readouterr()
    assert f"0 run(s) added, {len(fixtures)} already there" in out
    stored = {r.run_id: r for r in load_runs(target)}
    assert len(stored) == len(fixtures)
    for path in fixtures:
        record = load_record(path)
        assert stored[record.run_id] == record


def test_import_skips_runs_the_store_holds(store: Store, tmp_path: Path) -> None:
    first, second = run(1, {"a": 1.0}), run(2, {"a": 2.0})
    store.append([first])
    for r in (first, second):
        write_json_atomic(tmp_path / "in" / f"{r.run_id}.json", r.to_dict())
    done = import_dir(store, tmp_path / "in")
    assert (done.added, done.already, done.unreadable) == (1, 1, [])
    assert store.info().runs == 2


def test_compaction_merges_every_shard_and_loses_nothing(store: Store) -> None:
    for d in range(1, 6):
        store.append([run(d, {"a": float(d), "b": 2.0 * d})])
    before = load_runs(store.path)
    merged, name = store.compact()
    assert merged == 5 and name.startswith("v1-compact-")
    assert [p.name for p in (store.path / "runs").iterdir()] == [name]
    assert [p.name for p in (store.path / "results").iterdir()] == [name]
    assert load_runs(store.path) == before
    assert store.compact() == (0, "")


def test_what_a_killed_writer_leaves_is_never_read_and_compaction_clears_it(store: Store) -> None:
    store.append([run(1, {"a": 1.0})])
    shard = store.path / "runs" / store.append([run(2, {"a": 2.0})])
    shard.unlink()  # killed between its results file and its runs file
    temporary = store.path / "runs" / ".v1-node-1-abc.parquet.0000.tmp"
    temporary.write_bytes(b"PAR1 half a file")
    assert [r.run_id for r in load_runs(store.path)] == [run(1, {}).run_id]
    assert series(store, "cpu").series[0].median.tolist() == [1.0]
    old = time.time() - 2 * 3600
    os.utime(temporary, (old, old))
    os.utime(store.path / "results" / shard.name, (old, old))
    store.compact()
    assert not temporary.exists() and not (store.path / "results" / shard.name).exists()
    assert store.info().runs == 1


def test_a_store_of_a_newer_schema_version_is_refused_in_one_line(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    store.append([run(1, {"a": 1.0})])
    (shard,) = (store.path / "runs").iterdir()
    shutil.copy(shard, store.path / "runs" / ("v2-" + shard.name[3:]))
    with pytest.raises(
        StorageError, match=r"schema version 2, this perfsuite reads versions 1 to 1"
    ):
        Store.open(store.path)
    assert main(["store", "info", "--store", str(store.path)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("perfsuite: error: ")


def test_a_version_1_store_is_read_and_compacted_in_the_next_version(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.append([run(1, {"a": 1.0}), run(2, {"a": 2.0})])
    # The next version adds a column: version 1's rows are read with its value for them.
    runs = {**schema.RUNS, "driver": "VARCHAR"}
    monkeypatch.setattr(schema, "SCHEMA_VERSION", 2)
    monkeypatch.setattr(schema, "COLUMNS", {"runs": runs, "results": schema.RESULTS})
    monkeypatch.setattr(
        schema, "MIGRATIONS", {"runs": {1: "*, 'unknown' AS driver"}, "results": {1: "*"}}
    )
    migrated = Store.open(store.path)
    drivers = migrated.read(lambda con: con.execute("SELECT driver FROM runs").fetchall())
    assert drivers == [("unknown",), ("unknown",)]
    merged, name = migrated.compact()
    assert merged == 1 and name.startswith("v2-compact-")
    assert [s.version for s in migrated.shards("runs")] == [2]
    assert [r.run_id for r in load_runs(store.path)] == [run(1, {}).run_id, run(2, {}).run_id]


def test_a_store_problem_is_a_warning_and_the_record_stays(tmp_path: Path) -> None:
    (tmp_path / "_store").write_text("not a folder")
    warning = append_run(tmp_path, run(1, {"a": 1.0}))
    assert warning.startswith("perfsuite: warning: run not added to the results store")
    assert "\n" not in warning
    assert append_run(tmp_path / "fine", run(1, {"a": 1.0})) == ""
    assert load_runs(tmp_path / "fine" / "_store") == [run(1, {"a": 1.0})]


def test_not_a_store_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["store", "info", "--store", str(tmp_path)]) == EXIT_USAGE
    assert "not a results store" in capsys.readouterr().err


def test_a_tampered_run_is_refused_as_a_record_file_would_be(store: Store) -> None:
    import duckdb

    store.append([run(1, {"a": 1.0})])
    (shard,) = (store.path / "runs").iterdir()
    con = duckdb.connect()
    (text,) = con.execute("SELECT record FROM read_parquet(?)", [str(shard)]).fetchone() or ("",)
    record = json.loads(text)
    record["created"] = "yesterday"
    con.execute(
        f"COPY (SELECT * REPLACE (? AS record) FROM read_parquet('{shard}')) TO '{shard}.new' "
        "(FORMAT parquet)",
        [json.dumps(record)],
    )
    os.replace(f"{shard}.new", shard)
    with pytest.raises(StorageError, match=r"created: expected an ISO 8601 time"):
        load_runs(store.path)


def test_compare_reads_its_runs_from_a_store(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    records: Sequence[RunRecord] = [load_record(FIXTURES / n) for n in
                                    ("report-baseline.json", "report-run.json")]  # fmt: skip
    store.append(records)
    from_files = main(["compare", *(str(FIXTURES / n) for n in
                                    ("report-baseline.json", "report-run.json"))])  # fmt: skip
    files_out = capsys.readouterr().out
    from_store = main(["compare", "--store", str(store.path), *(r.run_id for r in records)])
    assert from_store == from_files
    assert capsys.readouterr().out == files_out


TOY = """
import numpy as np
from perfsuite.measure.loop import Workload
from perfsuite.model import Work

def test_toy(perf):
    a = np.ones(1 << 12)
    b = np.empty_like(a)
    perf.measure(Workload(check="toy", params={}, metric="bandwidth", unit="GB/s",
        work=Work(2 * a.nbytes, "B"), run=lambda: np.copyto(b, a), scale=1e9))
"""


def test_a_session_appends_its_run_to_the_default_store(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_toy=TOY)
    pytester.runpytest("--perf-quick", "--perf-html=no").assert_outcomes(passed=1)
    pytester.runpytest("--perf-quick", "--perf-html=no").assert_outcomes(passed=1)
    written = sorted((pytester.path / "reports").glob("*/*.json"))
    stored = load_runs(pytester.path / "reports" / "_store")
    assert stored == [load_record(p) for p in written] and len(stored) == 2


def test_a_session_whose_store_fails_keeps_its_record_and_warns(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_toy=TOY)
    (pytester.path / "reports").mkdir()
    (pytester.path / "reports" / "_store").write_text("in the way")
    result = pytester.runpytest_subprocess("--perf-quick", "--perf-html=no")
    result.assert_outcomes(passed=1)
    assert result.ret == EXIT_OK
    warnings = [line for line in result.errlines if "results store" in line]
    assert len(warnings) == 1 and warnings[0].startswith("perfsuite: warning: run not added")
    (record,) = (pytester.path / "reports").glob("*/*.json")
    assert load_record(record).results[0].check == "toy"


def test_store_commands_say_what_they_did_in_one_line_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = Store.open(tmp_path / "store", create=True)
    store.append([run(1, {"a": 1.0})])
    store.append([run(2, {"a": 2.0})], prefix="import-")
    where = ["--store", str(store.path)]
    assert main(["store", "info", *where]) == EXIT_OK
    assert capsys.readouterr().out.splitlines()[1:] == ["  cpu: 2 run(s)"]
    assert main(["store", "compact", *where]) == EXIT_OK
    assert "merged 2 shard(s) into v1-compact-" in capsys.readouterr().out
    assert main(["store", "compact", *where]) == EXIT_OK
    assert capsys.readouterr().out.strip().endswith("nothing to merge")
    assert main(["store", "import", str(tmp_path / "absent"), *where]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such folder" in err


def test_fleet_report_reads_each_node_latest_run_from_a_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.test_fleet import drained, fleet, report

    records = tmp_path / "fleet"
    fleet(records, 8, slow={5: 0.7})
    from_folder, drain = report(records)
    store = Store.open(tmp_path / "store", create=True)
    assert import_dir(store, records).added == 8
    # An earlier night of node05, when it was fast: the latest run is the one judged.
    (old,) = load_runs(store.path, run_ids=["20261128T000000000Z-node05"])
    faster = tuple(replace(r, summary=replace(r.summary, median=r.summary.median / 0.7))
                   for r in old.results)  # fmt: skip
    store.append([replace(old, run_id="20261127-node05", created="2026-11-27T00:00:00+00:00",
                          results=faster)])  # fmt: skip
    capsys.readouterr()
    from_store, drain_store = report(store.path)
    assert from_store == from_folder and drained(drain_store) == drained(drain) == ["node05"]
    assert "(1 unconfirmed slow node) of 8 nodes" in capsys.readouterr().out
