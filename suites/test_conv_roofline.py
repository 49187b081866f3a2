"""Conv arithmetic intensity and roofline attainment: forward and both gradients.

Layers: the seed 128x128x16 -> 16 3x3 conv and the ResNet-50 3x3 layers; batch 1 (and 16
in full mode); fp32 and a 16-bit type.  The floor applies to attainment of the roofline
bound min(peak, AI x bandwidth); analytic FLOPs are cross-checked against TensorFlow's.
"""

import pytest

from perfsuite.checks import conv
from perfsuite.checks.cases import params


@pytest.mark.perf
@pytest.mark.parametrize("case", params(conv.cases()))
def test_conv(perf, case):
    perf.require(case.target, "conv2d", case.precision)
    perf.measure(lambda: conv.workload(case, perf.profile))
