"""The HTML report, the Markdown summary and JUnit properties (no browser needed here)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest

from perfsuite.cli import main
from perfsuite.judge.compare import compare_runs, compared_record
from perfsuite.model import ReferenceChange
from perfsuite.report.charts import CHARTS
from perfsuite.report.explain import explained_record
from perfsuite.report.headline import headline
from perfsuite.report.html import render
from perfsuite.report.markdown import render_markdown
from perfsuite.store.records import load_record

FIXTURES = Path(__file__).parent / "fixtures"
HOSTILE = '<script>document.title="pwned"</script>'


def repeated(record, n: int = 3):
    """A record as ``n`` baseline runs a day apart, 0.3% apart: enough to show their spread."""
    return [
        replace(
            record,
            run_id=f"{record.run_id}-{i}",
            created=f"2026-11-{i + 1:02d}T00:00:00+00:00",  # a session each
            results=tuple(
                replace(r, samples=tuple(v * (1 + 0.003 * (i - 1)) for v in r.samples))
                for r in record.results
            ),
        )
        for i in range(n)
    ]


def ab_record():
    base = load_record(FIXTURES / "report-baseline.json")
    run = load_record(FIXTURES / "report-run.json")
    rows, _, _ = compare_runs(repeated(base), run)
    return base, explained_record(compared_record(run, rows))


def test_report_answers_the_first_screen_questions() -> None:
    base, judged = ab_record()
    html = render(judged, baseline=base)
    banner = html[html.index('id="banner"') : html.index("</div>", html.index('id="banner"'))]
    assert "FAILED (1 regressed)" in banner and "test_stream[tensorflow-cpu-triad]" in banner
    assert re.search(r"-1\d\.\d% \[-\d+\.\d%, -\d+\.\d%\], p=", banner), banner
    env = html[html.index('id="env-banner"') :]
    assert "software.tensorflow.version</code>: 2.20.0 → 2.21.0" in env
    for key in ("roofline", "memory_bandwidth", "gemm", "knobs"):
        assert f'id="chart-{key}"' in html
    assert "<svg" in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html), "nothing is fetched"
    assert "<dc:date>" not in html


def test_report_without_baseline_and_with_only_some_checks() -> None:
    run = load_record(FIXTURES / "report-run.json")
    only_stream = replace(
        run, results=tuple(r for r in run.results if r.check == "memory_bandwidth"), derived={}
    )
    html = render(only_stream)
    assert "No baseline environment to compare with." in html
    assert 'id="chart-memory_bandwidth"' in html
    assert 'id="chart-roofline"' not in html and 'id="chart-gemm"' not in html
    assert "no regressions and no floor failures" in html and "PASSED" in html


def test_everything_from_the_run_is_escaped() -> None:
    run = load_record(FIXTURES / "report-run.json")
    first = run.results[0]
    hostile = replace(first, id=f"suites/x.py::test_{HOSTILE}", params={"kernel": HOSTILE})
    env = {**run.environment, "variables": {"TF_HOSTILE": HOSTILE}}
    html = render(replace(run, results=(hostile, *run.results[1:]), environment=env))
    assert HOSTILE not in html
    assert "&lt;script&gt;document.title=&#34;pwned&#34;&lt;/script&gt;" in html


def test_charts_are_registered_with_the_question_they_answer() -> None:
    assert {c.key for c in CHARTS} >= {"roofline", "memory_bandwidth", "gemm", "knobs"}
    assert all(c.answers.endswith("?") for c in CHARTS)


def test_report_and_compare_commands_write_html(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], repeated_runs
) -> None:
    out = tmp_path / "r.html"
    assert (
        main(
            [
                "report",
                str(FIXTURES / "report-run.json"),
                "--baseline",
                str(FIXTURES / "report-baseline.json"),
                "-o",
                str(out),
            ]
        )
        == 0
    )
    assert "<!DOCTYPE html>" in out.read_text()
    ab = tmp_path / "ab.html"
    pair = [*repeated_runs(FIXTURES / "report-baseline.json"), str(FIXTURES / "report-run.json")]
    assert main(["compare", *pair, "--html", str(ab)]) == 1
    assert "FAILED (1 regressed)" in ab.read_text()
    # The report judges as compare does, under compare's --fail-on: exit and banner agree.
    assert main(["compare", *pair, "--html", str(ab), "--fail-on", "fail"]) == 0
    html = ab.read_text()
    assert 'data-state="passed"' in html and "FAILED" not in html


def test_markdown_summary_puts_regressions_first() -> None:
    _, judged = ab_record()
    text = render_markdown(judged, Path("reports/x.html"))
    lines = text.splitlines()
    name = r"test\_stream\[tensorflow\-cpu\-triad\]"  # Markdown punctuation escaped
    assert lines[2].startswith(f"**FAILED (1 regressed)** Worst: {name}.")
    table = [line for line in lines if line.startswith(r"| test\_")]
    assert table[0].startswith(f"| {name}") and table[0].endswith("| regressed |")
    assert lines[-1] == "HTML report: reports/x\\.html"


CHECK = """
import numpy as np
from perfsuite.measure.loop import Reference, Workload
from perfsuite.model import Work

def test_copy(perf):
    a = np.random.default_rng(0).random(1 << 14)
    b = np.empty_like(a)
    perf.measure(Workload(check="toy", params={}, metric="bandwidth", unit="GB/s", scale=1e9,
        work=Work(2 * a.nbytes, "B"), run=lambda: np.copyto(b, a),
        reference=Reference("memory.bandwidth_gbs", 0.5, "gpu")))
"""


def test_session_writes_html_markdown_and_junit_properties(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_toy=CHECK)
    shutil_copy = (FIXTURES / "profiles" / "slowgpu.toml").read_text()
    (pytester.path / "profiles").mkdir()
    (pytester.path / "profiles" / "slowgpu.toml").write_text(shutil_copy)
    summary = pytester.path / "summary.md"
    result = pytester.runpytest(
        "--hw=slowgpu",
        "--perf-allow-missing-device",
        "--perf-profile-dir=profiles",
        "--perf-quick",
        f"--perf-markdown={summary}",
        "--junitxml=junit.xml",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["HTML report: *slowgpu*.html"])
    (html,) = (pytester.path / "reports" / "slowgpu").glob("*.html")
    assert "test_copy" in html.read_text()
    assert "**PASSED (1 check)**" in summary.read_text()
    case = ET.parse(pytester.path / "junit.xml").getroot().find(".//testcase")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["perf_metric"] == "bandwidth" and props["perf_unit"] == "GB/s"
    assert props["perf_floor"] == "pass" and props["perf_baseline"] == "new"
    assert float(props["perf_value"]) > 0
    assert "perfsuite.result" not in props, "the full result stays out of JUnit XML"


def test_html_can_be_switched_off(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_toy=CHECK)
    pytester.runpytest("--perf-quick", "--perf-html=no").assert_outcomes(passed=1)
    (folder,) = (p for p in (pytester.path / "reports").iterdir() if p.name != "_store")
    assert list(folder.glob("*.html")) == [] and len(list(folder.glob("*.json"))) == 1


def test_fixture_records_are_current() -> None:
    from perfsuite.model import SCHEMA_VERSION

    data = json.loads((FIXTURES / "report-run.json").read_text())
    assert data["schema_version"] == SCHEMA_VERSION and data["derived"]["roofline"]["points"]


def test_bad_html_option_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_toy=CHECK)
    result = pytester.runpytest("--perf-html=maybe")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --perf-html: expected yes or no, got 'maybe'"])


def test_what_changed_is_the_first_chart_worst_first() -> None:
    base, judged = ab_record()
    html = render(judged, baseline=base)
    charts = re.findall(r'<figure id="chart-([a-z_]+)"', html)
    assert charts[0] == "changes"
    figure = html[
        html.index('id="chart-changes"') : html.index("</figure>", html.index('id="chart-changes"'))
    ]
    compared = sorted(
        (
            r
            for r in judged.results
            if r.baseline.ratio is not None and r.baseline.ci_low is not None
        ),
        key=lambda r: r.baseline.ratio,
    )
    worst = compared[0].id.rsplit("::", 1)[-1]
    best = compared[-1].id.rsplit("::", 1)[-1]
    assert figure.index(worst) < figure.index(best)  # y axis inverted: worst drawn on top
    assert "tolerance" in figure


def test_reasons_fold_into_a_detail_that_opens_on_click() -> None:
    base, judged = ab_record()
    html = render(judged, baseline=base)
    table = html[html.index('<table id="verdicts">') : html.index("</table>")]
    assert table.count('<tr class="main"') == len(judged.results)
    assert table.count('<tr class="detail" hidden><td colspan="10">') == len(judged.results)
    assert '<button type="button" class="why" aria-expanded="false"' in table
    regressed = next(r for r in judged.results if r.baseline.verdict == "regressed")
    detail = table[table.index(regressed.id.rsplit("::", 1)[-1]) :]
    detail = detail[
        detail.index('<tr class="detail"') : detail.index(
            "</tr>", detail.index('<tr class="detail"')
        )
    ]
    assert "slower beyond 5%" in detail and "parameters: kernel=triad" in detail


def test_a_changed_check_says_in_its_detail_whether_its_bare_reference_moved() -> None:
    base, judged = ab_record()
    regressed = next(r for r in judged.results if r.baseline.verdict == "regressed")
    results = [
        replace(r, facts=replace(r.facts, reference_change=ReferenceChange(0.97, 5)))
        if r is regressed
        else r
        for r in judged.results
    ]
    html = render(replace(judged, results=results), baseline=base)
    table = html[html.index('<table id="verdicts">') : html.index("</table>")]
    assert "bare reference did not move with it (-3%)" in table
    assert table.count("bare reference") == 1, "only the check that has one"


def test_a_tolerated_regression_is_named_beside_noisy_checks() -> None:
    """--perf-fail-on fail with a regression and a noisy check: inconclusive, naming both."""
    from perfsuite.judge import outcome

    base, judged = ab_record()
    results = list(judged.results)
    calm = next(i for i, r in enumerate(results) if r.baseline.verdict == "ok")
    results[calm] = replace(
        results[calm], baseline=replace(results[calm].baseline, verdict="noisy")
    )
    record = replace(
        judged, results=tuple(results), settings={**judged.settings, "fail_on": ["fail"]}
    )
    verdict = outcome.session_verdict(record.results, ["fail"])
    assert verdict.state == "inconclusive"
    assert (
        headline(verdict) == "INCONCLUSIVE (1 noisy; 1 regressed not failing under --perf-fail-on)"
    )
    html = render(record, baseline=base)
    banner = html[html.index('id="banner"') : html.index("</div>", html.index('class="tolerated"'))]
    assert 'data-state="inconclusive"' in banner and "does not count as failing" in banner
    assert headline(verdict) in render_markdown(record)


def test_compare_lists_the_worst_first(capsys: pytest.CaptureFixture[str], repeated_runs) -> None:
    base = repeated_runs(FIXTURES / "report-baseline.json")
    assert main(["compare", *base, str(FIXTURES / "report-run.json")]) == 1
    lines = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("check "))
    assert lines[header + 1].split()[-1] == "regressed"


def test_a_gpu_runs_report_names_the_roofline_bound_and_shares_equal_ceilings() -> None:
    """A real H200 run (``fixtures/h200-run.json``), as the report renders it.

    Its conv floors are fractions of the roofline bound, not of the peak, and fp16 and bf16
    (both 989.5 TFLOP/s) share one labelled line.
    """
    record = Path(__file__).parent / "fixtures" / "h200-run.json"
    html = render(load_record(record))
    banner = html[html.index('id="banner"') : html.index("</div>", html.index('id="banner"'))]
    assert (
        "seed-128x128x16-n1-filter_grad]: fail, floor failed (1.3% of the roofline bound)" in banner
    )
    assert "fp16/bf16 990" in html and "fp16 990" not in html


def test_the_progress_line_counts_tests_and_estimates_the_rest() -> None:
    from perfsuite.report.terminal import progress_line

    assert progress_line(12, 86, 65.0) == "perfsuite: 12 of 86 tests in 1:05, about 6:41 to go"
    assert progress_line(0, 86, 3.0) == "perfsuite: 0 of 86 tests in 0:03"
    assert progress_line(86, 86, 400.0) == "perfsuite: 86 of 86 tests in 6:40"


def test_a_reference_that_is_not_a_peak_is_named_for_what_it_is() -> None:
    """The pipeline is set against the compute limit, CPU allreduce against a shm copy."""
    from perfsuite.model import FloorVerdict
    from perfsuite.report import of_reference

    def floor(figure: str, share: float, estimated: bool = False) -> FloorVerdict:
        return FloorVerdict("pass", fraction_of_peak=share, figure=figure, estimated=estimated)

    assert of_reference(floor("memory.bandwidth_gbs", 0.85)) == "85.0% of peak"
    assert of_reference(floor("compute.fp32_tflops", 0.4, True)) == "40.0% of peak (est.)"
    pipeline = floor("compute limit: compute.bf16_tflops / 2.46e+10 FLOP per sample", 168.2)
    assert of_reference(pipeline) == "168x compute limit"
    assert of_reference(floor("host.shm_copy_gbs (measured)", 0.12)) == "12.0% of shm copy"
    assert of_reference(floor("roofline", 0.5)) == "50.0% of the roofline bound"
    assert of_reference(FloorVerdict("no-reference")) == ""
