"""Compute-check behaviour of the plugin: estimated floors, expectations, OOM, quick mode."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent

CHECK = """
import numpy as np
import pytest
from perfsuite.measure.loop import Expectation, Reference, Workload
from perfsuite.model import Work

def toy(expectations=()):
    a = np.random.default_rng(0).random((64, 64), dtype=np.float32)
    return Workload(
        check="toy", params={}, metric="matmul", unit="TFLOP/s", scale=1e12,
        work=Work(2 * 64**3, "FLOP"), run=lambda: a @ a,
        reference=Reference("compute.fp32_tflops", 0.5, "cpu"), expectations=expectations,
    )

def test_estimated(perf):
    perf.measure(toy())

def test_expectation(perf):
    perf.measure(toy((Expectation("flop count", False, "analytic 10 vs counted 7"),)))

def test_oom(perf):
    def factory():
        raise MemoryError("cannot allocate 80 GiB")
    perf.measure(factory)

@pytest.mark.perf_full
def test_full_only(perf):
    perf.measure(toy())

@pytest.mark.perf_sweep
def test_sweep(perf):
    perf.measure(toy())
"""

PROFILE = """schema_version = 1
name = "hugecpu"
description = "a CPU whose estimated peak no machine reaches"
kind = "cpu"
source = "test"
estimated = ["compute.fp32_tflops"]
[compute]
fp32_tflops = 1e9
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_toy_compute=CHECK)
    (pytester.path / "profiles").mkdir()
    (pytester.path / "profiles" / "hugecpu.toml").write_text(PROFILE)
    pytester.makeini(
        "[pytest]\nperf_profile_dir = profiles\nperf_hw = hugecpu\nperf_quick = true\n"
    )
    return pytester


def test_estimated_floors_expectations_oom_and_quick_mode(project: pytest.Pytester) -> None:
    result = project.runpytest("-rA")
    # quick mode deselects the full-only and the sweep case; the OOM fails, the session goes on
    result.assert_outcomes(passed=1, failed=2, deselected=2)
    result.stdout.fnmatch_lines(
        [
            "*flop count: analytic 10 vs counted 7*",
            "out of memory: MemoryError: cannot allocate 80 GiB",
            "*test_estimated*matmul*(est.)*warning (est.)*new*floor-warning*",
        ]
    )
    (path,) = (project.path / "reports" / "hugecpu").glob("*.json")
    record = json.loads(path.read_text())
    estimated = next(r for r in record["results"] if r["id"].endswith("test_estimated"))
    assert estimated["floor"]["verdict"] == "fail" and estimated["floor"]["estimated"] is True
    assert estimated["outcome"] == "floor-warning"
    expectation = next(r for r in record["results"] if r["id"].endswith("test_expectation"))
    assert expectation["expectations"][0]["passed"] is False


def test_only_full_mode_runs_full_only_cases(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\nperf_profile_dir = profiles\nperf_hw = hugecpu\n")
    policies = []
    for mode, outcomes in (("", {"passed": 1}), ("--perf-full", {"passed": 2})):
        args = ["-k", "full_only or test_estimated", "-p", "no:cacheprovider"]
        project.runpytest(*args, *([mode] if mode else [])).assert_outcomes(**outcomes)
        (path,) = (project.path / "reports" / "hugecpu").glob("*.json")
        policies.append(json.loads(path.read_text())["settings"]["policy"])
        shutil.rmtree(project.path / "reports")
    default, full = policies
    assert default["mode"] == "default" and default["references"] is False
    assert full["mode"] == "full" and full["references"] is True
    assert default["warmup_seconds"] == full["warmup_seconds"], "measured alike"
    assert default["repetitions"] == full["repetitions"]


def test_quick_and_full_mode_exclude_each_other(project: pytest.Pytester) -> None:
    result = project.runpytest("--perf-full")  # the ini asks for quick mode
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--perf-quick and --perf-full exclude each other*"])


@pytest.mark.integration
def test_gemm_and_conv_cases_record_roofline_and_flop_checks(pytester: pytest.Pytester) -> None:
    pytest.importorskip("tensorflow")
    for name in ("test_gemm.py", "test_conv_roofline.py"):
        shutil.copy(ROOT / "suites" / name, pytester.path / name)
    (pytester.path / "profiles").mkdir()
    # This host's CPU with a configured bandwidth, so the roofline bound is known.
    (pytester.path / "profiles" / "devcpu.toml").write_text(
        'schema_version = 1\nname = "devcpu"\ndescription = "d"\nkind = "cpu"\nsource = "test"\n'
        "[memory]\nbandwidth_gbs = 40\n"
    )
    # Real TensorFlow kernels, sampled briefly through the seam (perfsuite.testing), and no
    # HTML: this test is about the record's roofline and FLOP checks.
    result = pytester.runpytest_subprocess(
        "--hw=devcpu",
        "--perf-profile-dir=profiles",
        "-p",
        "no:cacheprovider",
        "-p",
        "perfsuite.testing",
        "--perf-html",
        "no",
        "-k",
        "tensorflow-cpu-fp32-1760x128x1760 or tensorflow-cpu-fp32-seed-128x128x16-n1-forward",
    )
    result.assert_outcomes(passed=2)
    (path,) = (pytester.path / "reports" / "devcpu").glob("*.json")
    record = json.loads(path.read_text())
    for r in record["results"]:
        (check,) = r["expectations"]
        assert (
            check["name"] == "flop count" and check["passed"] and "ratio 1.0000" in check["detail"]
        )
    roof = record["derived"]["roofline"]
    assert roof["ceilings"]["bandwidth_gbs"] == 40
    assert (
        "fp32" in roof["ceilings"]["compute_tflops"]
        and "compute.fp32_tflops" in roof["ceilings"]["estimated"]
    )
    points = {p["check"]: p for p in roof["points"]}
    assert points["gemm"]["ai"] == pytest.approx(
        2 * 1760 * 128 * 1760 / ((1760 * 1760 + 1760 * 128 * 2) * 4)
    )
    conv_point = points["conv_roofline"]
    assert conv_point["bound_tflops"] is not None and conv_point["attainment"] > 0
    assert conv_point["regime"] in ("compute-bound", "memory-bound")
    conv_result = next(r for r in record["results"] if r["check"] == "conv_roofline")
    # A batch-1 layer cannot fill a device: its roofline point is recorded, its floor is not.
    assert conv_result["floor"]["verdict"] == "no-reference"
    assert conv_result["floor"]["note"] == "batch 1 < 16: judged against its baseline only"
    gemm_result = next(r for r in record["results"] if r["check"] == "gemm")
    assert gemm_result["floor"]["note"].startswith("a DeepBench shape: judged against")
