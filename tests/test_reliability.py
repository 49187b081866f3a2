"""Nothing lost, nothing leaked, nothing silently green: concurrency, secrets, escaping."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from perfsuite.measure.environment import performance_env
from perfsuite.measure.redaction import REDACTED
from perfsuite.model import BaselineVerdict, FloorVerdict, Result, Summary, Work
from perfsuite.report.markdown import render_markdown
from perfsuite.store.baseline import BaselineStore

FIXTURES = Path(__file__).parent / "fixtures"

SKIPPING_CHECK = """
import pytest

def test_gpu_only(perf):
    pytest.skip("no GPU here")
"""

TOY = """
import numpy as np
from perfsuite.measure.loop import Workload
from perfsuite.model import Work

def test_toy(perf):
    a = np.ones(1 << 12)
    b = np.empty_like(a)
    perf.measure(Workload(
        check="toy", params={"p": "$x^2$ <b>"}, metric="bandwidth", unit="GB/s",
        work=Work(2 * a.nbytes, "B"), run=lambda: np.copyto(b, a), scale=1e9,
    ))
"""


def test_environment_capture_is_an_allow_list_with_secrets_redacted() -> None:
    env = {
        "TF_VAR_db_password": "hunter2",  # Terraform's, not TensorFlow's
        "TF_CLI_CONFIG_FILE": "/home/me/.terraformrc",
        "TF_ENABLE_ONEDNN_OPTS": "1",
        "XLA_FLAGS": "--xla_cpu_use_thunk_runtime=false",
        "OMP_NUM_THREADS": "2",
        "NCCL_SOCKET_IFNAME": "eth0",
        "NCCL_IB_AUTH_KEY": "abc",
        "NCCL_DEBUG_FILE": "https://user:s3cret@example.invalid/log",
        "AWS_SECRET_ACCESS_KEY": "x",
        "HOME": "/root",
    }
    assert performance_env(env) == {
        "NCCL_DEBUG_FILE": REDACTED,
        "NCCL_IB_AUTH_KEY": REDACTED,
        "NCCL_SOCKET_IFNAME": "eth0",
        "OMP_NUM_THREADS": "2",
        "TF_ENABLE_ONEDNN_OPTS": "1",
        "XLA_FLAGS": "--xla_cpu_use_thunk_runtime=false",
    }


def test_no_secret_reaches_the_record_or_the_report(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_toy=TOY)
    monkeypatch.setenv("TF_VAR_db_password", "hunter2")
    monkeypatch.setenv("NCCL_IB_TOKEN", "hunter3")
    result = pytester.runpytest_subprocess(
        "--perf-quick", "-p", "no:cacheprovider", "--perf-markdown=summary.md"
    )
    result.assert_outcomes(passed=1)
    written = [p for p in (pytester.path / "reports").rglob("*") if p.is_file()]
    assert any(p.suffix == ".html" for p in written)
    for path in [*written, pytester.path / "summary.md"]:
        text = path.read_text(errors="replace")
        assert "hunter2" not in text and "hunter3" not in text and "TF_VAR" not in text, path


def _result(name: str, unit: str) -> Result:
    return Result(
        id=f"t.py::test[{name}]",
        check="c",
        params={},
        metric="m",
        unit=unit,
        higher_is_better=True,
        samples=(1.0,),
        seconds=(1.0,),
        summary=Summary(1.0, 1.0, 1.0, 1.0, 1, None),
        work=Work(1.0, "x"),
        floor=FloorVerdict("no-reference"),
        baseline=BaselineVerdict("new"),
        outcome="no-reference",
    )


def test_markdown_escapes_html_and_table_syntax() -> None:
    from perfsuite.model import RunRecord

    record = RunRecord(
        "run-1",
        "2026-11-23T00:00:00+00:00",
        {"name": "cpu"},
        {},
        (
            _result("<script>alert(1)</script>", "GB|s"),
            _result("<img src=x onerror=alert(1)>", "u"),
        ),
    )
    md = render_markdown(record)
    assert "<script>" not in md and "<img" not in md
    assert "&lt;script&gt;" in md and "GB\\|s" in md


CHARTED = """
import numpy as np
import pytest
from perfsuite.measure.loop import Workload
from perfsuite.model import Work

@pytest.mark.parametrize("name", ["$x^2$ <b>", "a_b$c"])
def test_dollar(perf, name):
    a = np.ones(1 << 12)
    b = np.empty_like(a)
    perf.measure(Workload(
        check="memory_bandwidth", params={"kernel": name}, metric="bandwidth", unit="GB/s",
        work=Work(2 * a.nbytes, "B"), run=lambda: np.copyto(b, a), scale=1e9,
    ))
"""


def test_html_report_charts_take_dollars_literally_and_the_csp_pins_the_script(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_dollar=CHARTED)
    result = pytester.runpytest("--perf-quick")
    result.assert_outcomes(passed=2)
    assert "HTML report not written" not in result.stdout.str()
    (html,) = (pytester.path / "reports").rglob("*.html")
    text = html.read_text()
    assert "test_dollar[$x^2$ &lt;b&gt;]" in text or "test_dollar[$x^2$" in text
    csp = text.split('http-equiv="Content-Security-Policy" content="', 1)[1].split('"', 1)[0]
    assert "script-src 'sha256-" in csp and "unsafe-inline" not in csp.split("script-src")[1]


def test_benchmark_only_still_runs_perf_checks(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_toy=TOY)
    result = pytester.runpytest("--perf-quick", "--benchmark-only")
    result.assert_outcomes(passed=1)
    assert list((pytester.path / "reports").rglob("*.json"))


def test_a_session_that_measured_nothing_fails(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_gpu=SKIPPING_CHECK)
    result = pytester.runpytest("--perf-quick")
    result.assert_outcomes(skipped=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["perfsuite: FAILED: 1 perf check(s) were selected but none*"])
    allowed = pytester.runpytest("--perf-quick", "--perf-allow-empty")
    assert allowed.ret == pytest.ExitCode.OK


def _save(root: str, index: int, barrier: multiprocessing.synchronize.Barrier) -> None:
    store = BaselineStore(Path(root))
    result = _result(f"check-{index}", "GB/s")
    barrier.wait()
    store.save("cpu", [result], f"run-{index}")


@pytest.mark.parametrize("trial", range(3))
def test_twenty_concurrent_saves_keep_every_entry(tmp_path: Path, trial: int) -> None:
    """20 real processes save different checks at the same moment; none is lost."""
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(20)
    procs = [ctx.Process(target=_save, args=(str(tmp_path), i, barrier)) for i in range(20)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    data = json.loads((tmp_path / "cpu" / "baseline.json").read_text())
    assert len(data["entries"]) == 20
    assert not list((tmp_path / "cpu").glob(".*.tmp"))
    assert not list((tmp_path / "cpu" / "history").glob(".*.tmp"))
