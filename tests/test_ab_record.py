"""An A/B's record read back (:mod:`perfsuite.ab.record`) and its page rendered again.

``perfsuite report ab.json`` must draw the page the A/B drew, from the record alone, and
refuse a record that is not whole or that was edited into disagreeing with its own rounds.
"""

from __future__ import annotations

import html
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from test_ab import CHECKS, FakeSides

from perfsuite import cli
from perfsuite.ab import Outcome, decide_exit, gather, rounds, stacks
from perfsuite.ab.record import read_outcome
from perfsuite.errors import StorageError
from perfsuite.report import ab as report_ab

ROOT = Path(__file__).resolve().parents[1]
H200 = sorted((ROOT / "lab" / "gpu-runs" / "h200").glob("ab-*.json"))


def _outcome(slowdown: float = 0.2, fail: set[tuple[int, str]] | None = None) -> Outcome:
    sides = FakeSides(CHECKS, slowdown=slowdown, noise=0.02, seed=5, fail=fail)
    session = rounds.run_rounds(
        rounds.one_then_the_other(sides), rounds.Plan(min_rounds=3, max_rounds=6), clock=sides.clock
    )
    checks, only_in, unhealthy = gather(session.states, session.runs)
    stack = stacks.Stack("x", "python", sys.executable, env=(("OMP_NUM_THREADS", "1"),))
    return Outcome(
        "id", "now", {"A": stack, "B": stack}, {"A": {"x": 1}, "B": {"x": 2}},
        (("software.numpy.version", "2.1.0", "2.2.0"),), False, rounds.Plan(), ("suites/",),
        ("-p", "x"), session, checks, only_in, unhealthy, (), frozenset({"regressed"}),
        decide_exit(checks, "", frozenset({"regressed"})), notes=("a note",),
    )  # fmt: skip


def _written(tmp_path: Path, result: Outcome) -> Path:
    path = tmp_path / "ab.json"
    path.write_text(json.dumps(result.to_dict(), indent=1))
    return path


@pytest.mark.parametrize("fail", [None, {(2, "B")}])
def test_a_record_reads_back_into_the_outcome_that_wrote_it(
    tmp_path: Path, fail: set[tuple[int, str]] | None
) -> None:
    result = _outcome(fail=fail)
    path = _written(tmp_path, result)
    again = read_outcome(path)
    assert again.record == path
    assert json.loads(json.dumps(again.to_dict())) == json.loads(path.read_text())
    assert report_ab.page(again) == report_ab.page(result)
    assert report_ab.verdict_line(again) == report_ab.verdict_line(result)


def test_perfsuite_report_renders_an_ab_record_as_the_ab_did(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = _outcome()
    path = _written(tmp_path, result)
    assert cli.main(["report", str(path), "-o", str(tmp_path / "page.html")]) == 0
    assert (tmp_path / "page.html").read_text() == report_ab.page(result)
    assert "HTML report:" in capsys.readouterr().out
    assert cli.main(["report", str(path), "--baseline", str(path)]) != 0
    assert "holds both sides" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["checks"][0].update(ratio=2.0), r"checks\[0\]\.ratio: 2\.0, but its rounds"),
        (lambda d: d["checks"][0].pop("verdict"), r"checks\[0\]: no 'verdict'"),
        (lambda d: d["checks"][0].update(verdict="fine"), "'fine' is not one of"),
        (lambda d: d["checks"][0].update(rounds=[1]), "1 rounds for"),
        (lambda d: d["rounds"][0].update(side="C"), "neither A nor B"),
        (lambda d: d["rounds"][0]["readings"].clear() or d.update(order=["AA"]), "not AB or BA"),
        (lambda d: d["plan"].update(min_rounds=1), "plan: an A/B needs at least 2 rounds"),
        (lambda d: d.update(exit_status=True), "exit_status: expected int, found True"),
        (lambda d: d.update(schema="perfsuite-run"), "schema is 'perfsuite-run'"),
        (lambda d: d["stacks"].pop("B"), "stacks.B: no 'spec'"),
    ],
)
def test_a_record_not_whole_or_at_odds_with_its_rounds_is_refused(
    tmp_path: Path, edit: Any, message: str
) -> None:
    data = json.loads(json.dumps(_outcome().to_dict()))
    edit(data)
    path = tmp_path / "ab.json"
    path.write_text(json.dumps(data))
    with pytest.raises(StorageError, match=message):
        read_outcome(path)


def test_a_record_of_another_version_or_not_json_is_refused(tmp_path: Path) -> None:
    data = _outcome().to_dict() | {"schema_version": 9}
    path = tmp_path / "ab.json"
    path.write_text(json.dumps(data))
    with pytest.raises(StorageError, match="schema_version 9"):
        read_outcome(path)
    path.write_text('{"schema": "perfsuite-ab", "schema_version": 1')
    with pytest.raises(StorageError):
        read_outcome(path)


@pytest.mark.parametrize("path", H200, ids=lambda p: p.stem)
def test_the_committed_h200_ab_records_render_their_pages(path: Path) -> None:
    data = json.loads(path.read_text())
    result = read_outcome(path)
    assert result.exit_status == data["exit_status"]
    assert [c.verdict for c in result.checks] == [c["verdict"] for c in data["checks"]]
    text = report_ab.page(result)
    assert text.count("<svg") == 1 and html.escape(report_ab.verdict_line(result)) in text


hypothesis = pytest.importorskip("hypothesis", reason="pip install 'perfsuite[dev]' to fuzz")
import test_fuzz_loaders as loaders  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

RECORD = json.loads(json.dumps(_outcome().to_dict()))
PATHS = loaders.paths(RECORD)


@settings(
    max_examples=loaders.FUZZ_EXAMPLES * 3,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(where=st.sampled_from(PATHS), value=loaders.hostile, delete=st.booleans())
def test_a_mutated_ab_record_renders_or_is_refused_with_a_storage_error(
    tmp_path: Path, where: tuple[Any, ...], value: Any, delete: bool
) -> None:
    path = tmp_path / "ab.json"
    path.write_text(json.dumps(loaders.mutated(RECORD, where, value, delete)))
    try:
        result = read_outcome(path)
    except StorageError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
        return
    assert html.escape(report_ab.verdict_line(result)) in report_ab.page(result)
