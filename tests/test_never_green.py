"""Never green by accident: a crash, an interrupt or an empty comparison never reads PASSED.

The one rule (``outcome.session_verdict``): PASSED only when every selected perf check
produced a judged result.  Each view (terminal, Markdown, HTML, JUnit, record, exit status)
says the same, and a run that is not whole never becomes a baseline.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfsuite.cli import main as cli
from perfsuite.judge import outcome
from perfsuite.model import Crash, Expectation, FlagKind, NoiseFlag
from perfsuite.report.headline import floor_label, headline

WORKLOAD = """
import time
from perfsuite.measure.loop import Workload
from perfsuite.model import Work

def workload(name):
    return Workload(
        check="toy", params={"name": name}, metric="rate", unit="1/s",
        work=Work(1.0, "calls"), run=lambda: time.sleep(0.0005),
    )
"""

CHECKS = (
    WORKLOAD
    + """
def test_good(perf):
    perf.measure(workload("good"))

def test_crash(perf):
    raise RuntimeError("the workload broke")
"""
)

SLOW_CHECKS = (
    WORKLOAD
    + """
def test_first(perf):
    perf.measure(workload("first"))

def test_second(perf):
    open("second.started", "w").close()  # the first check is over, reported and all
    time.sleep(60)

def test_third(perf):
    perf.measure(workload("third"))
"""
)


def _ctrl_c_as_at_a_terminal() -> None:
    """Let SIGINT raise KeyboardInterrupt in the child, as it does in a terminal's foreground.

    A test runner started in the background of a non-interactive shell (``cmd &``) ignores
    SIGINT, children inherit that, and Python then leaves it ignored: the interrupt under
    test would never arrive.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\nperf_quick = true\nperf_hw = auto\n")
    return pytester


def only_record(pytester: pytest.Pytester) -> dict:
    (path,) = (pytester.path / "reports").glob("*/*.json")
    return json.loads(path.read_text())


def test_a_crashed_check_fails_the_verdict_in_every_view(project: pytest.Pytester) -> None:
    project.makepyfile(test_f=CHECKS)
    result = project.runpytest("--perf-markdown", "summary.md", "--junitxml", "junit.xml")
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "crashed: test_crash (call): RuntimeError: the workload broke",
            "perfsuite: FAILED (1 crashed): test_crash",
        ]
    )
    record = only_record(project)
    assert record["crashed"] == [
        {
            "id": "test_f.py::test_crash",
            "phase": "call",
            "message": "RuntimeError: the workload broke",
        }
    ]
    assert [r["id"] for r in record["results"]] == ["test_f.py::test_good"]
    assert "**FAILED (1 crashed)**" in (project.path / "summary.md").read_text()
    (html,) = (project.path / "reports").glob("*/*.html")
    assert 'data-state="failed"' in html.read_text()
    junit = (project.path / "junit.xml").read_text()
    assert '<property name="perfsuite_verdict" value="failed"' in junit


def test_a_crash_blocks_the_baseline_and_forcing_saves_only_what_measured(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(test_f=CHECKS)
    refused = project.runpytest("--perf-save-baseline")
    refused.stdout.fnmatch_lines(["perfsuite: baseline NOT saved: 1 selected check(s) crashed*"])
    assert not list((project.path / "baselines").rglob("baseline.json"))
    forced = project.runpytest("--perf-save-baseline", "--perf-force-baseline")
    assert forced.ret == pytest.ExitCode.TESTS_FAILED
    (saved,) = (project.path / "baselines").rglob("baseline.json")
    assert "test_good" in saved.read_text() and "test_crash" not in saved.read_text()


def test_a_keyboard_interrupt_reads_interrupted_and_saves_nothing(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(
        test_f=CHECKS.replace('raise RuntimeError("the workload broke")', "raise KeyboardInterrupt")
        + "\ndef test_never_reached(perf):\n    perf.measure(workload('late'))\n"
    )
    result = project.runpytest_inprocess(
        "--perf-save-baseline",
        "--perf-markdown",
        "summary.md",
        "--junitxml",
        "junit.xml",
        no_reraise_ctrlc=True,
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["perfsuite: INTERRUPTED (1 check judged)*"])
    assert "PASSED" not in result.stdout.str()
    record = only_record(project)
    assert record["incomplete"] and len(record["results"]) == 1
    assert not list((project.path / "baselines").rglob("baseline.json"))
    assert "**INTERRUPTED" in (project.path / "summary.md").read_text()
    junit = (project.path / "junit.xml").read_text()
    assert '<property name="perfsuite_verdict" value="interrupted"' in junit
    (html,) = (project.path / "reports").glob("*/*.html")
    assert 'data-state="interrupted"' in html.read_text()


@pytest.mark.integration
def test_sigint_mid_run_marks_the_record_incomplete(pytester: pytest.Pytester) -> None:
    """A real Ctrl-C (SIGINT to the pytest process) after the first of three checks."""
    pytester.makeini("[pytest]\nperf_quick = true\nperf_hw = auto\n")
    pytester.makepyfile(test_f=SLOW_CHECKS)
    # The first check sampled briefly through the seam (perfsuite.testing).
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--perf-save-baseline",
            "-p",
            "perfsuite.testing",
        ],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=_ctrl_c_as_at_a_terminal,
    )
    deadline = time.monotonic() + 120
    # Interrupt inside the second check: waiting for it to start, not a second after the
    # first ended, so a busy machine cannot move the interrupt into the first.
    while not (pytester.path / "second.started").exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    assert "perfsuite: INTERRUPTED (1 check judged)" in out, out
    assert "PASSED" not in out
    (path,) = (pytester.path / "reports").glob("*/*.json")
    assert json.loads(path.read_text())["incomplete"]
    assert not list((pytester.path / "baselines").rglob("baseline.json"))


def test_the_one_rule_orders_interrupted_failed_empty() -> None:
    crash = Crash("t.py::test_x", "call", "boom")
    assert outcome.session_verdict([], crashed=[crash]).state == "failed"
    assert outcome.session_verdict([], crashed=[crash]).exit_code == outcome.EXIT_REGRESSED
    assert outcome.session_verdict([], incomplete="interrupted").state == "interrupted"
    empty = outcome.session_verdict([])
    assert empty.state == "empty" and empty.exit_code == outcome.EXIT_INCONCLUSIVE
    assert headline(empty) == "INCONCLUSIVE (nothing judged)"


def _record(tmp_path: Path, name: str, run_id: str, results: list[dict]) -> Path:
    fixture = json.loads((Path(__file__).parent / "fixtures" / "run-a-tf220.json").read_text())
    fixture["run_id"] = run_id
    fixture["results"] = results
    path = tmp_path / name
    path.write_text(json.dumps(fixture))
    return path


def test_comparing_nothing_is_not_a_pass(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    fixtures = Path(__file__).parent / "fixtures"
    a = fixtures / "run-a-tf220.json"
    empty = _record(tmp_path, "b.json", "empty-run", [])
    assert cli(["compare", str(a), str(empty)]) == outcome.EXIT_INCONCLUSIVE
    out = capsys.readouterr().out
    assert "nothing compared: B (empty-run) holds no results" in out
    assert "compare: INCONCLUSIVE (nothing judged)" in out and "PASSED" not in out
    assert cli(["report", str(empty), "-o", str(tmp_path / "e.html")]) == 0
    assert 'data-state="empty"' in (tmp_path / "e.html").read_text()


def test_the_same_record_twice_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    a = Path(__file__).parent / "fixtures" / "run-a-tf220.json"
    assert cli(["compare", str(a), str(a)]) == outcome.EXIT_USAGE
    assert "each run record counts once" in capsys.readouterr().err
    copy = tmp_path / "copy.json"
    copy.write_text(a.read_text())
    b = Path(__file__).parent / "fixtures" / "run-b-tf221.json"
    assert cli(["compare", str(a), str(copy), str(b)]) == outcome.EXIT_USAGE
    assert "the same run as" in capsys.readouterr().err


def test_an_output_that_names_an_input_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    fixtures = Path(__file__).parent / "fixtures"
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text((fixtures / "run-a-tf220.json").read_text())
    b.write_text((fixtures / "run-b-tf221.json").read_text())
    before = b.read_text()
    assert cli(["compare", str(a), str(b), "--html", str(b)]) == outcome.EXIT_USAGE
    assert cli(["report", str(a), "-o", str(a)]) == outcome.EXIT_USAGE
    assert "that is an input of this command" in capsys.readouterr().err
    assert b.read_text() == before and json.loads(a.read_text())


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_baseline_dir_is_a_usage_error(project: pytest.Pytester, value: str) -> None:
    project.makepyfile(test_f=CHECKS.split("def test_crash")[0])
    result = project.runpytest(f"--perf-baseline-dir={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--perf-baseline-dir: empty path*"])


def test_a_file_where_the_profiles_baselines_belong_is_an_error(
    project: pytest.Pytester,
) -> None:
    from perfsuite.hardware.detect import resolve
    from perfsuite.hardware.profile import ProfileRegistry

    project.makepyfile(test_f=CHECKS.split("def test_crash")[0])
    (project.path / "baselines" / resolve("auto", ProfileRegistry()).name).write_text("x")
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*is a file where the baselines of profile*"])


def test_interrupted_record_is_interrupted_in_compare(tmp_path: Path, capsys) -> None:
    fixtures = Path(__file__).parent / "fixtures"
    b = json.loads((fixtures / "run-b-tf221.json").read_text())
    b["incomplete"] = "interrupted before every selected check ran"
    path = tmp_path / "b.json"
    path.write_text(json.dumps(b))
    code = cli(["compare", str(fixtures / "run-a-tf220.json"), str(path)])
    out = capsys.readouterr().out
    assert code == outcome.EXIT_INCONCLUSIVE and "compare: INTERRUPTED" in out
    assert "is incomplete: interrupted before every selected check ran" in out


def test_an_interrupt_before_any_check_ends_is_interrupted_not_empty(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(test_f=WORKLOAD + "\ndef test_first(perf):\n    raise KeyboardInterrupt\n")
    result = project.runpytest_inprocess(no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["perfsuite: INTERRUPTED (0 checks judged)*"])
    result.stdout.no_fnmatch_line("*none measured anything*")
    assert only_record(project)["incomplete"]


def test_a_baseline_entry_in_another_unit_says_so(project: pytest.Pytester) -> None:
    project.makepyfile(test_f=CHECKS.split("def test_crash")[0])
    project.runpytest("--perf-save-baseline", "--perf-force-baseline").assert_outcomes(passed=1)
    (path,) = (project.path / "baselines").rglob("baseline.json")
    path.write_text(path.read_text().replace('"unit":"1/s"', '"unit":"1/min"'))
    project.runpytest().assert_outcomes(passed=1)
    (later,) = sorted((project.path / "reports").glob("*/*.json"))[-1:]
    reason = json.loads(later.read_text())["results"][0]["baseline"]["reason"]
    assert reason.startswith("unit mismatch: the baseline measured this check in '1/min'")


def test_history_never_follows_a_link_out_of_the_baseline_folder(tmp_path: Path) -> None:
    from perfsuite.errors import StorageError
    from perfsuite.store.baseline import BaselineStore
    from perfsuite.store.records import load_record

    record = load_record(Path(__file__).parent / "fixtures" / "run-a-tf220.json")
    store = BaselineStore(tmp_path / "baselines", history_keep=1)
    store.save("cpu", list(record.results), "r1")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    for name in ("baseline-0.json", "baseline-1.json"):
        (outside / name).write_text("precious")
    (tmp_path / "baselines" / "cpu" / "history").symlink_to(outside)
    with pytest.raises(StorageError, match="is a link out of the baseline folder"):
        store.save("cpu", list(record.results), "r2")
    assert sorted(p.name for p in outside.iterdir()) == ["baseline-0.json", "baseline-1.json"]


def test_history_prunes_by_the_time_kept_in_each_file_not_by_name(tmp_path: Path) -> None:
    from perfsuite.store.baseline import BaselineStore
    from perfsuite.store.records import load_record

    record = load_record(Path(__file__).parent / "fixtures" / "run-a-tf220.json")
    store = BaselineStore(tmp_path, history_keep=2)
    store.save("cpu", list(record.results), "r1")
    history = tmp_path / "cpu" / "history"
    history.mkdir()
    # Named to sort first, but written last: pruning must keep it.
    newest = history / "baseline-00000000.json"
    newest.write_text('{"schema_version":2,"updated":"2999-01-01T00:00:00+00:00"}')
    for run in ("r2", "r3", "r4"):
        store.save("cpu", list(record.results), run)
    kept = sorted(p.name for p in history.glob("baseline-*.json"))
    assert len(kept) == 2 and newest.name in kept


def test_markdown_shows_ids_literally(tmp_path: Path) -> None:
    from dataclasses import replace

    from perfsuite.report.markdown import render_markdown
    from perfsuite.store.records import load_record

    record = load_record(Path(__file__).parent / "fixtures" / "run-a-tf220.json")
    hostile = "t.py::test[[l](javascript:alert(1)) `code` **bold** <b>x</b> ~~s~~ www.x.io]"
    first = replace(record.results[0], id=hostile)
    text = render_markdown(replace(record, results=(first, *record.results[1:])))
    row = next(line for line in text.splitlines() if "javascript" in line)
    for raw in ("[l](", "`code`", "**bold**", "<b>", "~~s~~", "www.x"):
        assert raw not in row, (raw, row)
    assert r"\[l\]\(javascript\:alert\(1\)\)" in row and "&lt;b&gt;" in row


@pytest.mark.parametrize(
    "value",
    ["--xla_dump_to=/tmp --password hunter2", "--token=abc123", "-secret s3", "--api-key k"],
)
def test_a_credential_flag_inside_a_recorded_variable_is_redacted(value: str) -> None:
    from perfsuite.measure.environment import performance_env
    from perfsuite.measure.redaction import REDACTED

    assert performance_env({"XLA_FLAGS": value}) == {"XLA_FLAGS": REDACTED}
    assert performance_env({"XLA_FLAGS": "--xla_cpu_use_thunk_runtime=false"}) == {
        "XLA_FLAGS": "--xla_cpu_use_thunk_runtime=false"
    }


def test_the_malloc_threshold_recorded_is_what_glibc_was_given() -> None:
    from perfsuite.measure import allocator

    state = allocator.pin(allocator.MAX_MIB)
    try:
        if state["pinned"]:
            assert state["mmap_threshold_bytes"] == allocator.MAX_MIB * 2**20
            assert state["trim_threshold_bytes"] == allocator.C_INT_MAX
        with pytest.raises(ValueError, match="does not fit mallopt's C int"):
            allocator.pin(allocator.MAX_MIB + 1)
    finally:
        allocator.pin(allocator.DEFAULT_MIB)


def test_a_run_stopped_early_by_maxfail_is_not_passed(project: pytest.Pytester) -> None:
    """-x stops after a failure that is no perf check: the checks never run are unknown."""
    project.makepyfile(
        test_a="def test_plain():\n    assert False\n",
        test_f=CHECKS.split("def test_crash")[0],
    )
    result = project.runpytest("-x", "-p", "no:randomly", "--perf-save-baseline")
    result.stdout.no_fnmatch_line("*perfsuite: PASSED*")
    assert not list((project.path / "baselines").rglob("baseline.json"))


def test_a_stop_after_some_checks_ran_is_interrupted(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_f=CHECKS.split("def test_crash")[0]
        + "\nimport pytest\n\ndef test_second(perf):\n    pytest.exit('stop', returncode=0)\n"
        + "\ndef test_third(perf):\n    perf.measure(workload('third'))\n",
    )
    result = project.runpytest("--perf-save-baseline")
    result.stdout.fnmatch_lines(["perfsuite: INTERRUPTED (1 check judged)*"])
    assert only_record(project)["incomplete"]
    assert not list((project.path / "baselines").rglob("baseline.json"))


def test_accept_refuses_an_incomplete_or_crashed_record(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    fixture = json.loads((Path(__file__).parent / "fixtures" / "run-a-tf220.json").read_text())
    incomplete = tmp_path / "i.json"
    incomplete.write_text(json.dumps({**fixture, "incomplete": "interrupted"}))
    crashed = tmp_path / "c.json"
    crashed.write_text(
        json.dumps({**fixture, "crashed": [{"id": "t.py::x", "phase": "call", "message": "m"}]})
    )
    base = ["--baseline-dir", str(tmp_path / "b")]
    assert cli(["baseline", "accept", str(incomplete), *base]) == outcome.EXIT_USAGE
    assert "an incomplete run never becomes a baseline" in capsys.readouterr().err
    assert cli(["baseline", "accept", str(crashed), *base]) == outcome.EXIT_USAGE
    assert "accept the checks that measured with -k" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()
    assert cli(["baseline", "accept", str(crashed), *base, "-k", "numpy"]) == 0


def test_passes_keep_the_crashes_and_interrupts_of_every_pass() -> None:
    from dataclasses import replace

    from perfsuite.judge.compare import fastest_passes
    from perfsuite.store.records import load_record

    one = load_record(Path(__file__).parent / "fixtures" / "run-a-tf220.json")
    two = replace(
        one, run_id="p2", incomplete="interrupted", crashed=(Crash("t.py::x", "call", "m"),)
    )
    merged = fastest_passes([one, two])
    assert (
        merged.crashed == (Crash("t.py::x", "call", "m"),)
        and "p2: interrupted" in merged.incomplete
    )
    assert outcome.record_verdict(merged).state == "failed"


def test_a_failed_expectation_fails_even_when_a_floor_was_missed_under_load() -> None:
    from dataclasses import replace

    from perfsuite.store.records import load_record

    r = load_record(Path(__file__).parent / "fixtures" / "run-a-tf220.json").results[0]
    missed = replace(
        r,
        floor=replace(r.floor, verdict="fail", estimated=False),
        noise_flags=(NoiseFlag(FlagKind.FOREIGN_LOAD, cores=1.0),),
    )
    assert outcome.of(missed) == "noisy" and floor_label(missed) == "fail (under load)"
    broken = replace(missed, expectations=(Expectation("flops", False, "counted twice"),))
    assert outcome.of(broken) == "fail"
