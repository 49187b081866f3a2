"""Property-based fuzzing of every loader and command: a bad file is one line, never a traceback.

Hypothesis mutates a valid run record and a valid baseline: it picks a place in the JSON
tree and puts there a value of another kind (a huge integer, 1.7e308, 5e-324, text, a
boolean, nothing, a list, deep nesting), or removes the key.  Every command that reads the
file must then either work or exit with a usage error naming it, and a pytest run against
a mutated baseline must end without INTERNALERROR.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("hypothesis", reason="pip install 'perfsuite[dev]' (Hypothesis) to fuzz")
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfsuite.cli import main as cli
from perfsuite.errors import StorageError
from perfsuite.judge import outcome
from perfsuite.model import RunRecord
from perfsuite.model.baseline import MAX_WINDOW, MIN_WINDOW
from perfsuite.store.baseline import BaselineStore
from perfsuite.store.records import OUTCOMES, load_record
from perfsuite.store.validate import is_timestamp

FIXTURES = Path(__file__).parent / "fixtures"
RECORD = json.loads((FIXTURES / "run-a-tf220.json").read_text())
# Every part of a record a reader acts on, so that mutations reach each of them.
RECORD["incomplete"] = ""
RECORD["crashed"] = [{"id": "t.py::test_x", "phase": "call", "message": "RuntimeError: x"}]
RECORD["settings"] = {
    **RECORD.get("settings", {}),
    "fail_on": ["fail", "regressed"],
    "policy": {"mode": "quick", "repetitions": 5},
}
RECORD["results"][0]["waiver"] = {"test": "*", "reason": "r", "expires": None, "status": "stale"}
RECORD["results"][0]["noise"] = {"flags": ["under foreign load (1.00 cores)"], "foreign_cores": 1.0}
RECORD["derived"] = json.loads((FIXTURES / "report-run.json").read_text()).get("derived", {})
PROFILE = RECORD["hardware_profile"]["name"]
DEEP = "[" * 5000 + "]" * 5000
# Examples per loader: 20 by default (the unit tier stays quick); CI runs 300 through the
# variable, and a developer may raise it further.
FUZZ_EXAMPLES = int(os.environ.get("PERFSUITE_FUZZ_EXAMPLES", "20"))

hostile_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([10**400, 1.7e308, -1.7e308, 5e-324, 0, -1, 1e-30, 2**63, "1e400"]),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from(["123", "fast", "", "NaN", "\u202e", "<b>x</b>", "[l](javascript:x)"]),
)
hostile = st.recursive(
    hostile_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=6,
)


def paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON tree (dict keys and list indices)."""
    out = [prefix] if prefix else []
    if isinstance(data, dict):
        for k, v in data.items():
            out += paths(v, (*prefix, k))
    elif isinstance(data, list):
        for i, v in enumerate(data[:3]):
            out += paths(v, (*prefix, i))
    return out


RECORD_PATHS = paths(RECORD)


def mutated(data: Any, where: tuple[Any, ...], value: Any, delete: bool) -> Any:
    copy = json.loads(json.dumps(data))
    node = copy
    for key in where[:-1]:
        node = node[key]
    if delete and isinstance(node, dict):
        node.pop(where[-1], None)
    else:
        node[where[-1]] = value
    return copy


def dump(data: Any) -> str:
    """JSON text of ``data``; the marker string DEEP becomes real deep nesting."""
    return json.dumps(data, allow_nan=True).replace(json.dumps(DEEP), DEEP)


def run_cli(args: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli(args)
    return code, err.getvalue()


COUNTS: dict[str, int] = {}


def _count(name: str) -> None:
    COUNTS[name] = COUNTS.get(name, 0) + 1


def _write_mutant(
    tmp_path_factory: pytest.TempPathFactory, where: tuple[Any, ...], value: Any, delete: bool
) -> tuple[Path, Path, bool]:
    """A mutated record in a fresh report folder: (its folder, its path, whether it loads)."""
    tmp = tmp_path_factory.mktemp("rec")
    bad = tmp / "reports" / PROFILE / "bad.json"
    bad.parent.mkdir(parents=True)
    mutant = mutated(RECORD, where, value, delete)
    mutant["crashed"] = mutant.get("crashed") if where[:1] == ("crashed",) else []
    bad.write_text(dump(mutant))
    try:
        record = load_record(bad)
        loaded = True
    except StorageError:
        loaded = False
    else:
        _assert_record_invariants(record)
    _count("record")
    return tmp, bad, loaded


def _assert_record_invariants(record: RunRecord) -> None:
    """What a record that loads promises its readers (issue 63, case 23)."""
    assert is_timestamp(record.created)
    assert record.duration_s is None or record.duration_s >= 0
    assert record.incomplete.strip().lower() not in ("no", "false", "yes", "true")
    for r in record.results:
        assert r.outcome in OUTCOMES and min(r.seconds, default=0) >= 0


def _run_commands(commands: list[list[str]], bad: Path, loaded: bool) -> None:
    for args in commands:
        code, err = run_cli(args)  # any exception fails the test with its traceback
        _count(args[0])
        assert code in (
            outcome.EXIT_OK,
            outcome.EXIT_REGRESSED,
            outcome.EXIT_USAGE,
            outcome.EXIT_INCONCLUSIVE,
        ), (args, code)
        if not loaded and args[0] != "history":
            assert code == outcome.EXIT_USAGE and str(bad) in err, (args, err)


MUTATION = {
    "where": st.sampled_from(RECORD_PATHS),
    "value": st.one_of(hostile, st.just(DEEP)),
    "delete": st.booleans(),
}


@settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(**MUTATION)
def test_a_mutated_record_through_every_command(
    tmp_path_factory: pytest.TempPathFactory, where: tuple[Any, ...], value: Any, delete: bool
) -> None:
    tmp, bad, loaded = _write_mutant(tmp_path_factory, where, value, delete)
    good = FIXTURES / "run-b-tf221.json"
    commands = [
        ["compare", str(bad), str(good)],
        ["compare", str(good), str(bad)],
        ["baseline", "accept", str(bad), "--baseline-dir", str(tmp / "baselines")],
        ["history", "--report-dir", str(tmp / "reports"), "--profile", PROFILE],
    ]
    _run_commands(commands, bad, loaded)
    if loaded and (tmp / "baselines").exists():
        # What accept wrote reads back.
        BaselineStore(tmp / "baselines").load(PROFILE)


# The HTML report draws every chart the record feeds (about 0.3 s an example, 30 times the
# other commands): a quarter of the examples, so CI's 300 give it 75 and a newcomer's 20
# give it 8.
@settings(
    max_examples=max(8, FUZZ_EXAMPLES // 4),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(**MUTATION)
def test_a_mutated_record_renders_or_names_itself(
    tmp_path_factory: pytest.TempPathFactory, where: tuple[Any, ...], value: Any, delete: bool
) -> None:
    tmp, bad, loaded = _write_mutant(tmp_path_factory, where, value, delete)
    report = ["report", str(bad), "-o", str(tmp / "r.html"), "--report-dir", str(tmp / "reports")]
    _run_commands([report], bad, loaded)


def _baseline_data(tmp: Path) -> dict[str, Any]:
    store = BaselineStore(tmp)
    record = load_record(FIXTURES / "run-a-tf220.json")
    store.save(PROFILE, list(record.results), record.run_id)
    return json.loads(store.path(PROFILE).read_text())


@settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_a_mutated_baseline_loads_cleanly_or_names_itself(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    tmp = tmp_path_factory.mktemp("base")
    raw = _baseline_data(tmp)
    where = data.draw(st.sampled_from(paths(raw)))
    value = data.draw(st.one_of(hostile, st.just(DEEP)))
    path = BaselineStore(tmp).path(PROFILE)
    path.write_text(dump(mutated(raw, where, value, data.draw(st.booleans()))))
    _count("baseline")
    try:
        baseline = BaselineStore(tmp).load(PROFILE)
    except StorageError as exc:
        assert str(path) in str(exc)
        return
    # A header that loads is one a save can use (issue 63, cases 19 and 20).
    header = json.loads(path.read_text())
    window = header.get("window")
    assert window is None or MIN_WINDOW <= window <= MAX_WINDOW
    assert isinstance(header.get("run_policies", {}), dict)
    for entry in baseline.entries.values():
        assert all(not r.created or is_timestamp(r.created) for r in entry.runs)
    # A baseline that loads can be judged against: every entry's levels compute.
    from perfsuite.judge import stats

    for entry in baseline.entries.values():
        lv = stats.levels(entry.run_samples, higher_is_better=entry.higher_is_better)
        stats.compare([40.0, 41.0, 39.0], entry.run_samples, higher_is_better=True, lv=lv)
    # And the next accept merges into it, or refuses it by name.
    code, err = run_cli(
        ["baseline", "accept", str(FIXTURES / "run-b-tf221.json"), "--baseline-dir", str(tmp)]
    )
    assert code == 0 or (code == outcome.EXIT_USAGE and str(path) in err), (code, err)


SLEEP_CHECK = """
import time
from perfsuite.measure.loop import Workload
from perfsuite.model import Work

def test_stream(perf):
    perf.measure(Workload(
        check="toy", params={}, metric="bandwidth", unit="GB/s",
        work=Work(1.0, "B"), run=lambda: time.sleep(0.0005),
    ))
"""


# A whole pytest session an example (about 0.15 s): a quarter of the examples too, 10 at
# the least.
@settings(
    max_examples=max(10, FUZZ_EXAMPLES // 4),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_a_pytest_run_against_a_mutated_baseline_never_ends_in_internalerror(
    pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    shutil.rmtree(pytester.path / "baselines", ignore_errors=True)
    pytester.makeini(
        "[pytest]\nperf_quick = true\nperf_hw = slowgpu\nperf_profile_dir = profiles\n"
        "perf_allow_missing_device = true\n"
    )
    if not (pytester.path / "profiles").exists():
        shutil.copytree(FIXTURES / "profiles", pytester.path / "profiles")
    pytester.makepyfile(test_toy=SLEEP_CHECK)
    tmp = tmp_path_factory.mktemp("pb")
    record = load_record(FIXTURES / "run-a-tf220.json")
    from dataclasses import replace

    result = replace(record.results[0], id="test_toy.py::test_stream")
    store = BaselineStore(tmp)
    store.save("slowgpu", [result], "r1")
    raw = json.loads(store.path("slowgpu").read_text())
    where = data.draw(st.sampled_from([p for p in paths(raw) if p and p[0] == "entries"]))
    value = data.draw(st.one_of(hostile, st.just(DEEP)))
    target = pytester.path / "baselines" / "slowgpu" / "baseline.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(dump(mutated(raw, where, value, data.draw(st.booleans()))))
    _count("pytest")
    run = pytester.runpytest()
    text = run.stdout.str() + run.stderr.str()
    assert "INTERNALERROR" not in text and "Traceback" not in text, text[-3000:]
    assert run.ret in (0, 1, 4), text[-2000:]
    if run.ret == pytest.ExitCode.USAGE_ERROR:
        assert str(target) in text


toml_values = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.booleans(),
    st.lists(st.integers(), max_size=3),
    st.dates(),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)


def toml_text(table: dict[str, Any]) -> str:
    """A small TOML writer for the fuzzed tables (values as tomllib would read them)."""
    import datetime as dt

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float):
            return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(repr(v), repr(v))
        if isinstance(v, dt.date):
            return v.isoformat()
        if isinstance(v, dict):
            return "{" + ", ".join(f"{json.dumps(k)} = {value(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return json.dumps(v) if isinstance(v, str) else str(v)

    lines, tables = [], []
    for key, v in table.items():
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for item in v:
                tables.append(
                    f"[[{key}]]\n"
                    + "\n".join(f"{json.dumps(k)} = {value(x)}" for k, x in item.items())
                )
        else:
            lines.append(f"{json.dumps(key)} = {value(v)}")
    return "\n".join(lines) + "\n\n" + "\n\n".join(tables) + "\n"


@settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    kind=st.sampled_from(["profile", "waivers", "tolerances"]),
    key=st.sampled_from(
        [
            "schema_version",
            "name",
            "kind",
            "waiver",
            "test",
            "reason",
            "expires",
            "default",
            "checks",
            "memory",
            "compute",
            "description",
            "x",
        ]
    ),
    value=toml_values,
    binary=st.booleans(),
)
def test_a_mutated_toml_file_loads_cleanly_or_names_itself(
    tmp_path_factory: pytest.TempPathFactory, kind: str, key: str, value: Any, binary: bool
) -> None:
    from perfsuite.errors import PerfsuiteError
    from perfsuite.hardware.profile import load_profile
    from perfsuite.store.rules import load_tolerances, load_waivers

    tmp = tmp_path_factory.mktemp("toml")
    base: dict[str, Any] = {
        "profile": {
            "schema_version": 1,
            "name": "fz",
            "kind": "cpu",
            "description": "d",
            "source": "s",
            "memory": {"bandwidth_gbs": 10.0},
        },
        "waivers": {"schema_version": 1, "waiver": [{"test": "*", "reason": "r"}]},
        "tolerances": {"schema_version": 1, "default": 0.1, "checks": {"*x*": 0.2}},
    }[kind]
    if key == "test" or key == "reason" or key == "expires":
        if kind == "waivers":
            base["waiver"][0][key] = value
    else:
        base[key] = value
    name = {"profile": "fz.toml", "waivers": "waivers.toml", "tolerances": "tolerances.toml"}[kind]
    path = tmp / name
    try:
        text = toml_text(base)
    except (TypeError, ValueError):
        return
    path.write_bytes(b"\xff\xfe" + text.encode() if binary else text.encode())
    _count(kind)
    try:
        if kind == "profile":
            load_profile(path)
        elif kind == "waivers":
            load_waivers(tmp)
        else:
            load_tolerances(tmp)
    except PerfsuiteError as exc:
        assert str(path) in str(exc) and "\n" not in str(exc)
