"""Bad input, table-driven: input, exit status, message, and no stored file changed.

Two tables: the ``perfsuite`` command (run in-process) and the pytest plugin (run through
pytester, in a project with one real check and a stored baseline).  Before each row every
file in the project is hashed; afterwards each must be byte-for-byte the same, and a row that
is refused must not have created anything under ``baselines/``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from perfsuite import cli
from perfsuite.judge import outcome
from perfsuite.store.baseline import BaselineStore
from perfsuite.store.records import load_record

FIXTURES = Path(__file__).parent / "fixtures"
RECORD = FIXTURES / "report-run.json"
PROFILE = "slowgpu"
NODE = "test_toy.py::test_toy"

USAGE = outcome.EXIT_USAGE  # the perfsuite command's usage-error status
PYTEST_USAGE = pytest.ExitCode.USAGE_ERROR  # 4

Setup = Callable[[Path], None]


@dataclass(frozen=True)
class Row:
    """One bad input: what is run, in what project, and what must come out."""

    id: str
    args: tuple[str, ...]
    exit: int
    fragment: str
    setup: tuple[Setup, ...] = field(default=())

    def __str__(self) -> str:
        return self.id


# ----------------------------------------------------------------------------- project files


def _record() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(RECORD.read_text())
    return data


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def record_with(name: str, mutate: Callable[[dict[str, Any]], None]) -> Setup:
    """A run record ``name`` made from the fixture record by ``mutate``."""

    def setup(root: Path) -> None:
        data = _record()
        mutate(data)
        _write_json(root / name, data)

    return setup


def good_record(root: Path) -> None:
    """The fixture run record, as ``good.json``."""
    shutil.copy(RECORD, root / "good.json")


def text_file(name: str, text: str) -> Setup:
    """A file with exactly this text."""

    def setup(root: Path) -> None:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)

    return setup


def _first_result(data: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = data["results"][0]
    return result


def _set_samples(values: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        _first_result(data)["samples"] = values

    return mutate


def _set_profile_name(value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        if value is None:
            del data["hardware_profile"]["name"]
        else:
            data["hardware_profile"]["name"] = value

    return mutate


def _set(*path: Any, value: Any) -> Callable[[dict[str, Any]], None]:
    """Put ``value`` at ``path`` in a record (ints index lists)."""

    def mutate(data: dict[str, Any]) -> None:
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return mutate


DEEP = "[" * 100_000 + "]" * 100_000


def deep_record(name: str) -> Setup:
    """A run record whose environment nests 100,000 lists deep."""

    def setup(root: Path) -> None:
        text = json.dumps(_record()).replace(
            '"environment": {', f'"environment": {{"x": {DEEP}, ', 1
        )
        (root / name).write_text(text)

    return setup


def raw_record(name: str, old: str, new: str) -> Setup:
    """The fixture record's text with its first ``old`` replaced by ``new`` (raw JSON)."""

    def setup(root: Path) -> None:
        (root / name).write_text(RECORD.read_text().replace(old, new, 1))

    return setup


def fifo(name: str) -> Setup:
    """A FIFO (named pipe) where an output would go: it must stay one."""

    def setup(root: Path) -> None:
        os.mkfifo(root / name)

    return setup


def directory(name: str) -> Setup:
    """An empty directory where an output would go."""

    def setup(root: Path) -> None:
        (root / name).mkdir(parents=True)

    return setup


def devcpu_baseline(**header: Any) -> Setup:
    """A valid one-entry baseline of the fixture record's profile, with ``header`` changed."""
    data = {
        "schema_version": 2, "hardware_profile": "devcpu", "updated": "", "run_policies": {},
        "entries": {"x": {"metric": "m", "unit": "u", "higher_is_better": True,
                          "runs": [{"run_id": "r", "samples": [1.0]}]}},
    }  # fmt: skip
    return text_file("baselines/devcpu/baseline.json", json.dumps({**data, **header}))


def _flip_direction(data: dict[str, Any]) -> None:
    """Run ``flipped`` with its first check's direction the other way (same unit)."""
    data["run_id"] = "flipped"
    first = _first_result(data)
    first["higher_is_better"] = not first["higher_is_better"]


def good_in_baseline(root: Path) -> None:
    """The fixture record accepted into baselines/devcpu."""
    record = load_record(RECORD)
    BaselineStore(root / "baselines").save("devcpu", list(record.results), record.run_id)


BINARY = "\xff\xfe\x00\x81 not text"


def binary_file(name: str) -> Setup:
    """A file of bytes that are not UTF-8."""

    def setup(root: Path) -> None:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(BINARY.encode("latin-1"))

    return setup


def stored_baseline(root: Path) -> None:
    """A valid baseline of the toy check under baselines/slowgpu, saved through the store."""
    record = load_record(RECORD)
    result = copy.deepcopy(record.results[0])
    object.__setattr__(result, "id", NODE)
    BaselineStore(root / "baselines").save(PROFILE, [result], "run-good", {})


def poisoned_baseline(mutate: Callable[[dict[str, Any]], None]) -> Setup:
    """The stored baseline with its entry changed by ``mutate`` (written as raw JSON)."""

    def setup(root: Path) -> None:
        stored_baseline(root)
        path = root / "baselines" / PROFILE / "baseline.json"
        data = json.loads(path.read_text())
        mutate(data["entries"][NODE])
        path.write_text(json.dumps(data))  # json.dumps writes NaN and Infinity as bare words

    return setup


def poisoned_header(**header: Any) -> Setup:
    """The stored baseline with its header's fields set to ``header``."""

    def setup(root: Path) -> None:
        stored_baseline(root)
        path = root / "baselines" / PROFILE / "baseline.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **header}))

    return setup


def _run_samples(values: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(entry: dict[str, Any]) -> None:
        entry["runs"][0]["samples"] = values

    return mutate


# ----------------------------------------------------------------------------- the CLI table

CLI_ROWS = [
    Row("compare-alpha-5", ("compare", "good.json", "good.json", "--alpha", "5"), USAGE,
        "expected a fraction between 0 and 1", (good_record,)),
    Row("compare-negative-tolerance", ("compare", "good.json", "good.json", "--tolerance", "-3"),
        USAGE, "expected a fraction between 0 and 1", (good_record,)),
    Row("compare-one-run", ("compare", "good.json"), USAGE, "at least one run before", (good_record,)),
    Row("compare-missing-file", ("compare", "good.json", "nope.json"), USAGE, "nope.json",
        (good_record,)),
    Row("compare-bad-fail-on", ("compare", "good.json", "good.json", "--fail-on", "bogus"),
        USAGE, "bogus", (good_record,)),
    Row("history-negative-tolerance", ("history", "--tolerance", "-1"), USAGE,
        "expected a fraction between 0 and 1"),
    Row("history-no-reports", ("history", "--report-dir", "missing"), USAGE, "missing"),
    Row("report-truncated", ("report", "cut.json"), USAGE, "cut.json",
        (text_file("cut.json", RECORD.read_text()[:500]),)),
    Row("report-not-json", ("report", "junk.json"), USAGE, "junk.json",
        (text_file("junk.json", "<html>not json</html>"),)),
    Row("report-future-schema", ("report", "future.json"), USAGE, "schema",
        (record_with("future.json", lambda d: d.update(schema_version=99)),)),
    Row("accept-path-traversal", ("baseline", "accept", "evil.json"), USAGE, "not a plain name",
        (record_with("evil.json", _set_profile_name("../../outside")),)),
    Row("accept-no-profile-name", ("baseline", "accept", "anon.json"), USAGE, "hardware profile",
        (record_with("anon.json", _set_profile_name(None)),)),
    Row("accept-profile-name-not-text", ("baseline", "accept", "num.json"), USAGE,
        "not a plain name", (record_with("num.json", _set_profile_name(42)),)),
    Row("accept-empty-samples", ("baseline", "accept", "empty.json"), USAGE,
        "finite positive", (record_with("empty.json", _set_samples([])),)),
    Row("accept-nan-sample", ("baseline", "accept", "nan.json"), USAGE, "NaN is not a number",
        (record_with("nan.json", _set_samples([1.0, float("nan")])),)),
    Row("accept-infinite-sample", ("baseline", "accept", "inf.json"), USAGE,
        "Infinity is not a number",
        (record_with("inf.json", _set_samples([float("inf")])),)),
    Row("accept-negative-sample", ("baseline", "accept", "neg.json"), USAGE, "finite positive",
        (record_with("neg.json", _set_samples([-1.0, 2.0])),)),
    Row("accept-zero-sample", ("baseline", "accept", "zero.json"), USAGE, "finite positive",
        (record_with("zero.json", _set_samples([0.0])),)),
    Row("accept-string-samples", ("baseline", "accept", "str.json"), USAGE, "str.json",
        (record_with("str.json", _set_samples(["fast", "slow"])),)),
    Row("accept-samples-not-a-list", ("baseline", "accept", "obj.json"), USAGE, "obj.json",
        (record_with("obj.json", _set_samples({"a": 1})),)),
    Row("accept-no-match", ("baseline", "accept", "good.json", "-k", "nothing-like-this"), USAGE,
        "no result matches", (good_record,)),
    Row("accept-zero-runs", ("baseline", "accept", "good.json", "--runs", "0"), USAGE,
        "expected a whole number from 1 to 1000", (good_record,)),
    Row("accept-into-poisoned-baseline", ("baseline", "accept", "good.json"), USAGE,
        "NaN is not a number",
        (good_record, text_file("baselines/devcpu/baseline.json", json.dumps({
            "schema_version": 2, "hardware_profile": "devcpu", "updated": "", "run_policies": {},
            "entries": {"x": {"metric": "m", "unit": "u", "higher_is_better": True,
                              "runs": [{"run_id": "r", "samples": [float("nan")]}]}}}))),),
    # Issue 43, item 7: records whose values the loader must refuse, through each command.
    Row("record-sample-10e400", ("compare", "good.json", "big.json"), USAGE,
        "an integer of 401 digits", (good_record, raw_record("big.json", '"samples": [', '"samples": [' + "1" + "0" * 400 + ", ")),),
    Row("record-5000-digit-integer", ("report", "long.json", "-o", "out.html"), USAGE,
        "an integer of 5000 digits", (raw_record("long.json", '"duration_s": ', '"duration_s": ' + "7" * 5000 + ", \"x\": "),)),
    Row("record-nested-100000-deep", ("report", "deep.json", "-o", "out.html"), USAGE,
        "nested too deeply", (deep_record("deep.json"),)),
    Row("record-nested-100000-deep-accept", ("baseline", "accept", "deep.json"), USAGE,
        "nested too deeply", (deep_record("deep.json"),)),
    Row("record-id-a-list", ("compare", "good.json", "id.json"), USAGE, "expected text",
        (good_record, record_with("id.json", _set("results", 0, "id", value=["a"]))),),
    Row("record-id-a-number", ("baseline", "accept", "id.json"), USAGE, "expected text",
        (record_with("id.json", _set("results", 0, "id", value=7)),)),
    Row("record-median-text", ("report", "m.json", "-o", "out.html"), USAGE,
        "summary.median: expected a finite number", (record_with("m.json", _set("results", 0, "summary", "median", value="fast")),)),
    Row("record-waiver-text", ("compare", "good.json", "w.json"), USAGE, "waiver: expected an object, got 'abc'",
        (good_record, record_with("w.json", _set("results", 0, "waiver", value="abc")))),
    Row("record-duration-text", ("report", "d.json", "-o", "out.html"), USAGE,
        "duration_s: expected a finite number", (record_with("d.json", _set("duration_s", value="long")),)),
    # Item 9: what accept would write that breaks the next run.
    Row("accept-metric-null", ("baseline", "accept", "n.json"), USAGE, "metric: expected text",
        (record_with("n.json", _set("results", 0, "metric", value=None)),)),
    Row("accept-unit-a-number", ("baseline", "accept", "u.json"), USAGE, "unit: expected text",
        (record_with("u.json", _set("results", 0, "unit", value=5)),)),
    Row("accept-samples-text", ("baseline", "accept", "t.json"), USAGE, "samples: expected a list",
        (record_with("t.json", _set_samples("123")),)),
    Row("accept-samples-booleans", ("baseline", "accept", "b.json"), USAGE,
        "expected a finite number, got True", (record_with("b.json", _set_samples([True, 1.0])),)),
    # Item 3 and 11: the same record twice; an output that would overwrite an input.
    Row("compare-same-record-twice", ("compare", "good.json", "good.json"), USAGE,
        "each run record counts once", (good_record,)),
    Row("compare-html-over-input", ("compare", "a.json", "good.json", "--html", "good.json"),
        USAGE, "that is an input of this command", (good_record, record_with("a.json", _set("run_id", value="other")))),
    Row("report-output-over-input", ("report", "good.json", "-o", "good.json"), USAGE,
        "that is an input of this command", (good_record,)),
    Row("profiles-show-unknown", ("profiles", "show", "no-such-gpu"), USAGE, "no-such-gpu"),
    Row("profiles-show-traversal", ("profiles", "show", "../../etc/passwd"), USAGE,
        "../../etc/passwd"),
    Row("unknown-command", ("frobnicate",), USAGE, "invalid choice"),
    # Issue 63, case 5: an atomic writer never replaces what is not a regular file.
    Row("case05-report-o-fifo", ("report", "good.json", "-o", "out.fifo"), USAGE,
        "out.fifo: is a FIFO, not a regular file", (good_record, fifo("out.fifo"))),
    Row("case05-compare-html-fifo", ("compare", "a.json", "good.json", "--html", "page"), USAGE,
        "page: is a FIFO, not a regular file",
        (good_record, record_with("a.json", _set("run_id", value="other")), fifo("page"))),
    Row("case05-report-o-directory", ("report", "good.json", "-o", "out"), USAGE,
        "out: is a directory, not a regular file", (good_record, directory("out"))),
    # Issue 63, case 3 (must be true 3): an empty path is a usage error.
    Row("case03-report-o-empty", ("report", "good.json", "-o", ""), USAGE,
        "argument -o/--output: empty path", (good_record,)),
    Row("case03-compare-html-empty", ("compare", "a.json", "good.json", "--html", ""), USAGE,
        "argument --html: empty path",
        (good_record, record_with("a.json", _set("run_id", value="other")))),
    Row("case03-report-baseline-empty", ("report", "good.json", "--baseline", ""), USAGE,
        "argument --baseline: empty path", (good_record,)),
    Row("case03-accept-baseline-dir-empty", ("baseline", "accept", "good.json",
        "--baseline-dir", ""), USAGE, "argument --baseline-dir: empty path", (good_record,)),
    Row("case03-history-report-dir-empty", ("history", "--report-dir", ""), USAGE,
        "argument --report-dir: empty path"),
    # Issue 63, case 19-21: a baseline header accept cannot use, and a window out of range.
    Row("case19-run-policies-a-list", ("baseline", "accept", "good.json"), USAGE,
        "baseline.json: corrupt baseline: 'run_policies' is not an object",
        (good_record, devcpu_baseline(run_policies=["r"]))),
    Row("case20-window-negative", ("baseline", "accept", "good.json"), USAGE,
        "'window' must be a whole number from 1 to 1000, got -3",
        (good_record, devcpu_baseline(window=-3))),
    Row("case20-window-text", ("baseline", "accept", "good.json"), USAGE,
        "'window' must be a whole number from 1 to 1000, got 'five'",
        (good_record, devcpu_baseline(window="five"))),
    Row("case21-runs-32-digits", ("baseline", "accept", "good.json", "--runs", "9" * 32), USAGE,
        "argument --runs: expected a whole number from 1 to 1000", (good_record,)),
    Row("case21-runs-1001", ("baseline", "accept", "good.json", "--runs", "1001"), USAGE,
        "argument --runs: expected a whole number from 1 to 1000, got '1001'", (good_record,)),
    # Issue 63, case 1: text a terminal would obey is refused where it is read.
    Row("case01-compare-escape-in-id", ("compare", "good.json", "esc.json"), USAGE,
        "id: holds the control character '\\x1b'",
        (good_record, record_with("esc.json", _set("results", 0, "id", value="t.py::x\x1b[2J")))),
    Row("case01-compare-newline-in-run-id", ("compare", "good.json", "nl.json"), USAGE,
        "run_id: holds the control character '\\n'",
        (good_record, record_with("nl.json", _set("run_id", value="b\nA: forged")))),
    Row("case01-report-escape-in-unit", ("report", "u.json", "-o", "u.html"), USAGE,
        "unit: holds the control character '\\x1b'",
        (record_with("u.json", _set("results", 0, "unit", value="GB/s\x1b]0;title\x07")),)),
    Row("case01-accept-escape-in-baseline-id", ("baseline", "accept", "good.json"), USAGE,
        "an id, metric or unit holds a control character",
        (good_record, devcpu_baseline(entries={"x\x1b[31m": {
            "metric": "m", "unit": "u", "higher_is_better": True,
            "runs": [{"run_id": "r", "samples": [1.0]}]}}))),
    # Issue 63, case 13: one check, one unit, two directions.
    Row("case13-compare-direction-flipped", ("compare", "good.json", "flip.json"), USAGE,
        "lower is better; one of them is wrong: refusing to compare",
        (good_record, record_with("flip.json", _flip_direction))),
    Row("case13-accept-direction-flipped", ("baseline", "accept", "flip.json"), USAGE,
        "lower is better; one of them is wrong: refusing to merge",
        (good_in_baseline, record_with("flip.json", _flip_direction))),
    # Issue 63, case 22: report --baseline judges like compare.
    Row("case22-report-baseline-other-profile", ("report", "good.json", "--baseline", "o.json"),
        USAGE, "refusing to compare runs of different hardware profiles: a100 against 'devcpu'",
        (good_record, record_with("o.json", lambda d: d.update(
            run_id="other", hardware_profile={**d["hardware_profile"], "name": "a100"})))),
    Row("case22-report-baseline-itself", ("report", "good.json", "--baseline", "good.json"),
        USAGE, "each run record counts once", (good_record,)),
    Row("case22-report-baseline-same-run", ("report", "good.json", "--baseline", "copy.json"),
        USAGE, "the same run as copy.json", (good_record, record_with("copy.json", lambda d: None))),
    # Issue 63, case 23: a record's time, durations, outcome and incomplete flag.
    Row("case23-created-yesterday", ("baseline", "accept", "c.json"), USAGE,
        "c.json: created: expected an ISO 8601 time", (record_with("c.json", _set("created", value="yesterday")),)),
    Row("case23-negative-seconds", ("compare", "good.json", "s.json"), USAGE,
        "n1-forward]': seconds must be >= 0, got -1.0",
        (good_record, record_with("s.json", _set("results", 0, "seconds", value=[-1.0, 1.0])))),
    Row("case23-negative-duration", ("report", "d.json", "-o", "out.html"), USAGE,
        "d.json: duration_s: expected seconds >= 0, got -5", (record_with("d.json", _set("duration_s", value=-5)),)),
    Row("case23-unknown-outcome", ("report", "o.json", "-o", "out.html"), USAGE,
        "outcome 'splendid' is unknown (one of", (record_with("o.json", _set("results", 0, "outcome", value="splendid")),)),
    Row("case23-incomplete-no", ("baseline", "accept", "i.json"), USAGE,
        "i.json: incomplete: expected why the run stopped early", (record_with("i.json", _set("incomplete", value="no")),)),
    # Review 1, D13: an empty -k matched every check.
    Row("review-D13-accept-k-empty", ("baseline", "accept", "good.json", "-k", ""), USAGE,
        "argument -k: empty value", (good_record,)),
    Row("review-D13-history-k-empty", ("history", "-k", " "), USAGE, "argument -k: empty value"),
    # Review 1, D14: a baseline header of the wrong types was accepted silently.
    Row("review-D14-window-null", ("baseline", "accept", "good.json"), USAGE,
        "'window' must be a whole number from 1 to 1000, got null",
        (good_record, devcpu_baseline(window=None))),
    Row("review-D14-updated-yesterday", ("baseline", "accept", "good.json"), USAGE,
        "corrupt baseline: 'updated' is not an ISO 8601 time, got 'yesterday'",
        (good_record, devcpu_baseline(updated="yesterday"))),
    Row("review-D14-run-policy-text", ("baseline", "accept", "good.json"), USAGE,
        "corrupt baseline: run_policies['r'] is not an object",
        (good_record, devcpu_baseline(run_policies={"r": "x"}))),
    # Review 1, D8: a policy value of the wrong kind, caught before it reaches a judgement.
    Row("review-D8-accept-run-policy-warmup-list", ("baseline", "accept", "good.json"), USAGE,
        "run_policies['r'] 'warmup_seconds' must be a number of seconds >= 0, got [1]",
        (good_record, devcpu_baseline(run_policies={"r": {"warmup_seconds": [1]}}))),
    Row("review-D8-accept-record-policy-text", ("baseline", "accept", "p.json"), USAGE,
        "its recorded policy 'warmup_seconds' must be a number of seconds >= 0, got 'x'",
        (record_with("p.json", _set("settings", "policy", value={"warmup_seconds": "x"})),)),
    # Review 1, D11: a profile's free text printed raw (escape codes, BEL, U+2028).
    Row("review-D11-profiles-description-escape", ("profiles", "--profile-dir", "profiles"),
        USAGE, "field 'description' holds the control character '\\x1b'",
        (text_file("profiles/bad.toml", 'schema_version = 1\nname = "bad"\nkind = "cpu"\n'
                   'description = "d\\u001b[2Jx\\u2028y"\nsource = "s"\n'),)),
    Row("review-D11-profiles-show-source-osc", ("profiles", "--profile-dir", "profiles", "show",
        "bad"), USAGE, "field 'source' holds the control character '\\x1b'",
        (text_file("profiles/bad.toml", 'schema_version = 1\nname = "bad"\nkind = "cpu"\n'
                   'description = "d"\nsource = "s\\u001b]0;t\\u0007"\n'),)),
    Row("review-D11-profiles-line-separator", ("profiles", "--profile-dir", "profiles"),
        USAGE, "field 'description' holds the control character '\\u2028'",
        (text_file("profiles/bad.toml", 'schema_version = 1\nname = "bad"\nkind = "cpu"\n'
                   'description = "one\\u2028two"\nsource = "s"\n'),)),
    # Review 1, D15: a page written where run records are read, under a record's name.
    Row("review-D15-report-o-json", ("report", "good.json", "-o", "reports/devcpu/zz.json"),
        USAGE, "-o reports/devcpu/zz.json: a page is HTML, not a run record (.json)",
        (good_record, directory("reports/devcpu"))),
    Row("review-D15-compare-html-json", ("compare", "a.json", "good.json", "--html", "x.JSON"),
        USAGE, "--html x.JSON: a page is HTML, not a run record (.json)",
        (good_record, record_with("a.json", _set("run_id", value="other")))),
]  # fmt: skip


def _hashes(root: Path) -> dict[Path, str]:
    """Each file's digest; a directory, FIFO or other non-regular file by its kind."""
    found = {}
    for p in root.rglob("*"):
        if "__pycache__" in p.parts or ".pytest_cache" in p.parts:
            continue
        if p.is_file():
            found[p.relative_to(root)] = hashlib.sha256(p.read_bytes()).hexdigest()
        else:  # never opened: reading a FIFO would wait for a writer
            found[p.relative_to(root)] = f"kind {stat.S_IFMT(p.lstat().st_mode):o}"
    return found


def _assert_nothing_stored_changed(root: Path, before: dict[Path, str]) -> None:
    after = _hashes(root)
    changed = [p for p, digest in before.items() if after.get(p) != digest]
    assert not changed, f"stored files changed or vanished: {changed}"
    created = [
        p for p in set(after) - set(before) if p.parts[0] == "baselines" and p.suffix != ".lock"
    ]
    assert not created, f"a refused input created files under baselines/: {created}"


@pytest.mark.parametrize("row", CLI_ROWS, ids=str)
def test_cli_refuses_bad_input(
    row: Row, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for setup in row.setup:
        setup(tmp_path)
    monkeypatch.chdir(tmp_path)
    before = _hashes(tmp_path)
    try:
        status = cli.main(list(row.args))
    except SystemExit as exc:  # argparse's own refusals
        status = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert status == row.exit, out + err
    assert row.fragment in err, err
    assert "Traceback" not in out + err
    assert "\x1b" not in out + err, "a control character reached the terminal"
    _assert_nothing_stored_changed(tmp_path, before)


def test_case01_compare_shows_a_crash_message_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Free text of a record (a crash's message, why it is incomplete) is shown escaped."""
    good_record(tmp_path)
    record_with("b.json", lambda d: d.update(
        run_id="b", incomplete="stopped\x1b[2J",
        crashed=[{"id": "t.py::c", "phase": "call", "message": "boom\x1b[31m\nforged"}],
    ))(tmp_path)  # fmt: skip
    monkeypatch.chdir(tmp_path)
    cli.main(["compare", "good.json", "b.json"])
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err
    assert "boom\\x1b[31m\\nforged" in out and "stopped\\x1b[2J" in out


def test_history_skips_one_corrupt_record_and_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One corrupt record in a folder is reported and skipped; it does not stop ``history``."""
    reports = tmp_path / "reports" / "devcpu"
    reports.mkdir(parents=True)
    shutil.copy(RECORD, reports / "20261122T145127750Z-vm-f2a9.json")
    (reports / "20261123T000000000Z-vm-0000.json").write_text("{ truncated")
    monkeypatch.chdir(tmp_path)
    before = _hashes(tmp_path)
    status = cli.main(["history"])
    out, err = capsys.readouterr()
    assert status in (0, 1)
    assert "skipped a run record" in err and "20261123T000000000Z-vm-0000.json" in err
    assert "profile devcpu: 1 runs" in out
    _assert_nothing_stored_changed(tmp_path, before)


# ----------------------------------------------------------------------------- the plugin table

TOY = """
import numpy as np
from perfsuite.measure.loop import Workload
from perfsuite.model import Work

def test_toy(perf):
    a = np.random.default_rng(0).random(1 << 12)
    b = np.empty_like(a)
    perf.measure(Workload(
        check="toy", params={}, metric="bandwidth", unit="GB/s",
        work=Work(2 * a.nbytes, "B"), run=lambda: np.copyto(b, a), scale=1e9,
    ))
"""

SKIPPING = """
import pytest

def test_gpu_only(perf):
    pytest.skip("no GPU here")
"""

MARKED = """
import pytest

@pytest.mark.perf(tolerance={tolerance})
def test_marked(perf):
    pass
"""

INI = "[pytest]\nperf_profile_dir = profiles\nperf_quick = true\n"
ON_SLOWGPU = ("--hw", PROFILE, "--perf-allow-missing-device")


def bad_profile(text: str) -> Setup:
    """An extra profile file ``profiles/bad.toml``."""
    return text_file("profiles/bad.toml", text)


PLUGIN_ROWS = [
    Row("hw-empty", ("--hw=",), PYTEST_USAGE, "empty profile name"),
    Row("hw-unknown", ("--hw", "no-such-gpu"), PYTEST_USAGE, "no-such-gpu"),
    Row("hw-gpu-profile-without-gpu", ("--hw", PROFILE), PYTEST_USAGE,
        "--perf-allow-missing-device"),
    Row("baseline-dir-missing", (*ON_SLOWGPU, "--perf-baseline-dir", "no-such-dir"),
        PYTEST_USAGE, "no-such-dir: no such directory"),
    Row("baseline-dir-is-a-file", (*ON_SLOWGPU, "--perf-baseline-dir", "afile"), PYTEST_USAGE,
        "not a directory", (text_file("afile", "x"),)),
    Row("baseline-nan", ON_SLOWGPU, PYTEST_USAGE, "NaN is not a number",
        (poisoned_baseline(_run_samples([1.0, float("nan")])),)),
    Row("baseline-infinity", ON_SLOWGPU, PYTEST_USAGE, "Infinity is not a number",
        (poisoned_baseline(_run_samples([float("inf")])),)),
    Row("baseline-negative", ON_SLOWGPU, PYTEST_USAGE, "finite positive",
        (poisoned_baseline(_run_samples([-3.0, 1.0])),)),
    Row("baseline-zero", ON_SLOWGPU, PYTEST_USAGE, "finite positive",
        (poisoned_baseline(_run_samples([0.0])),)),
    Row("baseline-strings", ON_SLOWGPU, PYTEST_USAGE, "finite positive",
        (poisoned_baseline(_run_samples(["1.0"])),)),
    Row("baseline-empty-samples", ON_SLOWGPU, PYTEST_USAGE, "has no samples",
        (poisoned_baseline(_run_samples([])),)),
    Row("baseline-no-runs", ON_SLOWGPU, PYTEST_USAGE, "no accepted runs",
        (poisoned_baseline(lambda e: e.update(runs=[])),)),
    Row("baseline-wrong-direction-type", ON_SLOWGPU, PYTEST_USAGE, "higher_is_better",
        (poisoned_baseline(lambda e: e.update(higher_is_better="yes")),)),
    Row("case13-baseline-direction-flipped", ON_SLOWGPU, pytest.ExitCode.TESTS_FAILED,
        "its stored baseline with lower is better; one of them is wrong",
        (poisoned_baseline(lambda e: e.update(unit="GB/s", higher_is_better=False)),)),
    Row("baseline-truncated", ON_SLOWGPU, PYTEST_USAGE, "baseline.json",
        (text_file(f"baselines/{PROFILE}/baseline.json", '{"schema_version": 2, "entr'),)),
    Row("baseline-future-schema", ON_SLOWGPU, PYTEST_USAGE, "schema",
        (text_file(f"baselines/{PROFILE}/baseline.json",
                   json.dumps({"schema_version": 99, "entries": {}})),)),
    Row("baseline-of-another-profile", ON_SLOWGPU, PYTEST_USAGE, "a100",
        (text_file(f"baselines/{PROFILE}/baseline.json",
                   (FIXTURES / "baselines" / "recorded-on-a100.json").read_text()),)),
    Row("profile-name-traversal", ("--hw", "auto"), PYTEST_USAGE, "bad.toml",
        (bad_profile('schema_version = 1\nname = "../../escape"\nkind = "cpu"\n'),)),
    Row("profile-negative-peak", ("--hw", "bad"), PYTEST_USAGE, "bad.toml",
        (bad_profile('schema_version = 1\nname = "bad"\nkind = "cpu"\n'
                     '[memory]\nbandwidth_gbs = -5\n'),)),
    Row("profile-not-toml", ("--hw", "bad"), PYTEST_USAGE, "bad.toml",
        (bad_profile("name = [[["),)),
    Row("profile-not-toml-auto", ("--hw", "auto"), PYTEST_USAGE, "bad.toml",
        (bad_profile("name = [[["),)),
    Row("tolerance-out-of-range-in-file", ON_SLOWGPU, PYTEST_USAGE, "tolerances.toml",
        (text_file(f"baselines/{PROFILE}/tolerances.toml", "default = 7\n"),)),
    Row("tolerance-marker-0", ON_SLOWGPU, PYTEST_USAGE,
        "test_marked.py::test_marked: @pytest.mark.perf(tolerance=0) must be a fraction",
        (text_file("test_marked.py", MARKED.format(tolerance=0)),)),
    Row("tolerance-marker-negative", ON_SLOWGPU, PYTEST_USAGE, "tolerance=-0.05",
        (text_file("test_marked.py", MARKED.format(tolerance=-0.05)),)),
    Row("tolerance-marker-text", ON_SLOWGPU, PYTEST_USAGE, "tolerance='5%'",
        (text_file("test_marked.py", MARKED.format(tolerance="'5%'")),)),
    Row("waiver-without-reason", ON_SLOWGPU, PYTEST_USAGE, "waivers.toml",
        (text_file(f"baselines/{PROFILE}/waivers.toml",
                   f'[[waiver]]\ncheck = "{NODE}"\nexpires = "2099-01-01"\n'),)),
    Row("waiver-bad-date", ON_SLOWGPU, PYTEST_USAGE, "waivers.toml",
        (text_file(f"baselines/{PROFILE}/waivers.toml",
                   f'[[waiver]]\ncheck = "{NODE}"\nreason = "r"\nexpires = "soon"\n'),)),
    Row("tolerance-option-2", (*ON_SLOWGPU, "--perf-tolerance", "2"), PYTEST_USAGE,
        "--perf-tolerance"),
    Row("alpha-option-0", (*ON_SLOWGPU, "--perf-alpha", "0"), PYTEST_USAGE, "--perf-alpha"),
    Row("correction-option-bonferroni", (*ON_SLOWGPU, "--perf-correction", "bonferroni"),
        PYTEST_USAGE, "--perf-correction"),
    Row("samples-option-1", (*ON_SLOWGPU, "--perf-samples", "1"), PYTEST_USAGE,
        "--perf-samples"),
    Row("samples-option-text", (*ON_SLOWGPU, "--perf-samples", "many"), PYTEST_USAGE,
        "--perf-samples"),
    Row("fail-on-unknown", (*ON_SLOWGPU, "--perf-fail-on", "everything"), PYTEST_USAGE,
        "--perf-fail-on"),
    Row("baseline-runs-0", (*ON_SLOWGPU, "--perf-baseline-runs", "0"), PYTEST_USAGE,
        "--perf-baseline-runs"),
    Row("malloc-threshold-negative", (*ON_SLOWGPU, "--perf-malloc-threshold", "-1"),
        PYTEST_USAGE, "--perf-malloc-threshold: expected a whole number of MiB >= 0"),
    Row("html-maybe", (*ON_SLOWGPU, "--perf-html", "maybe"), PYTEST_USAGE, "--perf-html"),
    Row("backend-unregistered", (*ON_SLOWGPU, "--perf-backend", "numpy,jax"), PYTEST_USAGE,
        "'jax' is not a registered backend; registered: numpy (installed)"),
    Row("report-dir-is-a-file", (*ON_SLOWGPU, "--perf-report-dir", "afile"), PYTEST_USAGE,
        "afile", (text_file("afile", "x"),)),
    # Issue 43, item 8: baselines whose values used to pass the loader and crash the check.
    Row("baseline-1.7e308", ON_SLOWGPU, PYTEST_USAGE, "the number 1.7e+308 is out of range",
        (poisoned_baseline(_run_samples([1.7e308, 1.0])),)),
    Row("baseline-5e-324", ON_SLOWGPU, PYTEST_USAGE, "finite positive number: 5e-324",
        (poisoned_baseline(_run_samples([5e-324, 1.0])),)),
    Row("baseline-huge-integer", ON_SLOWGPU, PYTEST_USAGE, "an integer of 300 digits",
        (poisoned_baseline(_run_samples([10**299])),)),
    Row("baseline-nested-100000-deep", ON_SLOWGPU, PYTEST_USAGE, "nested too deeply",
        (text_file(f"baselines/{PROFILE}/baseline.json",
                   '{"schema_version": 2, "hardware_profile": "slowgpu", "entries": ' + DEEP[:-1] + "}"),)),
    # Item 4: an empty or blocked baseline location.
    Row("baseline-dir-empty", (*ON_SLOWGPU, "--perf-baseline-dir="), PYTEST_USAGE,
        "--perf-baseline-dir: empty path"),
    Row("baseline-profile-folder-is-a-file", ON_SLOWGPU, PYTEST_USAGE,
        "is a file where the baselines of profile 'slowgpu' belong",
        (text_file(f"baselines/{PROFILE}", "x"),)),
    # Item 10: configuration files that are not text, or hold the wrong kind of value.
    Row("waivers-binary", ON_SLOWGPU, PYTEST_USAGE, "waivers.toml: corrupt waivers file: not UTF-8 text",
        (binary_file(f"baselines/{PROFILE}/waivers.toml"),)),
    Row("tolerances-binary", ON_SLOWGPU, PYTEST_USAGE, "tolerances.toml: corrupt tolerances file: not UTF-8 text",
        (binary_file(f"baselines/{PROFILE}/tolerances.toml"),)),
    Row("profile-binary", ("--hw", "bad"), PYTEST_USAGE, "bad.toml: corrupt profile: not UTF-8 text",
        (binary_file("profiles/bad.toml"),)),
    Row("waiver-a-number", ON_SLOWGPU, PYTEST_USAGE, "'waiver' must be [[waiver]] tables",
        (text_file(f"baselines/{PROFILE}/waivers.toml", "schema_version = 1\nwaiver = 5\n"),)),
    # Item 12: a setting glibc cannot be given.
    Row("malloc-threshold-2048", (*ON_SLOWGPU, "--perf-malloc-threshold", "2048"), PYTEST_USAGE,
        "at most 2047 MiB"),
    # Issue 63, cases 19 and 20: the plugin refuses a corrupt baseline header, too.
    Row("case19-plugin-run-policies-text", ON_SLOWGPU, PYTEST_USAGE,
        "'run_policies' is not an object", (poisoned_header(run_policies="x"),)),
    Row("case20-plugin-window-negative", ON_SLOWGPU, PYTEST_USAGE,
        "'window' must be a whole number from 1 to 1000, got -3", (poisoned_header(window=-3),)),
    # Issue 63, cases 24-26: every number in range, and no empty value taken as the default.
    Row("case24-samples-20-digits", (*ON_SLOWGPU, "--perf-samples=" + "9" * 20), PYTEST_USAGE,
        "--perf-samples: expected a whole number of repetitions from 3 to 10000"),
    Row("case24-baseline-runs-huge", (*ON_SLOWGPU, "--perf-baseline-runs=" + "9" * 32),
        PYTEST_USAGE, "--perf-baseline-runs: expected a whole number from 1 to 1000"),
    Row("case24-model-flops-tiny", (*ON_SLOWGPU, "--perf-model-flops=1e-300"), PYTEST_USAGE,
        "--perf-model-flops: expected FLOPs per sample from 1 to 1e+20"),
    Row("case24-ranks-huge", (*ON_SLOWGPU, "--perf-ranks=2," + "9" * 30), PYTEST_USAGE,
        "--perf-ranks: expected rank counts from 2 to 65536"),
    Row("case25-profile-bandwidth-1e-300", ("--hw", "bad"), PYTEST_USAGE,
        "bad.toml: field 'memory.bandwidth_gbs' must be from 1e-06 to 1e+15, got 1e-300",
        (bad_profile('schema_version = 1\nname = "bad"\ndescription = "d"\nkind = "cpu"\n'
                     'source = "s"\n[memory]\nbandwidth_gbs = 1e-300\n'),)),
    Row("case26-backend-empty", (*ON_SLOWGPU, "--perf-backend="), PYTEST_USAGE,
        "--perf-backend: empty value"),
    Row("case26-backend-comma", (*ON_SLOWGPU, "--perf-backend=,"), PYTEST_USAGE,
        "--perf-backend: no backend named in ','"),
    Row("case26-samples-empty", (*ON_SLOWGPU, "--perf-samples="), PYTEST_USAGE,
        "--perf-samples: empty value"),
    Row("case26-sample-seconds-empty", (*ON_SLOWGPU, "--perf-sample-seconds="), PYTEST_USAGE,
        "--perf-sample-seconds: empty value"),
    Row("case26-baseline-runs-empty", (*ON_SLOWGPU, "--perf-baseline-runs="), PYTEST_USAGE,
        "--perf-baseline-runs: empty value"),
    Row("case26-model-flops-empty", (*ON_SLOWGPU, "--perf-model-flops="), PYTEST_USAGE,
        "--perf-model-flops: empty value"),
    Row("case26-profile-dir-empty", (*ON_SLOWGPU, "--perf-profile-dir="), PYTEST_USAGE,
        "--perf-profile-dir: empty value"),
    Row("case26-markdown-empty", (*ON_SLOWGPU, "--perf-markdown="), PYTEST_USAGE,
        "--perf-markdown: empty value"),
    Row("nothing-measured", (*ON_SLOWGPU, "test_skipping.py"), pytest.ExitCode.TESTS_FAILED,
        "none measured anything"),
    # Review 1, D8: a baseline policy value of the wrong kind crashed the check.
    Row("review-D8-run-policy-warmup-list", ON_SLOWGPU, PYTEST_USAGE,
        "run_policies['run-good'] 'warmup_seconds' must be a number of seconds >= 0, got [1]",
        (poisoned_header(run_policies={"run-good": {"warmup_seconds": [1]}}),)),
    Row("review-D8-entry-policy-sample-target-object", ON_SLOWGPU, PYTEST_USAGE,
        "run 0: policy 'sample_target' must be a number of seconds >= 0, got {}",
        (poisoned_baseline(lambda e: e["runs"][0]["policy"].update(sample_target={})),)),
    Row("review-D8-entry-policy-warmup-empty-list", ON_SLOWGPU, PYTEST_USAGE,
        "run 0: policy 'warmup_seconds' must be a number of seconds >= 0, got []",
        (poisoned_baseline(lambda e: e["runs"][0]["policy"].update(warmup_seconds=[])),)),
    # Review 1, D13: an empty item in a list option was dropped silently.
    Row("review-D13-backend-trailing-comma", (*ON_SLOWGPU, "--perf-backend=numpy,"),
        PYTEST_USAGE, "--perf-backend: an empty name in 'numpy,'"),
]  # fmt: skip


@pytest.mark.parametrize("row", PLUGIN_ROWS, ids=str)
def test_plugin_refuses_bad_input(row: Row, pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_toy=TOY, test_skipping=SKIPPING)
    shutil.copytree(FIXTURES / "profiles", pytester.path / "profiles")
    for setup in row.setup:
        setup(pytester.path)
    before = _hashes(pytester.path)
    result = pytester.runpytest(*row.args)
    output = "\n".join(result.outlines + result.errlines)
    assert result.ret == row.exit, output
    assert row.fragment in output, output
    assert "Traceback" not in output
    _assert_nothing_stored_changed(pytester.path, before)


def test_the_tables_are_what_the_docs_count() -> None:
    """The verdicts page states the size of this suite; keep the two in step."""
    readme = (Path(__file__).parents[1] / "docs" / "verdicts.md").read_text()
    rows = len(CLI_ROWS) + len(PLUGIN_ROWS) + 1  # + the corrupt-history case
    assert f"{rows} bad inputs" in readme


# ----------------------------------------------------------------------------- help and version


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    from perfsuite import __version__

    with pytest.raises(SystemExit) as stop:
        cli.main(["--version"])
    assert stop.value.code == outcome.EXIT_OK
    assert capsys.readouterr().out.strip() == f"perfsuite {__version__}"


def _subparser(parser: Any, *names: str) -> Any:
    import argparse

    for name in names:
        choices = next(
            a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)
        )
        parser = choices[name]
    return parser


@pytest.mark.parametrize(
    "command",
    [("profiles",), ("backends",), ("compare",), ("report",), ("history",), ("baseline", "accept")],
    ids=" ".join,
)
def test_each_argument_of_the_stored_file_commands_has_help_and_its_default(
    command: tuple[str, ...],
) -> None:
    """Issue 63: a description, help for every argument, and each option's default shown."""
    import argparse

    parser = _subparser(cli.build_parser(), *command)
    assert parser.description, "no description in --help"
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        name = "/".join(action.option_strings) or action.dest
        assert action.help, f"{name}: no help text"
        if action.option_strings and action.default is not None:
            assert "default" in action.help.lower(), f"{name}: default not shown"
