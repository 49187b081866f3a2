"""Statistical verdicts, tolerances, waivers and noise guards, driven through pytester."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"

# A check whose metric is set by a sleep: a real clock, and a value far from any baseline.
SLEEP_CHECK = """
import time
import pytest
from perfsuite.measure.loop import Workload
from perfsuite.model import Work

def test_sleep(perf):
    perf.measure(Workload(
        check="sleep", params={}, metric="rate", unit="1/s",
        work=Work(1.0, "sleeps"), run=lambda: time.sleep(SECONDS),
    ))
"""


def foreign_burner(seconds: float) -> int:
    """Start a CPU burner outside this process tree (orphaned to init); return its pid."""
    code = f"import time\nt=time.time()\nwhile time.time()-t<{seconds}: pass"
    out = subprocess.run(
        ["sh", "-c", f'{sys.executable} -c "$0" >/dev/null 2>&1 & echo $!', code],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout.strip())


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    shutil.copytree(FIXTURES / "profiles", pytester.path / "profiles")
    pytester.makeini(
        "[pytest]\nperf_profile_dir = profiles\nperf_allow_missing_device = true\nperf_quick = true\nperf_hw = slowgpu\n"
    )
    pytester.makepyfile(test_sleep=SLEEP_CHECK.replace("SECONDS", "0.002"))
    return pytester


def baseline(pytester: pytest.Pytester, samples: list[float]) -> Path:
    path = pytester.path / "baselines" / "slowgpu" / "baseline.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "hardware_profile": "slowgpu",
                "updated": "2026-11-01T00:00:00+00:00",
                "entries": {
                    "test_sleep.py::test_sleep": {
                        "metric": "rate",
                        "unit": "1/s",
                        "higher_is_better": True,
                        "samples": samples,
                        "run_id": "ref",
                        "created": "2026-11-01T00:00:00+00:00",
                    }
                },
            }
        )
    )
    return path.parent


def record(pytester: pytest.Pytester) -> dict:
    (path,) = sorted((pytester.path / "reports" / "slowgpu").glob("*.json"))[-1:]
    return json.loads(path.read_text())["results"][0]


def waive(profile_dir: Path, expires: str = "") -> None:
    extra = f"expires = {expires}\n" if expires else ""
    (profile_dir / "waivers.toml").write_text(
        f'schema_version = 1\n\n[[waiver]]\ntest = "*test_sleep"\nreason = "known: slower sleeps"\n{extra}'
    )


def test_regression_message_gives_ratio_ci_and_p(project: pytest.Pytester) -> None:
    baseline(project, [1e6] * 5)
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*regression: median * against baseline 1e+06 1/s (ratio *, 95% CI [[]*, *[]], p=*"]
    )
    entry = record(project)
    assert entry["baseline"]["verdict"] == "regressed" and entry["baseline"]["significant"] is True
    assert entry["outcome"] == "regressed"
    # a schema-1 baseline: one run, judged with the cautious run-to-run spread
    assert entry["baseline"]["between_source"] == "cautious"
    assert entry["baseline"]["family_size"] == 1


def test_waiver_turns_a_regression_into_xfail(project: pytest.Pytester) -> None:
    waive(baseline(project, [1e6] * 5))
    result = project.runpytest()
    result.assert_outcomes(xfailed=1)
    result.stdout.fnmatch_lines(["*regressed (waiver applied)*waived*"])
    entry = record(project)
    assert entry["outcome"] == "waived" and entry["waiver"]["status"] == "applied"
    assert entry["waiver"]["reason"] == "known: slower sleeps"


def test_waiver_on_a_check_that_no_longer_regresses_is_stale(project: pytest.Pytester) -> None:
    waive(baseline(project, [1e-6] * 5))
    result = project.runpytest()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "stale waiver: test_sleep no longer regresses (waiver '*test_sleep': known: slower sleeps)"
        ]
    )


def test_expired_waiver_no_longer_applies_and_is_reported(project: pytest.Pytester) -> None:
    waive(baseline(project, [1e6] * 5), expires="2020-01-01")
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["expired waiver: '*test_sleep' expired on 2020-01-01; test_sleep was judged without it"]
    )


def test_malformed_waivers_stop_the_run_naming_the_line(project: pytest.Pytester) -> None:
    profile_dir = baseline(project, [1e6] * 5)
    (profile_dir / "waivers.toml").write_text('schema_version = 1\n\n[[waiver]]\ntest = "*"\n')
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: {profile_dir / 'waivers.toml'}:3: [[][[]waiver[]][]] needs a non-empty 'reason'"]
    )


def test_profile_tolerance_file_wins_over_the_marker(project: pytest.Pytester) -> None:
    profile_dir = baseline(project, [1e6] * 5)
    project.makepyfile(
        test_sleep=SLEEP_CHECK.replace("SECONDS", "0.002").replace(
            "def test_sleep", "@pytest.mark.perf(tolerance=0.5)\ndef test_sleep"
        )
    )
    (profile_dir / "tolerances.toml").write_text(
        'schema_version = 1\n[checks]\n"*test_sleep" = 0.9999999\n'
    )
    project.runpytest().assert_outcomes(passed=1)
    entry = record(project)
    assert entry["baseline"]["tolerance"] == 0.9999999
    assert "tolerances.toml [checks] '*test_sleep'" in entry["tolerance_from"]


def test_noise_is_recorded_with_every_result(project: pytest.Pytester) -> None:
    project.runpytest().assert_outcomes(passed=1)
    noise = record(project)["noise"]
    assert {
        "cv",
        "foreign_cores",
        "steal_cores",
        "load_average",
        "cpu_mhz",
        "governor",
        "flags",
    } <= set(noise)


@pytest.mark.integration
def test_foreign_load_turns_a_regression_noisy(project: pytest.Pytester) -> None:
    baseline(project, [1e6] * 5)
    # Sleep-based repetitions leave the CPU to the burner: the whole window sees its load.
    project.makepyfile(test_sleep=SLEEP_CHECK.replace("SECONDS", "0.06"))
    pid = foreign_burner(20)
    try:
        result = project.runpytest()
    finally:
        os.kill(pid, signal.SIGKILL)
    result.assert_outcomes(passed=1)
    entry = record(project)
    assert entry["noise"]["foreign_cores"] > 0.25
    assert entry["baseline"]["verdict"] == "noisy"
    assert "under foreign load" in entry["baseline"]["reason"]
    result.stdout.fnmatch_lines(["noise: 1 check(s) measured under foreign load*"])
