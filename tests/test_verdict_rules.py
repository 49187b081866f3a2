"""The verdict machinery end to end.

The family, xdist siblings, one outcome rule everywhere, adaptive samples and
detectability, multi-run baselines, and bad input.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import re
import shutil
import statistics
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from perfsuite.cli import main
from perfsuite.judge import outcome, stats
from perfsuite.model import ModeDifference, Result, RunRecord
from perfsuite.model.baseline import BaselineEntry, BaselineRun
from perfsuite.report.headline import headline
from perfsuite.report.html import render
from perfsuite.report.markdown import render_markdown
from perfsuite.report.terminal import format_result_lines

FIXTURES = Path(__file__).parent / "fixtures"

# Checks whose rate is set by a CPU-busy loop (so a sibling xdist worker really loads the
# machine) or by a sleep; ``test_rate[slow]`` is half as fast as ``test_rate[fast]``.
CHECKS = """
import time
import pytest
from perfsuite.measure.loop import Reference, Workload
from perfsuite.model import Work

def busy(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass

@pytest.mark.parametrize("name,seconds", [("fast", 0.002), ("slow", 0.004), ("other", 0.002)])
def test_rate(perf, name, seconds):
    perf.measure(Workload(
        check="rate", params={"name": name, "seconds": seconds}, metric="rate", unit="1/s",
        work=Work(1.0, "loops"), run=lambda: busy(seconds),
    ))
"""


DAY = dt.timedelta(days=1)


def write_baseline(
    root: Path,
    runs: dict[str, list[list[float]]],
    profile: str = "slowgpu",
    apart: dt.timedelta = DAY,
) -> Path:
    """A schema-2 baseline with the given runs per check, accepted ``apart`` from each other."""
    first = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    path = root / "baselines" / profile / "baseline.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    entries = {
        node_id: {
            "metric": "rate",
            "unit": "1/s",
            "higher_is_better": True,
            "runs": [
                {"run_id": f"r{i}", "created": (first + i * apart).isoformat(), "samples": s}
                for i, s in enumerate(samples)
            ],
        }
        for node_id, samples in runs.items()
    }
    path.write_text(
        json.dumps(
            {
                "schema_version": 2,
                "hardware_profile": profile,
                "environments": {},
                "entries": entries,
            }
        )
    )
    return path


def rate_runs(level: float, k: int = 5, n: int = 5) -> list[list[float]]:
    """Tight runs around ``level`` (0.5% apart), so a 2x change is unmistakable."""
    return [[level * (1 + 0.005 * ((i + j) % 3 - 1)) for j in range(n)] for i in range(k)]


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    shutil.copytree(FIXTURES / "profiles", pytester.path / "profiles")
    pytester.makeini(
        "[pytest]\nperf_profile_dir = profiles\nperf_allow_missing_device = true\nperf_quick = true\nperf_hw = slowgpu\n"
    )
    pytester.makepyfile(test_rates=CHECKS)
    pytester.makeconftest(FIXED_CLOCK)
    return pytester


# The verdicts these tests assert are about statistics, not about this machine: each sample
# takes the nominal time (a busy loop's length), whatever else the runner is doing.
FIXED_CLOCK = """
from perfsuite.testing import FixedClock

clock = FixedClock(lambda workload: workload.params["seconds"])

def pytest_perfsuite_measured(workload, measurement):
    return clock(workload, measurement)
"""


def last_record(pytester: pytest.Pytester) -> dict:
    paths = sorted((pytester.path / "reports" / "slowgpu").glob("*.json"))
    return json.loads(paths[-1].read_text())


def by_name(record: dict) -> dict[str, dict]:
    return {r["params"]["name"]: r for r in record["results"]}


def test_family_is_counted_after_deselection(project: pytest.Pytester) -> None:
    ids = [
        f"test_rates.py::test_rate[{n}-{s}]"
        for n, s in (("fast", 0.002), ("slow", 0.004), ("other", 0.002))
    ]
    write_baseline(project.path, {i: rate_runs(1e6) for i in ids})
    result = project.runpytest("-k", "fast")
    result.assert_outcomes(failed=1, deselected=2)
    record = last_record(project)
    assert record["settings"]["family"]["size"] == 1
    assert record["settings"]["family"]["correction"] == "fdr"
    assert record["settings"]["correction"] == "fdr"
    (entry,) = record["results"]
    assert entry["baseline"]["family_size"] == 1 and entry["baseline"]["verdict"] == "regressed"


def test_family_is_the_comparisons_made(project: pytest.Pytester) -> None:
    """A check with a baseline that skips when it runs (no device) is not in the family."""
    ids = [
        f"test_rates.py::test_rate[{n}-{s}]"
        for n, s in (("fast", 0.002), ("slow", 0.004), ("other", 0.002))
    ]
    gone = "test_gone.py::test_gone"
    project.makepyfile(
        test_gone="import pytest\n\ndef test_gone(perf):\n    pytest.skip('no device')\n"
    )
    write_baseline(project.path, {i: rate_runs(1e6) for i in [*ids, gone]})
    result = project.runpytest("-p", "no:cacheprovider", "--perf-samples", "5")
    result.assert_outcomes(failed=3, skipped=1)
    record = last_record(project)
    assert record["settings"]["family"]["size"] == 3
    assert record["settings"]["family"]["final"] is True
    assert {r["baseline"]["family_size"] for r in record["results"]} == {3}


@pytest.mark.integration
def test_xdist_siblings_are_not_foreign_load(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both workers burn CPU at once; neither counts the other as foreign load.

    The host may be busy with other work too (a CI runner): what each check calls foreign
    must then stay within what this test, counting the whole pytest it starts as its own,
    sees of that other work; a sibling counted as foreign would add about a core.
    """
    pytest.importorskip("xdist")
    from perfsuite.measure import noise

    (project.path / "conftest.py").unlink()  # real busy loops: this test is about load

    ids = [
        f"test_rates.py::test_rate[{n}-{s}]"
        for n, s in (("fast", 0.002), ("slow", 0.004), ("other", 0.002))
    ]
    write_baseline(project.path, {i: rate_runs(1e6) for i in ids})
    monkeypatch.setenv(noise.SESSION_PID_ENV, str(os.getpid()))
    before = noise.snapshot(with_gpus=False)
    result = project.runpytest_subprocess(
        "-n",
        "2",
        "-p",
        "no:cacheprovider",
        "--perf-samples",
        "100",
        "--perf-sample-seconds",
        "0.01",
        "--perf-html",  # the record is what this test reads
        "no",
    )
    host = noise.assess(before, noise.snapshot(with_gpus=False))
    record = last_record(project)
    for r in record["results"]:
        assert r["noise"]["foreign_cores"] <= host["foreign_cores"] + 0.4, (r["noise"], host)
        assert r["baseline"]["verdict"] == ("noisy" if r["noise"]["flags"] else "regressed")
    assert result.ret == pytest.ExitCode.TESTS_FAILED or host["flags"]
    # The controller collects no check, yet assembles every derived section of the record.
    sections = {"allreduce", "fidelity", "input_pipeline", "knob_speedups", "roofline"}
    assert sections <= set(record["derived"]), record["derived"].keys()


def test_one_outcome_rule_everywhere(
    project: pytest.Pytester, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pytest, terminal, Markdown, HTML, JUnit and compare all count the same outcomes."""
    ids = {
        n: f"test_rates.py::test_rate[{n}-{s}]"
        for n, s in (("fast", 0.002), ("slow", 0.004), ("other", 0.002))
    }
    fast = 1 / 0.002
    baseline_runs = {
        ids["fast"]: rate_runs(fast * 0.5),
        ids["slow"]: rate_runs(fast),
        ids["other"]: rate_runs(fast),
    }
    write_baseline(project.path, baseline_runs)
    (project.path / "baselines" / "slowgpu" / "waivers.toml").write_text(
        'schema_version = 1\n[[waiver]]\ntest = "*other*"\nreason = "never matches: not slower"\n'
    )
    result = project.runpytest(
        "--junitxml=junit.xml", "--perf-markdown=summary.md", "--perf-tolerance=0.3"
    )
    record_path = sorted((project.path / "reports" / "slowgpu").glob("*.json"))[-1]
    record = RunRecord.from_dict(json.loads(record_path.read_text()))
    counts = outcome.counts(record.results)
    assert counts["regressed"] == 1  # slow: half the baseline's rate
    # pytest: failing outcomes failed the test, the rest passed.
    result.assert_outcomes(failed=counts["fail"] + counts["regressed"], passed=counts["pass"])
    # Terminal: the outcome column.
    table = format_result_lines(project_profile(project), record.results)[2:]
    assert Counter(line.split()[-1] for line in table) == counts
    # The stored outcome and the rule agree.
    assert Counter(r.outcome for r in record.results) == counts
    # Markdown: the outcome column.
    md = (project.path / "summary.md").read_text()
    rows = [line for line in md.splitlines() if line.startswith(r"| test\_rate")]
    assert Counter(row.strip("|").split("|")[-1].strip() for row in rows) == counts
    assert render_markdown(record) in md
    # HTML: one outcome cell per row.
    html = render(record)
    assert Counter(re.findall(r'data-outcome="([a-z-]+)"', html)) == counts
    # JUnit: perf_outcome properties.
    props = [
        p.get("value")
        for p in ET.parse(project.path / "junit.xml").iter("property")
        if p.get("name") == "perf_outcome"
    ]
    assert Counter(props) == counts
    # compare: the run judged against its baseline's five runs, as records, counts the same.
    a_paths = []
    for i in range(5):
        a_results = tuple(
            replace(
                r,
                samples=tuple(baseline_runs[r.id][i]),
                summary=stats.summarize(baseline_runs[r.id][i]),
            )
            for r in record.results
        )
        a_path = tmp_path / f"a{i}.json"
        a_path.write_text(json.dumps(replace(record, run_id=f"a{i}", results=a_results).to_dict()))
        a_paths.append(str(a_path))
    capsys.readouterr()
    status = main(["compare", *a_paths, str(record_path), "--tolerance", "0.3"])
    printed = capsys.readouterr().out.splitlines()
    line = next(x for x in printed if re.fullmatch(r"(\d+ [a-z-]+)(, \d+ [a-z-]+)*", x))
    assert Counter({k: int(n) for n, k in (p.split() for p in line.split(", "))}) == counts
    assert status == (1 if counts["regressed"] else 0)


def test_every_view_states_the_session_verdict_under_fail_on(project: pytest.Pytester) -> None:
    """--perf-fail-on fail: the regressions do not fail the session, and every view says so.

    The terminal's last perfsuite line, the HTML banner, the Markdown headline and the exit
    status agree; the worse of two regressions comes first in each.
    """
    ids = {
        n: f"test_rates.py::test_rate[{n}-{s}]"
        for n, s in (("fast", 0.002), ("slow", 0.004), ("other", 0.002))
    }
    fast = 1 / 0.002
    # slow runs at a quarter of its baseline, other at half: slow is the worse.
    runs = {"fast": rate_runs(fast), "slow": rate_runs(fast * 2), "other": rate_runs(fast * 2)}
    write_baseline(project.path, {ids[name]: r for name, r in runs.items()})
    # A wide tolerance: a sleep on a busy runner overshoots, and "fast" must stay a pass.
    result = project.runpytest(
        "--perf-fail-on=fail", "--perf-markdown=summary.md", "-rA", "--perf-tolerance=0.4"
    )
    assert result.ret == 0
    record = RunRecord.from_dict(last_record(project))
    verdict = outcome.session_verdict(record.results, {"fail"})
    assert verdict.state == "passed" and len(verdict.tolerated) == 2
    assert [r.id for r in verdict.tolerated] == [ids["slow"], ids["other"]]
    lines = result.outlines
    last = max(i for i, line in enumerate(lines) if line.startswith("perfsuite: "))
    assert lines[last] == "perfsuite: " + headline(verdict)
    assert "2 regressed not failing under --perf-fail-on" in lines[last]
    # After pytest's short summary (-rA), before pytest's counts.
    assert last > max(i for i, line in enumerate(lines) if "short test summary" in line)
    html = render(record)
    assert 'data-state="passed"' in html and headline(verdict) in html
    assert html.index("test_rate[slow") < html.index("test_rate[other", html.index('id="banner"'))
    md = (project.path / "summary.md").read_text()
    assert f"**{headline(verdict)}**" in md
    rows = [line for line in md.splitlines() if line.startswith(r"| test\_rate")]
    assert rows[0].startswith(r"| test\_rate\[slow") and rows[1].startswith(r"| test\_rate\[other")
    # The default --perf-fail-on fails the same results, naming the worse first.
    assert outcome.session_verdict(record.results).exit_code == outcome.EXIT_REGRESSED
    assert headline(outcome.session_verdict(record.results)) == "FAILED (2 regressed)"


def project_profile(pytester: pytest.Pytester):  # type: ignore[no-untyped-def]
    from perfsuite.hardware.profile import ProfileRegistry

    return ProfileRegistry([pytester.path / "profiles"]).load("slowgpu")


_DAYS = itertools.count()


def _record(tmp_path: Path, name: str, samples: dict[str, list[float]]) -> Path:
    """A run record of the given samples, a day after the one before (a session each)."""
    data = json.loads((FIXTURES / "run-a-tf220.json").read_text())
    template = data["results"][0]
    data["run_id"] = name
    data["created"] = (dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + next(_DAYS) * DAY).isoformat()
    data["results"] = []
    for node_id, values in samples.items():
        r = json.loads(json.dumps(template))
        r["id"], r["samples"], r["seconds"] = node_id, values, [1.0] * len(values)
        r["noise"] = {"flags": []}
        data["results"].append(r)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return path


def test_compare_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tight = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2]
    a = [
        _record(tmp_path, f"a{i}", {"x::t": [v * (1 + 0.003 * i) for v in tight]}) for i in range(3)
    ]
    same = _record(tmp_path, "same", {"x::t": tight})
    slower = _record(tmp_path, "slower", {"x::t": [v * 0.7 for v in tight]})
    unsure = _record(tmp_path, "unsure", {"x::t": [40.0, 130.0, 80.0, 60.0, 110.0, 75.0]})
    assert main(["compare", *map(str, a), str(same)]) == outcome.EXIT_OK
    assert main(["compare", *map(str, a), str(slower)]) == outcome.EXIT_REGRESSED
    assert main(["compare", *map(str, a), str(unsure)]) == outcome.EXIT_INCONCLUSIVE
    out = capsys.readouterr().out
    assert "compare: INCONCLUSIVE (1 noisy) (exit 6)" in out
    assert "3 run(s) before" in out


def _session(tmp_path: Path, name: str, levels: list[float]) -> list[Path]:
    """One session in passes: each pass the same tight samples at its own level."""
    tight = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2]
    return [
        _record(tmp_path, f"{name}-{k}", {"x::t": [v * level for v in tight]})
        for k, level in enumerate(levels)
    ]


def test_compare_passes_keeps_each_checks_fastest_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A spell that slows one pass of a session is stepped over; a slowdown of every pass is not."""
    before = [
        p
        for i, levels in enumerate([[1.0, 0.6], [0.55, 1.003], [1.006, 0.98]])
        for p in _session(tmp_path, f"a{i}", levels)
    ]
    spell = _session(tmp_path, "spell", [0.6, 1.002])
    slower = _session(tmp_path, "slower", [0.7, 0.69])
    assert main(["compare", *map(str, before + spell), "--passes", "2"]) == outcome.EXIT_OK
    assert main(["compare", *map(str, before + slower), "--passes", "2"]) == (
        outcome.EXIT_REGRESSED
    )
    out = capsys.readouterr().out
    assert "sessions of 2 passes: each check kept from its fastest pass" in out
    assert "a1-0+a1-1: 1 from a1-1" in out  # the pass that missed the spell
    assert "3 session(s) before" in out
    # One pass alone, against the passes that missed the spells: the spell is a regression.
    calm = [before[0], before[3], before[4]]
    assert main(["compare", *map(str, calm), str(spell[0])]) == outcome.EXIT_REGRESSED


def test_fastest_passes_orients_latency_and_says_which_pass(tmp_path: Path) -> None:
    from perfsuite.judge.compare import fastest_passes
    from perfsuite.store.records import load_record

    paths = _session(tmp_path, "s", [1.0, 0.8, 1.2])
    for path in paths:  # the same samples read as latencies: lower is faster
        data = json.loads(path.read_text())
        data["results"][0]["higher_is_better"] = False
        path.write_text(json.dumps(data))
    merged = fastest_passes([load_record(p) for p in paths])
    (result,) = merged.results
    assert statistics.median(result.samples) == pytest.approx(80.1, rel=1e-3)
    passes = result.facts.passes
    assert passes is not None and passes.kept == "s-1"
    assert [run for run, _ in passes.medians] == ["s-0", "s-1", "s-2"]
    # In the record it is the facts' "passes", and it reads back typed.
    stored = result.to_dict()["facts"]["passes"]
    assert stored["kept"] == "s-1" and sorted(stored["medians"]) == ["s-0", "s-1", "s-2"]
    assert Result.from_dict(result.to_dict()).facts.passes == passes
    assert merged.run_id == "s-0+s-1+s-2"


def test_compare_passes_that_do_not_make_whole_sessions_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = [str(p) for p in _session(tmp_path, "s", [1.0, 1.0, 1.0, 1.0, 1.0])]
    assert main(["compare", *paths, "--passes", "2"]) == outcome.EXIT_USAGE
    assert "do not make whole sessions of 2 passes" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["compare", *paths, "--passes", "0"])
    assert exc.value.code == outcome.EXIT_USAGE
    # The same record twice in one session, and a session whose passes ran different stacks.
    assert main(["compare", paths[0], paths[0], *paths[2:4], "--passes", "2"]) == (
        outcome.EXIT_USAGE
    )
    assert "each run record counts once" in capsys.readouterr().err
    data = json.loads(Path(paths[1]).read_text())
    data["environment"] = {**data["environment"], "packages": {"tensorflow": "9.9.9"}}
    Path(paths[1]).write_text(json.dumps(data))
    assert main(["compare", *paths[:4], "--passes", "2"]) == outcome.EXIT_USAGE
    assert "are not passes of one session: their environments differ" in capsys.readouterr().err


def test_a_check_missing_from_a_pass_is_left_out_of_the_session(tmp_path: Path) -> None:
    from perfsuite.judge.compare import fastest_passes
    from perfsuite.store.records import load_record

    tight = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2]
    one = _record(tmp_path, "p0", {"x::t": tight, "x::u": tight})
    two = _record(tmp_path, "p1", {"x::t": [v * 0.9 for v in tight]})
    merged = fastest_passes([load_record(one), load_record(two)])
    assert [r.id for r in merged.results] == ["x::t"]
    passes = merged.results[0].facts.passes
    assert passes is not None
    assert dict(passes.medians) == pytest.approx({"p0": 100.1, "p1": 90.09})
    assert merged.derived == {}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--perf-samples", "1"],
            "--perf-samples: expected a whole number of repetitions from 3 to 10000",
        ),
        (["--perf-samples", "many"], "--perf-samples: expected a whole number"),
        (["--perf-tolerance", "0"], "--perf-tolerance: expected a fraction between 0 and 1"),
        (["--perf-tolerance", "-0.1"], "--perf-tolerance: expected a fraction between 0 and 1"),
        (["--perf-fail-on", "sometimes"], "--perf-fail-on: expected a comma-separated list"),
        (
            ["--perf-baseline-runs", "0"],
            "--perf-baseline-runs: expected a whole number from 1 to 1000",
        ),
        (["--perf-sample-seconds", "0"], "--perf-sample-seconds: expected seconds > 0 and <= 60"),
        (["--perf-sample-seconds", "1e9"], "--perf-sample-seconds: expected seconds > 0"),
        (["--perf-sample-seconds", "long"], "--perf-sample-seconds: expected seconds > 0"),
    ],
)
def test_bad_options_are_usage_errors(
    project: pytest.Pytester, args: list[str], message: str
) -> None:
    result = project.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}*"])


@pytest.mark.parametrize(
    "args",
    [
        ["--alpha", "5"],
        ["--tolerance", "-3"],
        ["--tolerance", "lots"],
        ["--fail-on", "never"],
        ["--correction", "bonferroni"],
    ],
)
def test_bad_compare_options_are_usage_errors(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    a = str(FIXTURES / "run-a-tf220.json")
    with pytest.raises(SystemExit) as exc:
        main(["compare", a, a, *args])
    assert exc.value.code == outcome.EXIT_USAGE
    assert "perfsuite compare: error: argument --" in capsys.readouterr().err


def test_fail_on_noisy_fails_the_session(project: pytest.Pytester) -> None:
    ids = {
        n: f"test_rates.py::test_rate[{n}-{s}]"
        for n, s in (("fast", 0.002), ("slow", 0.004), ("other", 0.002))
    }
    # A baseline of two samples: a 2x change is beyond any tolerance, but two samples are
    # never enough to confirm it, nor to clear it as noise.
    rate = 1 / 0.002
    write_baseline(project.path, {ids["fast"]: [[2 * rate, 2.002 * rate]]})
    project.runpytest("-k", "fast").assert_outcomes(passed=1, deselected=2)
    assert by_name(last_record(project))["fast"]["outcome"] == "noisy"
    project.runpytest("-k", "fast", "--perf-fail-on=regressed,noisy").assert_outcomes(
        failed=1, deselected=2
    )


def test_more_samples_where_the_baseline_needs_them_or_a_plain_warning(
    project: pytest.Pytester,
) -> None:
    ids = {
        n: f"test_rates.py::test_rate[{n}-{s}]"
        for n, s in (("fast", 0.002), ("slow", 0.004), ("other", 0.002))
    }
    rate = 1 / 0.002
    # Noisy runs (10% within-run spread) that agree with each other: 5 samples cannot see
    # 10%, more can.
    spread = (0.6, 0.8, 1.0, 1.2, 1.4, 0.7, 1.3, 1.0, 0.9, 1.1)
    noisy = [[rate * f * (1 + 0.002 * k) for f in spread] for k in range(3)]
    write_baseline(project.path, {ids["fast"]: noisy, ids["slow"]: noisy})
    result = project.runpytest("-k", "fast", "--perf-tolerance=0.35")
    record = last_record(project)
    fast = by_name(record)["fast"]
    assert len(fast["samples"]) > 5 and fast["policy"]["planned"] == 5
    # A tolerance no amount of samples can reach: said plainly, in terminal and record.
    result = project.runpytest("-k", "slow", "--perf-tolerance=0.001")
    slow = by_name(last_record(project))["slow"]
    blind = slow["baseline"]["cannot_detect"]
    assert blind["tolerance"] == 0.001 and blind["needed"] is None
    assert blind["limited_by"]["kind"] in {"spread", "within-run-scatter", "run-to-run"}
    assert blind["detectable"] > 0.001 and blind["samples"] == len(slow["samples"])
    assert "cannot detect a 0% change with" in slow["message"]
    result.stdout.fnmatch_lines(["detectability: 1 of 1 compared check(s) cannot detect*"])


def test_save_keeps_a_window_of_runs_and_migrates_schema_1(project: pytest.Pytester) -> None:
    path = project.path / "baselines" / "slowgpu" / "baseline.json"
    path.parent.mkdir(parents=True)
    shutil.copy(FIXTURES / "baselines" / "slowgpu-trivial.json", path)  # schema 1
    for _ in range(3):
        project.runpytest(
            "-k",
            "other",
            "--perf-save-baseline",
            "--perf-force-baseline",
            "--perf-baseline-runs=2",
            "--perf-fail-on=fail",  # about storage: a slow spell's verdict must not fail it
        ).assert_outcomes(passed=1, deselected=2)
    data = json.loads(path.read_text())
    assert data["schema_version"] == 2 and data["window"] == 2
    (other,) = [e for k, e in data["entries"].items() if "other" in k]
    assert len(other["runs"]) == 2
    old = data["entries"]["test_toy.py::test_toy"]  # the schema-1 entry, kept and migrated
    assert old["runs"][0]["run_id"] == "ref-slow"
    history = list((path.parent / "history").glob("baseline-*.json"))
    assert len(history) == 3


def test_runs_saved_back_to_back_are_one_session_of_a_young_baseline(
    project: pytest.Pytester,
) -> None:
    """Five runs minutes apart show one state of the machine: a 20% shift is not red."""
    fast = "test_rates.py::test_rate[fast-0.002]"
    baseline = {fast: rate_runs(1.25 / 0.002)}  # the fixed clock reads 1/0.002 per s
    write_baseline(project.path, baseline, apart=dt.timedelta(minutes=5))
    result = project.runpytest("-k", "fast", "--perf-samples=5")
    result.assert_outcomes(passed=1, deselected=2)
    (entry,) = last_record(project)["results"]
    verdict = entry["baseline"]
    assert verdict["verdict"] == "noisy" and verdict["between_source"] == "cautious"
    assert verdict["baseline_runs"] == 5 and verdict["baseline_sessions"] == 1
    assert "5 baseline runs from 1 session(s), judged with a cautious" in verdict["reason"]
    result.stdout.fnmatch_lines(["*1 check(s) have runs from 1 session(s) of the 3*"])
    # Where runs minutes apart do stand for runs days apart, the window can be closed.
    result = project.runpytest("-k", "fast", "--perf-samples=5", "--perf-baseline-window=0")
    result.assert_outcomes(failed=1, deselected=2)
    (entry,) = last_record(project)["results"]
    assert entry["baseline"]["verdict"] == "regressed"
    assert entry["baseline"]["baseline_sessions"] == 5
    # Runs from three sessions, 40 minutes apart, are judged with their own spread.
    write_baseline(project.path, baseline, apart=dt.timedelta(minutes=40))
    project.runpytest("-k", "fast", "--perf-samples=5").assert_outcomes(failed=1, deselected=2)
    result = project.runpytest("-k", "fast", "--perf-baseline-window=soon")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --perf-baseline-window: expected a duration of 0 or more: 30m, 1800s, 1h, got*"]
    )


def test_a_regressed_result_is_refused_by_the_baseline(project: pytest.Pytester) -> None:
    ids = {
        n: f"test_rates.py::test_rate[{n}-{s}]"
        for n, s in (("fast", 0.002), ("slow", 0.004), ("other", 0.002))
    }
    path = write_baseline(project.path, {ids["fast"]: rate_runs(1e6)})
    before = path.read_bytes()
    result = project.runpytest("-k", "fast", "--perf-save-baseline", "--perf-samples=5")
    result.stdout.fnmatch_lines(
        ["perfsuite: baseline NOT saved: 1 of 1 checks refused: 1 regressed, 1 quick mode;*"]
    )
    assert path.read_bytes() == before
    # A waiver makes the regression expected, not good: it stays out of the baseline too.
    (path.parent / "waivers.toml").write_text(
        'schema_version = 1\n[[waiver]]\ntest = "*fast*"\nreason = "known slowdown"\n'
    )
    result = project.runpytest("-k", "fast", "--perf-save-baseline", "--perf-samples=5")
    result.assert_outcomes(xfailed=1, deselected=2)
    result.stdout.fnmatch_lines(
        ["perfsuite: baseline NOT saved: 1 of 1 checks refused: 1 regressed (waived), 1 quick*"]
    )
    assert path.read_bytes() == before


def test_the_bare_reference_says_whether_the_machine_or_the_check_moved() -> None:
    from perfsuite.report.explain import reference_note

    assert "moved with it (-40%" in reference_note(0.55, 0.60)
    assert "moved with it (+30%" in reference_note(1.35, 1.30)
    assert "did not move with it (-1%" in reference_note(0.60, 0.99)
    assert "did not move with it (+0%" in reference_note(0.60, 0.999)
    assert "did not move with it (+20%" in reference_note(0.60, 1.20), (
        "a reference moving the other way is no excuse"
    )
    assert "did not move" in reference_note(0.50, 0.90), (
        "less than half the check's move (log scale)"
    )


def test_a_change_measured_in_another_mode_than_the_baseline_runs_says_so() -> None:
    from dataclasses import replace

    from perfsuite.judge.against import measured_unlike
    from perfsuite.model import BaselineVerdict
    from perfsuite.model.baseline import BaselineEntry, BaselineRun
    from perfsuite.report.explain import mode_tag

    full = {"mode": "full", "warmup_seconds": 0.5}
    entry = BaselineEntry(
        "matmul", "TFLOP/s", True, tuple(BaselineRun(f"r{i}", "", (1.0,), full) for i in range(3))
    )
    assert measured_unlike(full, entry) is None
    # the default mode measures each check as full mode does: their baselines compare
    assert measured_unlike({"mode": "default", "warmup_seconds": 0.5}, entry) is None
    assert measured_unlike({"mode": "quick", "warmup_seconds": 0.5}, None) is None
    legacy = BaselineEntry("matmul", "TFLOP/s", True, (BaselineRun("old", "", (1.0,), {}),))
    assert measured_unlike({"mode": "quick"}, legacy) is None, "no mode recorded: no claim"
    unlike = measured_unlike({"mode": "quick", "warmup_seconds": 0.1}, entry)
    assert unlike == ModeDifference(
        mode="quick",
        warmup_seconds=0.1,
        baseline_modes=("full",),
        baseline_warmup_seconds=(0.5,),
        sample_seconds=None,
        baseline_sample_seconds=(),
    )
    result = RunRecord.from_dict(json.loads((FIXTURES / "run-a-tf220.json").read_text())).results[0]
    result = replace(result, facts=replace(result.facts, measured_unlike_baseline=unlike))
    for verdict, tagged in (("regressed", True), ("noisy", True), ("ok", False)):
        judged = replace(result, baseline=BaselineVerdict(verdict=verdict))
        tag = mode_tag(judged)
        assert (tag == "measured in quick mode (warm-up 0.1 s) against baseline runs in full "
                "mode (warm-up 0.5 s)") is tagged, (verdict, tag)  # fmt: skip


FAMILY_ARGS = ("-p", "no:cacheprovider", "--perf-alpha=0.2", "--perf-tolerance=0.3",
               "--perf-samples=5")  # fmt: skip


def half_speed_family(project: pytest.Pytester) -> dict[str, str]:
    """Baselines at twice the rates' speed whose runs scatter by about 30%: p about 0.09."""
    ids = {
        n: f"test_rates.py::test_rate[{n}-{s}]"
        for n, s in (("fast", 0.002), ("slow", 0.004), ("other", 0.002))
    }
    scatter = (1.0, 1.5, 0.7, 1.3, 0.8)

    def runs(level: float) -> list[list[float]]:
        return [
            [level * f * (1 + 0.005 * ((i + j) % 3 - 1)) for j in range(5)]
            for i, f in enumerate(scatter)
        ]

    write_baseline(
        project.path,
        {ids["fast"]: runs(960.0), ids["slow"]: runs(480.0), ids["other"]: runs(960.0)},
    )
    return ids


def test_significance_is_final_over_the_whole_family(project: pytest.Pytester) -> None:
    """A check judged first, before the family's other p-values were in, is decided again.

    Every check runs at half its baseline, whose runs scatter by about 30% (so p is about
    0.09 each).  Benjamini-Hochberg at alpha 0.2 over 3: the first check alone needs 0.067
    and is noisy when its test ends; with the second in, 0.133 suffices.  At the end of the
    session all three are regressed everywhere: record, terminal, pytest and JUnit.
    """
    ids = half_speed_family(project)
    result = project.runpytest(*FAMILY_ARGS, "--junitxml=junit.xml")
    record = by_name(last_record(project))
    first = record["fast"]["baseline"]
    assert 0.2 / 3 < first["p_value"] < 0.2 * 2 / 3, first  # the design holds on this machine
    assert {n: r["outcome"] for n, r in record.items()} == dict.fromkeys(ids, "regressed")
    assert all(r["baseline"]["final"] and r["baseline"]["significant"] for r in record.values())
    assert "once the session's whole family of 3 was in" in first["reason"]
    assert last_record(project)["settings"]["family"]["final"] is True
    result.assert_outcomes(failed=3)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["whole family: 1 regressed once all 3 comparisons were in*"])
    props = [
        p.get("value")
        for p in ET.parse(project.path / "junit.xml").iter("property")
        if p.get("name") == "perf_outcome"
    ]
    assert props == ["regressed"] * 3
    suite = next(ET.parse(project.path / "junit.xml").iter("testsuite"))
    assert suite.get("failures") == "3"


def test_a_late_outcome_moves_the_exit_status_and_a_waiver_makes_it_an_xfail(
    project: pytest.Pytester,
) -> None:
    """The first check is noisy when its test ends and regressed at the end of the session.

    Under ``--perf-fail-on noisy`` it failed for being noisy: it passes at the end, and so
    does the session.  With a waiver on it, it ends an expected failure, as it would have
    been had it been decided when its test ran.
    """
    half_speed_family(project)
    result = project.runpytest(*FAMILY_ARGS, "--perf-fail-on=noisy", "--junitxml=junit.xml")
    result.assert_outcomes(passed=3)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["perfsuite: PASSED*"])
    suite = next(ET.parse(project.path / "junit.xml").iter("testsuite"))
    assert suite.get("failures") == "0"
    # Stopped by -x at that failure, the session never ran the other checks: it stays failed.
    result = project.runpytest(*FAMILY_ARGS, "--perf-fail-on=noisy", "-x")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED

    (project.path / "baselines" / "slowgpu" / "waivers.toml").write_text(
        'schema_version = 1\n[[waiver]]\ntest = "*fast*"\nreason = "known slowdown"\n'
    )
    result = project.runpytest(*FAMILY_ARGS, "--junitxml=junit.xml")
    result.assert_outcomes(failed=2, xfailed=1)
    assert {n: r["outcome"] for n, r in by_name(last_record(project)).items()} == {
        "fast": "waived", "slow": "regressed", "other": "regressed"
    }  # fmt: skip
    suite = next(ET.parse(project.path / "junit.xml").iter("testsuite"))
    assert (suite.get("failures"), suite.get("skipped")) == ("2", "1")
    (skipped,) = suite.iter("skipped")
    assert skipped.get("type") == "pytest.xfail" and "known slowdown" in skipped.get("message", "")


def test_late_outcomes_rewrite_a_junit_file(tmp_path: Path) -> None:
    """The JUnit file written at session finish is amended in place; a broken one is left."""
    from dataclasses import replace

    from perfsuite.late import amend_junit, junit_address
    from perfsuite.model import Result

    data = json.loads((FIXTURES / "report-run.json").read_text())
    result = Result.from_dict(data["results"][0])
    late = replace(
        result, outcome="regressed", baseline=replace(result.baseline, verdict="regressed")
    )
    classname, name = junit_address(result.id, "nightly")
    assert classname == "nightly.suites.test_conv_roofline" and name.startswith("test_conv[")
    assert junit_address("a/b.py::TestX::test_y[1]") == ("a.b.TestX", "test_y[1]")
    assert junit_address("t.py::test_x[a::b/c]") == ("t", "test_x[a::b/c]")
    path = tmp_path / "junit.xml"
    path.write_text(
        '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite failures="0" tests="2">'
        f'<testcase classname="{classname}" name="{name}"><properties>'
        '<property name="perf_outcome" value="noisy"/><property name="perf_baseline" value="noisy"/>'
        '</properties></testcase><testcase classname="x" name="y"/></testsuite></testsuites>'
    )
    assert amend_junit(path, {result.id: late}, frozenset({"regressed"}), "nightly") == 1
    suite = next(ET.parse(path).iter("testsuite"))
    assert suite.get("failures") == "1"
    values = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert values == {"perf_outcome": "regressed", "perf_baseline": "regressed"}
    assert len(list(suite.iter("failure"))) == 1
    # With --perf-fail-on noisy, a check that failed for being noisy passes once improved.
    improved = replace(late, outcome="pass", baseline=replace(late.baseline, verdict="improved"))
    assert amend_junit(path, {result.id: improved}, frozenset({"regressed"}), "nightly") == 1
    # A case that failed for being noisy: its perf_outcome property says so (not its text).
    path.write_text(
        re.sub(r'name="perf_outcome" value="[a-z]+"', 'name="perf_outcome" value="noisy"',
               path.read_text())
    )  # fmt: skip
    assert amend_junit(path, {result.id: improved}, frozenset({"noisy"}), "nightly") == 1
    suite = next(ET.parse(path).iter("testsuite"))
    assert suite.get("failures") == "0" and not list(suite.iter("failure"))
    path.write_text("<not xml")
    assert amend_junit(path, {result.id: late}, frozenset({"regressed"})) == 0
    assert path.read_text() == "<not xml"


def test_a_failure_is_judged_noisy_by_its_recorded_outcome_never_by_its_text(
    tmp_path: Path,
) -> None:
    """A regression whose message happens to say "noisy: " keeps its failure."""
    from dataclasses import replace

    from perfsuite.late import amend_junit, junit_address

    data = json.loads((FIXTURES / "report-run.json").read_text())
    result = Result.from_dict(data["results"][0])
    improved = replace(
        result, outcome="pass", baseline=replace(result.baseline, verdict="improved")
    )
    classname, name = junit_address(result.id)
    path = tmp_path / "junit.xml"
    case = (
        '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite failures="1" tests="1">'
        f'<testcase classname="{classname}" name="{name}"><properties>'
        '<property name="perf_outcome" value="{then}"/></properties>'
        '<failure message="noisy: the text says so">noisy: </failure></testcase></testsuite></testsuites>'
    )
    fail_on = frozenset({"regressed", "noisy"})
    path.write_text(case.format(then="regressed"))
    assert amend_junit(path, {result.id: improved}, fail_on) == 1
    assert len(list(ET.parse(path).iter("failure"))) == 1
    path.write_text(case.format(then="noisy"))
    assert amend_junit(path, {result.id: improved}, fail_on) == 1
    assert not list(ET.parse(path).iter("failure"))


def test_a_waiver_follows_the_verdict_decided_again() -> None:
    """Session end and perfsuite compare decide a verdict again; the waiver follows it."""
    from perfsuite.judge.waivers import rejudged
    from perfsuite.model.rules import WaiverState

    waiver = WaiverState("t", "known", "stale")
    assert rejudged(waiver, "regressed") == replace(waiver, status="applied")
    assert rejudged(replace(waiver, status="applied"), "ok") == waiver
    expired = replace(waiver, status="expired")
    assert rejudged(expired, "regressed") == expired
    assert rejudged(None, "regressed") is None
    # In the record it is the object it always was, and it reads back typed.
    stored = {"test": "t", "reason": "known", "expires": None, "status": "stale"}
    assert waiver.to_dict() == stored and WaiverState.read(stored) == waiver


def test_a_baseline_taken_back_to_back_is_named(project: pytest.Pytester) -> None:
    """Five runs accepted in the same minute understate the spread: the session says so."""
    ids = [f"test_rates.py::test_rate[{n}-{s}]" for n, s in (("fast", 0.002), ("other", 0.002))]
    write_baseline(project.path, {i: rate_runs(500.0) for i in ids}, apart=dt.timedelta(0))
    result = project.runpytest("-k", "fast or other", "--perf-fail-on=fail")
    result.stdout.fnmatch_lines(["baseline: 2 check(s) have runs from 1 session(s) of the 3*"])
    record = last_record(project)
    assert all(r["facts"]["baseline_span_s"] == 0 for r in record["results"])
    html = next((project.path / "reports" / "slowgpu").glob("*.html")).read_text()
    assert 'id="baseline-note"' in html and "runs from 1 session(s)" in html
    # Judged with their own spread all the same (the window closed), the runs are named.
    window = "--perf-baseline-window=0"
    result = project.runpytest("-k", "fast or other", "--perf-fail-on=fail", window)
    result.stdout.fnmatch_lines(["baseline: its runs were accepted within 0 min of each other*"])


def test_a_baseline_spread_over_hours_needs_no_note() -> None:
    from perfsuite.report.notes import baseline_note

    record = RunRecord.from_dict(json.loads((FIXTURES / "report-run.json").read_text()))
    hours = [replace(r, facts=replace(r.facts, baseline_span_s=7200)) for r in record.results]
    assert baseline_note(hours) == ""
    minutes = [replace(r, facts=replace(r.facts, baseline_span_s=180)) for r in record.results]
    assert "within 3 min" in baseline_note(minutes)


@pytest.mark.integration  # real calibration: calls per sample on this machine
def test_the_sample_length_option_sets_every_check_s_policy(project: pytest.Pytester) -> None:
    """--perf-sample-seconds reaches the calibration (more calls a sample) and the record."""
    project.runpytest("-k", "fast", "--perf-samples=3").assert_outcomes(passed=1, deselected=2)
    (short,) = last_record(project)["results"]
    project.runpytest("-k", "fast", "--perf-samples=3", "--perf-sample-seconds=0.5")
    record = last_record(project)
    (long,) = record["results"]
    assert record["settings"]["sample_seconds"] == 0.5
    assert long["policy"]["sample_seconds"] == 0.5
    assert short["policy"]["sample_seconds"] == 0.1  # quick mode's
    # a call of this check takes about 2 ms: 0.5 s needs several times the calls of 0.1 s
    assert long["policy"]["calls_per_sample"] > 2 * short["policy"]["calls_per_sample"]


def test_a_change_measured_with_other_sample_lengths_than_the_baseline_says_so(
    tmp_path: Path,
) -> None:
    """The length a baseline run asked for (its run policy) survives the check's measured one."""
    from dataclasses import replace

    from perfsuite.judge.against import measured_unlike
    from perfsuite.model import BaselineVerdict
    from perfsuite.report.explain import mode_tag
    from perfsuite.store.baseline import BaselineStore

    path = write_baseline(tmp_path, {"t.py::test_gemm": rate_runs(100.0, k=2)})
    data = json.loads(path.read_text())
    quick = {"mode": "quick", "warmup_seconds": 0.1, "sample_seconds": 0.1}
    data["run_policies"] = {"r0": quick, "r1": quick}
    for run in data["entries"]["t.py::test_gemm"]["runs"]:
        run["policy"] = {"samples": 5, "sample_seconds": 0.104}  # as measured
    path.write_text(json.dumps(data))
    (entry,) = BaselineStore(tmp_path / "baselines").load("slowgpu").entries.values()
    assert {r.policy["sample_target"] for r in entry.runs} == {0.1}
    assert measured_unlike(quick, entry) is None
    longer = measured_unlike({**quick, "sample_seconds": 1.0}, entry)
    assert longer is not None and longer.baseline_sample_seconds == (0.1,)
    result = RunRecord.from_dict(json.loads((FIXTURES / "run-a-tf220.json").read_text())).results[0]
    result = replace(
        result,
        facts=replace(result.facts, measured_unlike_baseline=longer),
        baseline=BaselineVerdict(verdict="regressed"),
    )
    assert mode_tag(result) == (
        "measured in quick mode (warm-up 0.1 s, 1 s samples) against baseline runs in quick "
        "mode (warm-up 0.1 s, 0.1 s samples)"
    )


def test_the_adaptive_cap_counts_this_run_s_sample_length(tmp_path: Path) -> None:
    """Extra samples stop at the mode's time cap (3 s quick) at the length this run asks for."""
    import datetime as dt

    import numpy as np

    from perfsuite.hardware.profile import ProfileRegistry
    from perfsuite.judge.verdict import Judge
    from perfsuite.measure.loop import Work, Workload
    from perfsuite.model.rules import Tolerances
    from perfsuite.settings import Settings
    from perfsuite.store.baseline import BaselineStore

    rng = np.random.default_rng(1)
    runs = [list(100 * np.exp(0.03 * rng.standard_normal(5))) for _ in range(5)]
    write_baseline(tmp_path, {"t.py::test_rate": runs})
    workload = Workload(
        check="rate", params={}, metric="rate", unit="1/s", work=Work(1.0, "loops"),
        run=lambda: None,
    )  # fmt: skip

    def rounds(**settings: float) -> int:
        judge = Judge(
            Settings(quick=True, tolerance=0.04, **settings),  # type: ignore[arg-type]
            ProfileRegistry([FIXTURES / "profiles"]).load("slowgpu"),
            BaselineStore(tmp_path / "baselines").load("slowgpu"),
            Tolerances(),
            [],
            dt.date(2026, 1, 1),
        )
        plan = judge.plan("t.py::test_rate", workload, None)
        assert plan.needed is not None and plan.needed > plan.planned == 5
        return plan.rounds

    assert rounds() > 5  # 0.1 s samples: up to 15 within 3 s
    assert rounds(sample_seconds=1.0) == 5  # 1 s samples: the cap leaves the planned 5


def _timed_entry(*timers: str) -> BaselineEntry:

    runs = tuple(
        BaselineRun(f"run{i}", "2026-12-01T00:00:00", (1.0, 1.0), {"timer": t} if t else {})
        for i, t in enumerate(timers)
    )
    return BaselineEntry("latency", "µs", False, runs)


def test_a_check_timed_unlike_every_baseline_run_is_flagged_with_both_timers() -> None:
    """MPI's C loop against a baseline of mpi4py's calls: flagged, never judged alike."""
    from perfsuite.judge.against import timer_unlike
    from perfsuite.model import FlagKind
    from perfsuite.report.explain import flag_words

    flag = timer_unlike(
        "C loop in the rank over mpi4py's communicator", _timed_entry("mpi4py loop")
    )
    assert flag is not None and flag.kind is FlagKind.TIMER_UNLIKE_BASELINE
    assert flag.baseline_timers == ("mpi4py loop",)
    assert "mpi4py loop" in flag_words(flag) and "C loop" in flag_words(flag)
    assert flag == type(flag).read(flag.to_dict())  # survives the record


@pytest.mark.parametrize(
    ("now", "then"),
    [
        ("mpi4py loop", ("mpi4py loop", "C loop")),  # one baseline run timed alike
        ("pytest-benchmark", ("perf_counter",)),  # one clock under two names
        ("child-jsonl", ("",)),  # runs that recorded no timer
    ],
)
def test_a_check_timed_like_a_baseline_run_is_not_flagged(now: str, then: tuple[str, ...]) -> None:
    from perfsuite.judge.against import timer_unlike

    assert timer_unlike(now, _timed_entry(*then)) is None


def test_the_session_verdict_is_stated_on_each_junit_suite(tmp_path: Path) -> None:
    """The third rewrite: each test suite carries the session's verdict and headline, once."""
    from collections import Counter

    from perfsuite.late import state_junit

    path = tmp_path / "junit.xml"
    path.write_text(
        '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite tests="1">'
        '<testcase classname="x" name="y"/></testsuite></testsuites>'
    )
    verdict = outcome.SessionVerdict("interrupted", Counter({"pass": 1}))
    assert state_junit(path, verdict) and state_junit(path, verdict)  # rewriting twice: once
    props = [(p.get("name"), p.get("value")) for p in ET.parse(path).iter("property")]
    assert props == [
        ("perfsuite_verdict", "interrupted"),
        ("perfsuite_headline", headline(verdict)),
    ]
    path.write_text("<not xml")
    assert not state_junit(path, verdict)
    assert not state_junit(tmp_path / "missing.xml", verdict)
