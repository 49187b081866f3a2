"""GEMM peak: matmul TFLOP/s per precision on large squares and DeepBench training shapes.

FLOPs = 2*M*N*K; each case also cross-checks that count against the running backend's own
FLOP counter, where it has one (TensorFlow's profiler, torch's FlopCounterMode).
The floor is the best repetition against the profile's peak for the precision.
"""

import pytest

from perfsuite.checks import gemm
from perfsuite.checks.cases import params


@pytest.mark.perf
@pytest.mark.parametrize("case", params(gemm.cases()))
def test_gemm(perf, case):
    perf.require(case.target, "matmul", case.precision)
    reason = gemm.shape_reason(case)
    if reason:
        pytest.skip(reason)
    perf.measure(lambda: gemm.workload(case, perf.profile))
