"""Allreduce latency and bus bandwidth across real ranks, size by size.

Each case launches the worker through ``--perf-launcher`` (``mpiexec -n {ranks}`` by
default) with ``--perf-ranks`` ranks; the ranks follow the OSU method and verify every
element of the sum.  Small messages are judged as latency, large ones as busbw
(nccl-tests); the report draws the whole curve with its alpha-beta fit.
"""

import pytest

from perfsuite.checks import allreduce
from perfsuite.checks.cases import marks
from perfsuite.collectives.launch import Launcher
from perfsuite.options import rank_counts


def pytest_generate_tests(metafunc):
    if "case" in metafunc.fixturenames:
        found = allreduce.cases(rank_counts(metafunc.config))
        metafunc.parametrize(
            "case",
            [pytest.param(c, id=c.id, marks=marks(c.full_only, c.sweep)) for c in found],
        )


@pytest.mark.perf
def test_allreduce(perf, case):
    reason = allreduce.unavailable_reason(case, Launcher.parse(perf.settings.launcher))
    if reason:
        pytest.skip(reason)
    perf.measure(lambda: allreduce.workload(case, perf.settings, perf.profile))
