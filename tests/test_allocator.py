"""The C allocator's policy is pinned for the session, and the record says what was set."""

from __future__ import annotations

import ctypes.util
import json
import shutil
import sys
from pathlib import Path

import pytest

from perfsuite import allocator

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


@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's")
def test_the_run_record_keeps_the_allocator_policy(pytester: pytest.Pytester) -> None:
    shutil.copytree(FIXTURES / "profiles", pytester.path / "profiles")
    pytester.makeini(
        "[pytest]\nperf_profile_dir = profiles\nperf_allow_missing_device = true\n"
        "perf_quick = true\nperf_hw = slowgpu\n"
    )
    pytester.makepyfile(
        test_one="""
import time
from perfsuite.measure import Workload
from perfsuite.model import Work

def test_one(perf):
    perf.measure(Workload(check="nap", params={}, metric="rate", unit="1/s",
                          work=Work(1.0, "naps"), run=lambda: time.sleep(0.001)))
"""
    )
    try:
        pytester.runpytest_subprocess("--perf-malloc-threshold", "32").assert_outcomes(passed=1)
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
