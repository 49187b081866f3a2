"""Unit tests: baselines and run records on disk, with the committed fixtures."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from perfsuite.errors import BaselineMismatchError, StorageError
from perfsuite.model import (
    BareReference,
    BaselineVerdict,
    FloorVerdict,
    Result,
    RunRecord,
    Summary,
    Work,
)
from perfsuite.store.baseline import BaselineStore
from perfsuite.store.files import check_writable, read_json, write_json_atomic

FIXTURES = Path(__file__).parent / "fixtures"


def result(node_id: str, samples: tuple[float, ...]) -> Result:
    return Result(
        id=node_id,
        check="toy",
        params={"n": 1},
        metric="bandwidth",
        unit="GB/s",
        higher_is_better=True,
        samples=samples,
        seconds=tuple(1 / s for s in samples),
        summary=Summary(1.0, 1.0, 1.0, 1.0, len(samples), None),
        work=Work(1e9, "B"),
        floor=FloorVerdict("no-reference"),
        baseline=BaselineVerdict("new"),
    )


def install(tmp_path: Path, fixture: str, profile: str = "slowgpu") -> Path:
    target = tmp_path / profile / "baseline.json"
    target.parent.mkdir(parents=True)
    shutil.copy(FIXTURES / "baselines" / fixture, target)
    return target


def test_save_then_load_round_trip_merges_entries(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    store.save("slowgpu", [result("a", (1.0, 2.0)), result("b", (3.0,))], "run-1")
    store.save("slowgpu", [result("a", (5.0,))], "run-2")
    baseline = store.load("slowgpu")
    assert baseline.get("a").samples == (5.0,) and baseline.get("a").run_id == "run-2"
    assert baseline.get("b").samples == (3.0,) and baseline.get("b").run_id == "run-1"
    assert not list(tmp_path.glob("slowgpu/.*.tmp")), "no temporary file is left behind"


def test_a_save_without_a_window_keeps_the_one_the_baseline_was_written_with(
    tmp_path: Path,
) -> None:
    """Built with 3 runs per check, a baseline stays at 3 when a later save names none."""
    for i in range(3):
        BaselineStore(tmp_path, 3).save("slowgpu", [result("a", (i + 1.0,))], f"run-{i}")
    BaselineStore(tmp_path).save("slowgpu", [result("a", (9.0,))], "run-9")
    data = json.loads((tmp_path / "slowgpu" / "baseline.json").read_text())
    assert data["window"] == 3
    runs = BaselineStore(tmp_path).load("slowgpu").entries["a"].runs
    assert [r.run_id for r in runs] == ["run-1", "run-2", "run-9"]
    # A new baseline, with no window named, keeps the default five.
    for i in range(7):
        BaselineStore(tmp_path).save("other", [result("a", (i + 1.0,))], f"run-{i}")
    assert len(BaselineStore(tmp_path).load("other").entries["a"].runs) == 5


def test_each_baseline_run_keeps_the_bare_reference_measured_beside_it(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    bare = {"what": "C STREAM", "value": 30.0, "unit": "GB/s"}
    with_ref = replace(result("a", (1.0,)), bare_reference=BareReference.read(bare))
    store.save("slowgpu", [with_ref, result("b", (2.0,))], "run-1")
    store.save(
        "slowgpu",
        [replace(with_ref, bare_reference=BareReference.read({**bare, "value": 20.0}))],
        "run-2",
    )
    store.save(
        "slowgpu",
        [replace(with_ref, bare_reference=BareReference.read({"unavailable": "no cc"}))],
        "run-3",
    )
    baseline = store.load("slowgpu")
    assert baseline.get("a").references == [30.0, 20.0]
    assert baseline.get("b").references == []


@pytest.mark.parametrize("bad", ["fast", -3.0, True])
def test_a_corrupt_stored_reference_is_a_clear_error_and_left_untouched(
    tmp_path: Path, bad: object
) -> None:
    store = BaselineStore(tmp_path)
    bare = {"what": "C STREAM", "value": 30.0, "unit": "GB/s"}
    path, _ = store.save(
        "slowgpu", [replace(result("a", (1.0,)), bare_reference=BareReference.read(bare))], "run-1"
    )
    data = json.loads(path.read_text())
    data["entries"]["a"]["runs"][0]["policy"]["reference"] = bad
    path.write_text(json.dumps(data))
    before = path.read_bytes()
    with pytest.raises(StorageError, match="run 0 has a reference that is not a finite positive"):
        store.load("slowgpu")
    assert path.read_bytes() == before


def test_missing_baseline_is_empty(tmp_path: Path) -> None:
    assert BaselineStore(tmp_path).load("a100").entries == {}


@pytest.mark.parametrize(
    ("fixture", "match"),
    [
        ("truncated.json", "corrupt or truncated baseline"),
        ("future-version.json", "schema_version 99, this perfsuite reads 1"),
    ],
)
def test_bad_baseline_is_a_clear_error_and_left_untouched(
    tmp_path: Path, fixture: str, match: str
) -> None:
    path = install(tmp_path, fixture)
    before = path.read_bytes()
    store = BaselineStore(tmp_path)
    with pytest.raises(StorageError, match=match) as info:
        store.load("slowgpu")
    assert str(path) in str(info.value)
    with pytest.raises(StorageError):
        store.save("slowgpu", [result("a", (1.0,))], "run-x")
    assert path.read_bytes() == before


def test_baseline_of_another_profile_is_refused(tmp_path: Path) -> None:
    install(tmp_path, "recorded-on-a100.json")
    with pytest.raises(BaselineMismatchError, match="recorded on profile 'a100', not 'slowgpu'"):
        BaselineStore(tmp_path).load("slowgpu")


def test_unwritable_directory_is_reported(tmp_path: Path) -> None:
    blocker = tmp_path / "baselines"
    blocker.write_text("a file where a directory should be")
    with pytest.raises(StorageError, match=r"is not writable|cannot write"):
        check_writable(blocker / "slowgpu")
    with pytest.raises(StorageError, match=r"cannot write|cannot lock"):
        BaselineStore(blocker).save("slowgpu", [result("a", (1.0,))], "run-1")


def test_failed_write_keeps_the_previous_file(tmp_path: Path) -> None:
    path = tmp_path / "data.json"
    write_json_atomic(path, {"schema_version": 1, "value": 1})
    with pytest.raises(ValueError):
        write_json_atomic(path, {"schema_version": 1, "value": float("nan")})
    assert read_json(path, "data", 1)["value"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["data.json"]


def test_reference_run_record_matches_the_public_contract() -> None:
    data = read_json(FIXTURES / "run-record-v1.json", "run record", 1)
    for key in (
        "schema_version",
        "run_id",
        "created",
        "hardware_profile",
        "environment",
        "results",
    ):
        assert key in data
    for key in ("software", "gpus", "host", "variables"):
        assert key in data["environment"]
    for entry in data["results"]:
        for key in (
            "id",
            "check",
            "params",
            "metric",
            "unit",
            "higher_is_better",
            "samples",
            "summary",
            "work",
            "floor",
            "baseline",
            "outcome",
        ):
            assert key in entry
        assert set(entry["summary"]) >= {"median", "min", "max", "n", "cv"}
    record = RunRecord.from_dict(data)
    assert RunRecord.from_dict(json.loads(json.dumps(record.to_dict()))) == record


def test_a_save_removes_what_a_killed_writer_left(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    store.save("slowgpu", [result("a", (1.0,))], "run-1")
    dead = tmp_path / "slowgpu" / ".baseline.json.x1y2z3.tmp"
    dead.write_text('{"half": ')
    dead_history = tmp_path / "slowgpu" / "history" / ".baseline-x.json.tmp"
    dead_history.parent.mkdir(exist_ok=True)
    dead_history.write_text("")
    store.save("slowgpu", [result("b", (2.0,))], "run-2")
    assert not dead.exists() and not dead_history.exists()
    data = json.loads((tmp_path / "slowgpu" / "baseline.json").read_text())
    assert set(data["entries"]) == {"a", "b"}
    assert set(data["run_policies"]) == {"run-1", "run-2"}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_named_pipe_is_refused_at_once_not_waited_on(tmp_path: Path) -> None:
    """Opening a FIFO to read waits for a writer; perfsuite must refuse it without waiting."""
    fifo = tmp_path / "run.json"
    os.mkfifo(fifo)
    with pytest.raises(StorageError, match="not a regular file"):
        read_json(fifo, "run record", 1)


def test_a_word_field_takes_only_its_words() -> None:
    from enum import StrEnum

    from perfsuite.store.validate import check_value

    class Side(StrEnum):
        SLOWER = "slower"
        FASTER = "faster"

    check_value("slower", Side, "x.side")
    check_value(None, Side | None, "x.side")
    for bad in ("sideways", 1, ["slower"], {"slower": 1}):
        with pytest.raises(StorageError, match="expected one of slower, faster"):
            check_value(bad, Side, "x.side")


def test_a_verdict_keeps_its_typed_why_through_the_record(tmp_path: Path) -> None:
    from perfsuite.model import Because, Why
    from perfsuite.store.records import load_record

    why = Why(Because.WITHIN_NOISE, ci_width=0.4, noise_p=0.3, alpha=0.05)
    r = replace(result("t", (1.0, 2.0)), baseline=BaselineVerdict("ok", ratio=0.9, why=why))
    record = RunRecord("r1", "2026-01-01T00:00:00+00:00", {"name": "cpu"}, {}, (r,))
    path = write_json_atomic(tmp_path / "cpu" / "r1.json", record.to_dict())
    stored = json.loads(path.read_text())["results"][0]["baseline"]["why"]
    assert stored["because"] == "within-noise" and stored["noise_p"] == 0.3
    assert load_record(path) == record
    data = json.loads(path.read_text())
    data["results"][0]["baseline"]["why"]["because"] = "within-reason"
    path.write_text(json.dumps(data))
    with pytest.raises(StorageError, match=r"baseline\.why\.because: expected one of"):
        load_record(path)


def test_a_version_1_record_is_read_under_the_new_names_and_written_as_the_current_one(
    tmp_path: Path,
) -> None:
    from perfsuite.model import SCHEMA_VERSION, FlagKind, NoiseFlag
    from perfsuite.store.records import load_record

    data = json.loads((FIXTURES / "run-record-v1.json").read_text())
    assert data["schema_version"] == 1 and SCHEMA_VERSION == 4
    data["results"][0]["baseline"].update(
        guards=["under foreign load"],
        bound="slower",
        held="while the CPUs' link changed state",
        blind="cannot detect a 5% change with 5 samples",  # a sentence: not read
    )
    path = tmp_path / "cpu" / "old.json"
    path.parent.mkdir()
    path.write_text(json.dumps(data))
    verdict = load_record(path).results[0].baseline
    assert verdict.noise_flags == (NoiseFlag(FlagKind.OTHER, text="under foreign load"),)
    assert verdict.judged_against_bound == "slower"
    assert verdict.bound_because == NoiseFlag(
        FlagKind.OTHER, text="while the CPUs' link changed state"
    )
    assert verdict.cannot_detect is None and verdict.why is None
    written = load_record(path).to_dict()
    assert written["schema_version"] == SCHEMA_VERSION
    stored = written["results"][0]["baseline"]
    assert not {"guards", "bound", "held", "blind"} & set(stored)
    assert stored["noise_flags"] == [{"kind": "other", "text": "under foreign load"}]
    again = write_json_atomic(tmp_path / "cpu" / "new.json", written)
    assert load_record(again).results[0].baseline == verdict
    # An old name is checked as the new one is.
    data["results"][0]["baseline"]["guards"] = "under foreign load"
    path.write_text(json.dumps(data))
    with pytest.raises(StorageError, match=r"baseline\.noise_flags: expected a list"):
        load_record(path)


@pytest.mark.parametrize("kind", ["fifo", "directory", "socket", "link-to-fifo"])
def test_an_atomic_write_refuses_a_target_that_is_not_a_regular_file(
    tmp_path: Path, kind: str
) -> None:
    """Issue 63, case 5: the rename would put a regular file where a device or FIFO was."""
    import socket
    import stat

    target = tmp_path / "out"
    real = tmp_path / "real"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "directory":
        target.mkdir()
    elif kind == "socket":
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(target))
    else:
        os.mkfifo(real)
        target.symlink_to(real)
    before = os.stat(target).st_mode
    with pytest.raises(StorageError, match="not a regular file"):
        write_json_atomic(target, {"a": 1})
    assert stat.S_IFMT(os.stat(target).st_mode) == stat.S_IFMT(before)
    assert not list(tmp_path.glob(".*.tmp")), "no temporary file is left behind"


def test_an_atomic_write_replaces_a_regular_file(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("old")
    write_json_atomic(target, {"a": 1})
    assert json.loads(target.read_text()) == {"a": 1}
