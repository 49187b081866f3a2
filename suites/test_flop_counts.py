"""Expected against counted FLOPs: AlexNet's conv and affine layers (the seed's table).

Each layer's analytic count (2*Hout*Wout*Cout*Cin*Kh*Kw for a conv, 2*in*out for an
affine layer; one image) must match the FLOP counter of each backend that has one
(TensorFlow's profiler, torch's ``FlopCounterMode``) within 1%.  The single-tower AlexNet
of Krizhevsky et al. (2012) on a 227x227x3 input is used.
"""

import pytest

from perfsuite import backends
from perfsuite.checks import flops

# name, kind, (H, W, Cin), (K, stride, padding, Cout)  /  name, "fc", in, out
ALEXNET = [
    ("conv1", "conv", (227, 227, 3), (11, 4, "VALID", 96)),
    ("conv2", "conv", (27, 27, 96), (5, 1, "SAME", 256)),
    ("conv3", "conv", (13, 13, 256), (3, 1, "SAME", 384)),
    ("conv4", "conv", (13, 13, 384), (3, 1, "SAME", 384)),
    ("conv5", "conv", (13, 13, 384), (3, 1, "SAME", 256)),
    ("fc6", "fc", 6 * 6 * 256, 4096),
    ("fc7", "fc", 4096, 4096),
    ("fc8", "fc", 4096, 1000),
]
COUNTING = [backends.Target(name, "cpu") for name, b in backends.registry().items() if b.profiler]


def expected_and_counted(backend, layer):
    _name, kind, a, b = layer
    if kind == "fc":
        return flops.matmul_flops(1, b, a), backend.matmul_counted_flops(1, b, a, "fp32")
    (h, w, cin), (k, stride, padding, cout) = a, b
    ho, wo = flops.conv2d_output(h, w, k, k, stride, padding)
    spec = backends.ConvSpec(1, h, w, cin, cout, k, stride, padding)
    counted = backend.conv2d_counted_flops(spec, "fp32", "forward")
    return flops.conv2d_flops(1, ho, wo, cout, cin, k, k), counted


@pytest.mark.parametrize("layer", ALEXNET, ids=[layer[0] for layer in ALEXNET])
@pytest.mark.parametrize("target", COUNTING, ids=lambda t: t.backend)
def test_alexnet_layer_flops(target, layer, record_property):
    backend = backends.get(target.backend)
    reason = backend.unavailable_reason()
    if reason:
        pytest.skip(reason)
    expected, counted = expected_and_counted(backend, layer)
    record_property("expected_flops", expected)
    record_property("counted_flops", counted)
    check = flops.cross_check(expected, counted, layer[0], backend.profiler)
    print(check.detail)
    assert check.passed, check.detail
