"""Framework knobs: training-step throughput of a small CNN in each variant its backend offers.

Floors are no-reference (no datasheet figure for a model); regressions apply.  The run
record lists each variant's speedup over the baseline variant.
"""

import pytest

from perfsuite.checks import knobs
from perfsuite.checks.cases import params


@pytest.mark.perf
@pytest.mark.parametrize("case", params(knobs.cases()))
def test_train_step(perf, case):
    perf.require(case.target, "train_step")
    reason = knobs.skip_reason(case)
    if reason:
        pytest.skip(reason)
    perf.measure(lambda: knobs.workload(case))
