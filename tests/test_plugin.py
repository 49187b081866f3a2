"""The plugin's behaviour, driven through pytester."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from perfsuite.judge import outcome
from perfsuite.model import Result
from perfsuite.report.explain import floor_reason

FIXTURES = Path(__file__).parent / "fixtures"
SUITE = Path(__file__).parent.parent / "suites" / "test_memory_bandwidth.py"

TOY_CHECK = """
import numpy as np
import pytest
from perfsuite.measure.loop import Reference, Workload
from perfsuite.model import Work

def copy_workload():
    a = np.random.default_rng(0).random(1 << 15)
    b = np.empty_like(a)
    return Workload(
        check="toy", params={"n": a.size}, metric="bandwidth", unit="GB/s",
        work=Work(2 * a.nbytes, "B", "copy"), run=lambda: np.copyto(b, a), scale=1e9,
        reference=Reference("memory.bandwidth_gbs", 0.5, "gpu"),
    )

def test_toy(perf):
    perf.measure(copy_workload())
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project with the toy check and the test profiles."""
    pytester.makepyfile(test_toy=TOY_CHECK)
    shutil.copytree(FIXTURES / "profiles", pytester.path / "profiles")
    pytester.makeini(
        "[pytest]\nperf_profile_dir = profiles\nperf_allow_missing_device = true\nperf_quick = true\n"
    )
    return pytester


def records(pytester: pytest.Pytester, profile: str) -> list[dict]:
    return [
        json.loads(p.read_text())
        for p in sorted((pytester.path / "reports" / profile).glob("*.json"))
    ]


def test_options_are_in_a_perfsuite_group(pytester: pytest.Pytester) -> None:
    out = pytester.runpytest("--help").stdout.str()
    section = out[out.index("perfsuite performance checks:") :]
    for flag in (
        "--hw",
        "--perf-baseline-dir",
        "--perf-save-baseline",
        "--perf-quick",
        "--perf-tolerance",
    ):
        assert flag in section
    for ini in (
        "perf_hw",
        "perf_baseline_dir",
        "perf_save_baseline",
        "perf_quick",
        "perf_tolerance",
    ):
        assert f"{ini} (" in out


def test_unknown_hw_is_a_one_line_usage_error(project: pytest.Pytester) -> None:
    result = project.runpytest("--hw=a1000")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert errors == [
        "ERROR: unknown hardware profile 'a1000'; did you mean a100, a100-80gb or v100? (known: "
        "a100, a100-80gb, a100-80gb-pcie, a100-pcie, fastgpu, h100-nvl, h100-pcie, h100-sxm, "
        "h200, h200-nvl, mi250x, nobw, slowgpu, v100, or auto for this machine)"
    ]
    assert "Traceback" not in result.stdout.str()


def test_hw_can_be_set_as_an_ini_key(project: pytest.Pytester) -> None:
    project.makeini(
        "[pytest]\nperf_profile_dir = profiles\nperf_allow_missing_device = true\nperf_hw = nonesuch\n"
    )
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: unknown hardware profile 'nonesuch'*"])


def test_malformed_profile_is_a_usage_error_naming_file_and_field(project: pytest.Pytester) -> None:
    bad = project.path / "profiles" / "broken.toml"
    bad.write_text(
        (project.path / "profiles" / "slowgpu.toml")
        .read_text()
        .replace('"slowgpu"', '"broken"')
        .replace("bandwidth_gbs = 0.000001", "bandwidth_gbs = -1")
    )
    result = project.runpytest("--hw=broken")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: {bad}: field 'memory.bandwidth_gbs' must be a positive number, got -1"]
    )


def test_a_named_gpu_profile_without_a_gpu_is_an_error(pytester: pytest.Pytester) -> None:
    """A nightly GPU job whose GPU has disappeared must not stay green."""
    pytester.makepyfile(test_toy=TOY_CHECK)
    shutil.copytree(FIXTURES / "profiles", pytester.path / "profiles")
    pytester.makeini("[pytest]\nperf_profile_dir = profiles\nperf_quick = true\n")
    result = pytester.runpytest("--hw=slowgpu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --hw=slowgpu: profile 'slowgpu' describes a GPU, but no GPU is visible*"]
    )
    pytester.runpytest("--hw=slowgpu", "--perf-allow-missing-device").assert_outcomes(passed=1)


def test_empty_hw_is_a_usage_error(project: pytest.Pytester) -> None:
    result = project.runpytest("--hw=")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --hw: empty profile name*"])


def test_bad_tolerance_is_a_usage_error(project: pytest.Pytester) -> None:
    result = project.runpytest("--hw=slowgpu", "--perf-tolerance=lots")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --perf-tolerance: expected a fraction*got 'lots'"])


def test_floor_pass_and_new_baseline(project: pytest.Pytester) -> None:
    result = project.runpytest("--hw=slowgpu")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*test_toy*bandwidth*GB/s*pass*new*pass*", "run record: *slowgpu*.json"]
    )
    (record,) = records(project, "slowgpu")
    (entry,) = record["results"]
    assert entry["floor"]["verdict"] == "pass" and entry["baseline"]["verdict"] == "new"
    assert entry["outcome"] == "pass" and entry["work"] == {
        "amount": 2 * 8 * 2**15,
        "unit": "B",
        "convention": "copy",
    }
    assert len(entry["samples"]) == entry["summary"]["n"] == 5
    # Each sample is the counted work of its calls over its raw duration, in GB/s (1e9 B/s).
    calls = entry["policy"]["calls_per_sample"]
    assert calls >= 1 and entry["policy"]["call_seconds"] > 0
    expected = [entry["work"]["amount"] * calls / t / 1e9 for t in entry["seconds"]]
    assert entry["samples"] == pytest.approx(expected)
    assert entry["floor"]["value"] == max(entry["samples"])
    assert record["hardware_profile"]["name"] == "slowgpu"


def test_floor_failure_fails_the_test_with_value_and_reference(project: pytest.Pytester) -> None:
    result = project.runpytest("--hw=fastgpu")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*floor: best * GB/s is below 5e+11 GB/s (50% of fastgpu memory.bandwidth_gbs = 1e+12)*"]
    )
    (record,) = records(project, "fastgpu")
    assert record["results"][0]["floor"]["verdict"] == "fail"
    assert record["results"][0]["outcome"] == "fail"


LOADED_MACHINE = """
import itertools
import pytest
from perfsuite.measure.noise import Snapshot

READINGS = itertools.count()


@pytest.hookimpl(tryfirst=True)
def pytest_perfsuite_noise_snapshot(with_gpus):
    # A core's worth of other work: each reading a second later, with a second more of
    # other work (foreign CPU time grows as fast as the wall clock).
    now = float(next(READINGS))
    return Snapshot(wall=now, busy=now, steal=0.0, own=0.0, load=(), cpu_mhz=None)
"""


def test_a_floor_missed_under_foreign_load_is_never_a_red_fail(project: pytest.Pytester) -> None:
    """The run flagged its own evidence: the miss is inconclusive, and every view says so."""
    project.makeconftest(LOADED_MACHINE)
    result = project.runpytest("--hw=fastgpu", "--perf-markdown=summary.md")
    result.assert_outcomes(passed=1)
    assert result.ret == outcome.EXIT_INCONCLUSIVE  # undecided is not a pass
    result.stdout.fnmatch_lines(
        ["floors:    1 fail (under load)", "perfsuite: INCONCLUSIVE (1 noisy)*"]
    )
    (record,) = records(project, "fastgpu")
    entry = record["results"][0]
    assert entry["floor"]["verdict"] == "fail" and entry["noise"]["flags"]
    assert entry["outcome"] == "noisy"
    assert "INCONCLUSIVE (1 noisy)" in (project.path / "summary.md").read_text()


def test_marker_overrides_the_floor_fraction(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_toy=TOY_CHECK.replace("def test_toy", "@pytest.mark.perf(floor=1e-30)\ndef test_toy")
    )
    project.runpytest("--hw=fastgpu").assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("hw", "reference", "reason"),
    [
        (
            "nobw",
            'Reference("interconnect.bandwidth_gbs", 0.5, "cpu")',
            "profile 'nobw' has no interconnect.bandwidth_gbs",
        ),
        (
            "slowgpu",
            'Reference("memory.bandwidth_gbs", 0.5, "cpu")',
            "profile 'slowgpu' describes a gpu; it has no memory.bandwidth_gbs "
            "for a cpu measurement",
        ),
    ],
)
def test_no_reference_is_reported_not_silent(
    project: pytest.Pytester, hw: str, reference: str, reason: str
) -> None:
    toy = TOY_CHECK.replace('Reference("memory.bandwidth_gbs", 0.5, "gpu")', reference)
    project.makepyfile(test_toy=toy)
    result = project.runpytest(f"--hw={hw}")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_toy*no-reference*new*", "no floor: 1 *"])
    (record,) = records(project, hw)
    floor = Result.from_dict(record["results"][0]).floor
    assert floor.verdict == "no-reference" and floor_reason(floor) == reason


def test_a_cpu_profile_without_a_bandwidth_is_judged_against_the_measured_copy(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(test_toy=TOY_CHECK.replace('0.5, "gpu"', '0.5, "cpu"'))
    result = project.runpytest("--hw=nobw")
    result.assert_outcomes(passed=1)
    (record,) = records(project, "nobw")
    floor = Result.from_dict(record["results"][0]).floor
    assert floor.verdict in ("pass", "fail") and floor.estimated
    assert floor.figure == "memory.bandwidth_gbs"
    labels = record["hardware_profile"]["labels"]
    assert labels["memory.bandwidth_source"].startswith("STREAM copy measured on this host")


def test_regression_fails_and_improvement_passes(project: pytest.Pytester) -> None:
    base = project.path / "baselines" / "slowgpu"
    base.mkdir(parents=True)
    shutil.copy(FIXTURES / "baselines" / "slowgpu-unreachable.json", base / "baseline.json")
    result = project.runpytest("--hw=slowgpu")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*regression: median * GB/s against baseline 1e+09 GB/s "
            "(ratio *tolerance 5%, 1 baseline run(s))*"
        ]
    )
    shutil.copy(FIXTURES / "baselines" / "slowgpu-trivial.json", base / "baseline.json")
    result = project.runpytest("--hw=slowgpu")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_toy*pass*improved*"])


def test_baseline_round_trip(project: pytest.Pytester) -> None:
    # Quick mode (the project's ini) is refused unless forced.
    refused = project.runpytest("--hw=slowgpu", "--perf-save-baseline")
    refused.assert_outcomes(passed=1)
    assert refused.ret == pytest.ExitCode.TESTS_FAILED  # asked to save, saved nothing
    refused.stdout.fnmatch_lines(
        [
            "baseline: refused test_toy (quick mode)",
            "perfsuite: PASSED (1 check)",
            "perfsuite: baseline NOT saved: 1 of 1 checks refused: 1 quick mode; "
            "--perf-force-baseline saves them anyway",
        ]
    )
    assert not (project.path / "baselines" / "slowgpu" / "baseline.json").exists()
    for r in records(project, "slowgpu"):
        (project.path / "reports" / "slowgpu" / f"{r['run_id']}.json").unlink()
    result = project.runpytest("--hw=slowgpu", "--perf-save-baseline", "--perf-force-baseline")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["baseline saved: 1 entries into *baseline.json"])
    saved = json.loads((project.path / "baselines" / "slowgpu" / "baseline.json").read_text())
    (run,) = records(project, "slowgpu")
    entry = saved["entries"]["test_toy.py::test_toy"]
    (stored,) = entry["runs"]
    assert stored["run_id"] == run["run_id"] and stored["samples"] == run["results"][0]["samples"]
    shared = saved["run_policies"][run["run_id"]]  # the run's policy, stored once
    assert shared["mode"] == "quick" and shared["forced"] is True
    assert stored["policy"]["samples"] == 5 and stored["policy"]["source"] == "clock"
    result = project.runpytest("--hw=slowgpu", "--perf-tolerance=0.9999")
    result.assert_outcomes(passed=1)
    (second,) = [r for r in records(project, "slowgpu") if r["run_id"] != run["run_id"]]
    assert second["results"][0]["baseline"]["baseline_run_id"] == run["run_id"]
    assert second["results"][0]["baseline"]["verdict"] in ("ok", "improved")


@pytest.mark.parametrize(
    ("fixture", "message"),
    [
        ("truncated.json", "corrupt or truncated baseline"),
        ("future-version.json", "schema_version 99"),
        ("recorded-on-a100.json", "recorded on profile 'a100', not 'slowgpu'"),
    ],
)
def test_bad_baseline_stops_before_measuring_and_is_untouched(
    project: pytest.Pytester, fixture: str, message: str
) -> None:
    path = project.path / "baselines" / "slowgpu" / "baseline.json"
    path.parent.mkdir(parents=True)
    shutil.copy(FIXTURES / "baselines" / fixture, path)
    before = path.read_bytes()
    result = project.runpytest("--hw=slowgpu", "--perf-save-baseline")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {path}*{message}*"])
    assert path.read_bytes() == before


def test_unwritable_baseline_directory_is_reported_before_measuring(
    project: pytest.Pytester,
) -> None:
    (project.path / "blocked").write_text("a file, not a directory")
    result = project.runpytest(
        "--hw=slowgpu", "--perf-save-baseline", "--perf-baseline-dir=blocked"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *blocked/slowgpu: directory is not writable*"])


BLIND = (
    "TensorFlow (a CPU-only build) sees 0 GPU(s); no gpu:0 here. WARNING: 1 GPU(s) are "
    "visible on this machine but the installed TensorFlow cannot use them"
)


def test_a_skip_that_hides_an_installation_problem_is_a_session_warning(
    project: pytest.Pytester,
) -> None:
    """Without -rs, a loud skip reason still reaches the verdict, once, with its count."""
    project.makepyfile(
        test_blind=f"""
import pytest

@pytest.mark.parametrize("i", range(3))
def test_tf_gpu(perf, i):
    pytest.skip({BLIND!r})

def test_no_torch(perf):
    pytest.skip("no torch here")
"""
    )
    result = project.runpytest("--hw=slowgpu", "-p", "no:cacheprovider", "-rN")
    result.assert_outcomes(passed=1, skipped=4)
    result.stdout.fnmatch_lines(
        [
            "*perfsuite verdict*",
            "warning: 1 GPU(s) are visible on this machine but the installed TensorFlow cannot "
            "use them (3 check(s) skipped)",
            "floors:*",
            "baselines:*",
            "perfsuite: PASSED*",
        ]
    )
    assert "no torch here" not in result.stdout.str()
    # With nothing measured at all, the warning comes before the empty-session failure.
    result = project.runpytest("--hw=slowgpu", "-p", "no:cacheprovider", "-rN", "test_blind.py")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["warning: 1 GPU(s) are visible*(3 check(s) skipped)", "*none measured*"]
    )


@pytest.mark.smoke
@pytest.mark.integration  # real pytest-xdist worker processes
def test_results_from_xdist_workers_reach_the_run_record(project: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    project.makepyfile(
        test_many=TOY_CHECK.replace(
            "def test_toy(perf):", "@pytest.mark.parametrize('i', range(6))\ndef test_toy(perf, i):"
        )
    )
    # Real workers, their checks sampled briefly through the seam (perfsuite.testing).
    result = project.runpytest_subprocess(
        "--hw=slowgpu", "-n", "2", "-p", "no:cacheprovider", "-p", "perfsuite.testing"
    )
    result.assert_outcomes(passed=7)
    (record,) = records(project, "slowgpu")
    ids = sorted(r["id"] for r in record["results"])
    assert len(ids) == 7 and all(e["timer"] == "perf_counter" for e in record["results"])
    result.stdout.fnmatch_lines(["*test_toy[[]5[]]*pass*new*"])


def test_benchmark_table_and_json_carry_perfsuite_metrics(project: pytest.Pytester) -> None:
    result = project.runpytest(
        "--hw=slowgpu", "--benchmark-json=bench.json", "--perf-benchmark-table"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*benchmark: 1 tests*", "*test_toy*"])
    bench = json.loads((project.path / "bench.json").read_text())["benchmarks"][0]
    assert bench["extra_info"]["perfsuite_metric"] == "bandwidth"
    assert bench["extra_info"]["perfsuite_work"] == {"amount": 2 * 8 * 2**15, "unit": "B"}
    (record,) = records(project, "slowgpu")
    assert record["results"][0]["seconds"] == bench["stats"]["data"]


def test_plain_pytest_without_perf_checks_writes_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_plain():\n    assert 1 + 1 == 2\n")
    pytester.runpytest().assert_outcomes(passed=1)
    assert not (pytester.path / "reports").exists()


@pytest.mark.integration  # the real memory-bandwidth suite, in a pytest process
def test_missing_tensorflow_skips_with_reason_and_numpy_runs(pytester: pytest.Pytester) -> None:
    shutil.copy(SUITE, pytester.path / "test_memory_bandwidth.py")
    pytester.makeconftest(
        "import sys\nsys.modules['tensorflow'] = sys.modules['torch'] = None  # not installed\n"
    )
    # The real numpy kernels, sampled briefly through the seam (perfsuite.testing).
    result = pytester.runpytest_subprocess(
        "-rs", "-p", "no:cacheprovider", "-p", "perfsuite.testing"
    )
    result.assert_outcomes(passed=4, skipped=16)
    result.stdout.fnmatch_lines(
        [
            "*SKIPPED [[]8[]]*TensorFlow is not installed*pip install 'perfsuite[[]tensorflow[]]'*",
            "*SKIPPED [[]8[]]*PyTorch is not installed*pip install 'perfsuite[[]torch[]]'*",
        ],
        consecutive=False,
    )
    record = records(
        pytester, next(p.name for p in (pytester.path / "reports").iterdir() if p.name != "_store")
    )[0]
    assert sorted(r["params"]["kernel"] for r in record["results"]) == [
        "add",
        "copy",
        "scale",
        "triad",
    ]
    assert record["environment"]["software"]["tensorflow"]["loaded"] is False


# A CPU profile with a 1 MiB last-level cache: STREAM's arrays are then STREAM's minimum of
# 1M elements, whatever this host's L3 (a 480 MiB one made each set 5.6 GiB to fill).
SMALL_CACHE_CPU = """schema_version = 1
name = "small-cache-cpu"
kind = "cpu"
description = "a CPU with a 1 MiB last-level cache"
source = "perfsuite's tests"

[memory]
last_level_cache_mib = 1
"""


def test_perf_backend_runs_only_the_named_backends(pytester: pytest.Pytester) -> None:
    shutil.copy(SUITE, pytester.path / "test_memory_bandwidth.py")
    (pytester.path / "profiles").mkdir()
    (pytester.path / "profiles" / "small-cache-cpu.toml").write_text(SMALL_CACHE_CPU)
    result = pytester.runpytest_subprocess(
        "--perf-quick", "--perf-backend", "NumPy", "-p", "no:cacheprovider", "--perf-html", "no",
        "--hw=small-cache-cpu", "--perf-profile-dir", "profiles",
    )  # fmt: skip
    result.assert_outcomes(passed=1, deselected=19)  # quick mode: triad, one per backend
    record = records(
        pytester, next(p.name for p in (pytester.path / "reports").iterdir() if p.name != "_store")
    )[0]
    assert {r["params"]["backend"] for r in record["results"]} == {"numpy"}
    assert record["settings"]["backends"] == ["numpy"]


def test_the_benchmark_table_is_hidden_unless_asked(project: pytest.Pytester) -> None:
    result = project.runpytest("--hw=slowgpu", "--benchmark-json=bench.json")
    result.assert_outcomes(passed=1)
    assert "benchmark: 1 tests" not in result.stdout.str()
    assert (project.path / "bench.json").exists()  # the JSON is still written
    result.stdout.fnmatch_lines(["perfsuite: PASSED*"])


def test_benchmark_compare_shows_its_table(project: pytest.Pytester) -> None:
    """pytest-benchmark's comparison is only in its table: asking for it shows the table."""
    project.runpytest("--hw=slowgpu", "--benchmark-autosave").assert_outcomes(passed=1)
    result = project.runpytest("--hw=slowgpu", "--benchmark-compare")
    result.assert_outcomes(passed=1)
    # The table has the saved run beside this one.
    assert "benchmark: 2 tests" in result.stdout.str()
    assert "0001" in result.stdout.str()


def test_benchmark_compare_fail_is_refused_with_perfsuites_equivalent(
    project: pytest.Pytester,
) -> None:
    result = project.runpytest("--hw=slowgpu", "--benchmark-compare-fail=median:5%")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = "\n".join(result.errlines)
    assert "--perf-fail-on" in errors and "--perf-tolerance" in errors
    assert "Traceback" not in errors


def test_benchmark_histogram_without_pygal_names_the_extra(project: pytest.Pytester) -> None:
    try:
        import pygal  # noqa: F401

        pytest.skip("pygal is installed here")
    except ImportError:
        pass
    result = project.runpytest("--hw=slowgpu", "--benchmark-histogram")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "perfsuite[histogram]" in "\n".join(result.errlines)


def test_profile_names_are_case_insensitive_with_suggestions(project: pytest.Pytester) -> None:
    result = project.runpytest("--hw=SLOWGPU")
    result.assert_outcomes(passed=1)
    assert list((project.path / "reports" / "slowgpu").glob("*.json"))
    wrong = project.runpytest("--hw=slowgp")
    assert wrong.ret == pytest.ExitCode.USAGE_ERROR
    assert "did you mean slowgpu" in "\n".join(wrong.errlines)


@pytest.mark.integration
def test_what_a_worker_sends_about_its_software_crosses_to_the_controller() -> None:
    """Xdist sends it through execnet, which refuses str subclasses (torch's TorchVersion)."""
    execnet = pytest.importorskip("execnet")
    pytest.importorskip("torch")
    from perfsuite.measure import environment

    software = environment.software()
    assert software["torch"]["loaded"] and type(software["torch"]["version"]) is str
    assert execnet.loads(execnet.dumps(software)) == software


def test_the_slowdown_plugin_stretches_every_sample_by_the_fraction_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``-p perfsuite.slowdown`` with 20% asked: each rate is 0.8 of the one measured."""
    from perfsuite import slowdown
    from perfsuite.measure.loop import Measurement, Workload
    from perfsuite.model import Work

    work = Workload(
        check="w", params={"kernel": "triad"}, metric="rate", unit="op/s",
        work=Work(1.0, "op"), run=lambda: None,
    )  # fmt: skip
    seconds = (0.010, 0.011, 0.009)
    measured = Measurement(
        seconds=seconds, values=tuple(work.value(s, 1) for s in seconds), timer="test"
    )
    assert slowdown.pytest_perfsuite_measured(work, measured) is None  # not asked
    monkeypatch.setenv("PERFSUITE_INJECT_SLOWDOWN", "0.2")
    slowed = slowdown.pytest_perfsuite_measured(work, measured)
    assert slowed is not None
    assert slowed.values == pytest.approx([0.8 * v for v in measured.values])
    assert slowed.seconds == pytest.approx([1.25 * s for s in seconds])
    monkeypatch.setenv("PERFSUITE_INJECT_SLOWDOWN_PARAM", "copy")  # another kernel only
    assert slowdown.pytest_perfsuite_measured(work, measured) is None
    monkeypatch.setenv("PERFSUITE_INJECT_SLOWDOWN_PARAM", "triad")
    monkeypatch.setenv("PERFSUITE_INJECT_SLOWDOWN", "1.5")  # not a fraction: left alone
    assert slowdown.pytest_perfsuite_measured(work, measured) is None
    # A ratio (a POP efficiency) is no duration: every phase slows alike, the ratio stays.
    monkeypatch.setenv("PERFSUITE_INJECT_SLOWDOWN", "0.2")
    efficiency = dataclasses.replace(work, unit="ratio", ratio=True)
    assert slowdown.pytest_perfsuite_measured(efficiency, measured) is None


# A machine where other work spends a second of CPU between any two readings.
BUSY_MACHINE = """
import itertools, time
from perfsuite.measure.noise import Snapshot

_busy = itertools.count()

def pytest_perfsuite_noise_snapshot(with_gpus):
    now = time.monotonic()
    return Snapshot(wall=now, busy=float(next(_busy)), steal=0.0, own=0.0, load=(), cpu_mhz=None)
"""


def test_a_baseline_refused_under_load_fails_the_run_and_every_report_says_so(
    project: pytest.Pytester,
) -> None:
    project.makeconftest(BUSY_MACHINE)
    summary = project.path / "summary.md"
    result = project.runpytest(
        "--hw=slowgpu", "--perf-save-baseline", "--perf-markdown", str(summary)
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    last = [line for line in result.stdout.lines if line.startswith("perfsuite: ")][-1]
    assert last.startswith("perfsuite: baseline NOT saved: 1 of 1 checks refused: ")
    assert "1 measured under foreign load (" in last and "1 quick mode" in last
    assert not (project.path / "baselines" / "slowgpu" / "baseline.json").exists()
    (page,) = (project.path / "reports" / "slowgpu").glob("*.html")
    assert 'id="baseline-notice">baseline NOT saved: 1 of 1 checks refused' in page.read_text()
    assert "**Baseline NOT saved\\: 1 of 1 checks refused" in summary.read_text()
