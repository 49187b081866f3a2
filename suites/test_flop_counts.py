"""Expected against counted FLOPs: AlexNet's conv and affine layers (the seed's table).

Each layer's analytic count (2*Hout*Wout*Cout*Cin*Kh*Kw for a conv, 2*in*out for an
affine layer; one image) must match TensorFlow's profiler count within 1%.  The single-tower
AlexNet of Krizhevsky et al. (2012) on a 227x227x3 input is used.
"""

import pytest

from perfsuite.workloads import flops

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


def expected_and_counted(layer):
    tf = pytest.importorskip("tensorflow", reason="the profiler count needs TensorFlow")
    _name, kind, a, b = layer
    if kind == "fc":
        spec_x, spec_w = tf.TensorSpec([1, a]), tf.TensorSpec([a, b])
        return flops.matmul_flops(1, b, a), flops.profiler_count(tf.linalg.matmul, spec_x, spec_w)
    (h, w, cin), (k, stride, padding, cout) = a, b
    ho, wo = flops.conv2d_output(h, w, k, k, stride, padding)
    spec_x, spec_w = tf.TensorSpec([1, h, w, cin]), tf.TensorSpec([k, k, cin, cout])
    counted = flops.profiler_count(lambda x, f: tf.nn.conv2d(x, f, stride, padding), spec_x, spec_w)
    return flops.conv2d_flops(1, ho, wo, cout, cin, k, k), counted


@pytest.mark.parametrize("layer", ALEXNET, ids=[layer[0] for layer in ALEXNET])
def test_alexnet_layer_flops(layer, record_property):
    expected, counted = expected_and_counted(layer)
    record_property("expected_flops", expected)
    record_property("counted_flops", counted)
    check = flops.cross_check(expected, counted, layer[0])
    print(check.detail)
    assert check.passed, check.detail
