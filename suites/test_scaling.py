"""POP scaling efficiency of a data-parallel training step, at 1, 2, ... N ranks.

Each scale launches the training ranks through ``--perf-launcher`` (``mpiexec -n {ranks}``
by default) up to ``--perf-ranks``, in strong and weak scaling; every POP efficiency is a
check of its own (load balance, communication efficiency, parallel efficiency, computation
scalability, global efficiency, scaling efficiency, and input efficiency: 1 - the share
of a step spent waiting for its next batch from a host input pipeline).  Below 0.8 is a
warning, never a failure; the report draws the multiplicative tree over the rank counts.
"""

import pytest

from perfsuite.checks import scaling
from perfsuite.checks.cases import marks
from perfsuite.collectives.launch import Launcher
from perfsuite.options import rank_counts


def pytest_generate_tests(metafunc):
    if "case" in metafunc.fixturenames:
        found = scaling.cases(rank_counts(metafunc.config))
        metafunc.parametrize(
            "case",
            [pytest.param(c, id=c.id, marks=marks(c.full_only)) for c in found],
        )


@pytest.mark.perf
def test_scaling(perf, case):
    reason = scaling.unavailable_reason(case, Launcher.parse(perf.settings.launcher))
    if reason:
        pytest.skip(reason)
    perf.measure(lambda: scaling.workload(case, perf.settings, perf.profile))
