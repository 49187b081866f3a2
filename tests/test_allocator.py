"""The C allocator's policy is pinned for the session, and the record says what was set."""

from __future__ import annotations

import ctypes.util
import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from perfsuite.measure import allocator

FIXTURES = Path(__file__).parent / "fixtures"
GLIBC = sys.platform.startswith("linux") and ctypes.util.find_library("c") is not None


def test_zero_leaves_the_allocator_alone() -> None:
    assert allocator.pin(0) == {
        "pinned": False,
        "reason": "--perf-malloc-threshold 0: glibc's own policy",
    }
    assert allocator.state()["pinned"] is False


@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's")
def test_pin_sets_both_thresholds_and_remembers_them() -> None:
    try:
        done = allocator.pin(64)
        assert done == {
            "pinned": True,
            "mmap_threshold_bytes": 64 * 2**20,
            "trim_threshold_bytes": 128 * 2**20,
        }
        assert allocator.state() == done
    finally:
        allocator.pin(allocator.DEFAULT_MIB)


def _session_dir(pytester: pytest.Pytester) -> None:
    """A quick session on the test profiles, with no device required."""
    shutil.copytree(FIXTURES / "profiles", pytester.path / "profiles")
    pytester.makeini(
        "[pytest]\nperf_profile_dir = profiles\nperf_allow_missing_device = true\n"
        "perf_quick = true\nperf_hw = slowgpu\n"
    )


@pytest.mark.integration  # a real pytest process, whose allocator the option sets
@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's")
def test_the_run_record_keeps_the_allocator_policy(pytester: pytest.Pytester) -> None:
    _session_dir(pytester)
    pytester.makepyfile(
        test_one="""
import time
from perfsuite.measure.loop import Workload
from perfsuite.model import Work

def test_one(perf):
    perf.measure(Workload(check="nap", params={}, metric="rate", unit="1/s",
                          work=Work(1.0, "naps"), run=lambda: time.sleep(0.001)))
"""
    )
    try:
        # Its check sampled briefly through the seam (perfsuite.testing), without HTML.
        pytester.runpytest_subprocess(
            "--perf-malloc-threshold", "32", "-p", "perfsuite.testing", "--perf-html", "no"
        ).assert_outcomes(passed=1)
    finally:
        allocator.pin(allocator.DEFAULT_MIB)
    (path,) = (pytester.path / "reports" / "slowgpu").glob("*.json")
    malloc = json.loads(path.read_text())["environment"]["host"]["malloc"]
    assert malloc == {
        "pinned": True,
        "mmap_threshold_bytes": 32 * 2**20,
        "trim_threshold_bytes": 64 * 2**20,
    }
    assert json.loads(path.read_text())["settings"]["malloc_threshold"] == 32


@pytest.mark.integration
def test_tensorflow_is_asked_for_its_pool_unless_the_user_chose(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(allocator.TF_BFC, "unset")  # so monkeypatch restores the variable
    monkeypatch.delenv(allocator.TF_BFC)
    monkeypatch.delitem(sys.modules, "tensorflow", raising=False)
    done = allocator.pool_frameworks()
    assert os.environ[allocator.TF_BFC] == "true"
    assert done["tensorflow_cpu"].startswith("TF_CPU_ALLOCATOR_USE_BFC=true")
    monkeypatch.setenv(allocator.TF_BFC, "false")
    assert "as set in the environment" in allocator.pool_frameworks()["tensorflow_cpu"]
    assert os.environ[allocator.TF_BFC] == "false"
    assert allocator.framework_state()["tensorflow_cpu"].endswith("as set in the environment")


@pytest.mark.integration
def test_a_tensorflow_imported_before_the_session_is_left_and_said_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(allocator.TF_BFC, "unset")
    monkeypatch.delenv(allocator.TF_BFC)
    monkeypatch.setitem(sys.modules, "tensorflow", object())
    assert "imported before" in allocator.pool_frameworks()["tensorflow_cpu"]
    assert allocator.TF_BFC not in os.environ


@pytest.mark.integration
def test_tensorflow_cpu_outputs_take_no_fresh_pages_inside_timed_calls(
    pytester: pytest.Pytester,
) -> None:
    """The STREAM check's output buffers come from TensorFlow's pool, in a real session."""
    if importlib.util.find_spec("tensorflow") is None:  # never imported here: its own process
        pytest.skip("TensorFlow is not installed (pip install 'perfsuite[tensorflow]')")
    _session_dir(pytester)
    pytester.makepyfile(
        test_faults="""
import json, os, resource
from perfsuite.backends.tensorflow import TensorFlowStream

def test_faults():
    assert os.environ["TF_CPU_ALLOCATOR_USE_BFC"] == "true"
    k = TensorFlowStream("cpu", 4 * 2**20, seed=1)  # 32 MiB float64 arrays
    faults = []
    for _ in range(12):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        k.triad(); k.sync()
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    print("FAULTS", json.dumps(faults))
    assert max(faults[2:]) < 1024  # a fresh 32 MiB buffer would be 8,192 pages
"""
    )
    result = pytester.runpytest_subprocess("-s")
    result.assert_outcomes(passed=1)
