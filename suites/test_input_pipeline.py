"""tf.data input pipelines: can this node feed the device at its compute limit.

A synthetic JPEG dataset is built once in a cache (TFRecord shards and one file per image),
then each pipeline configuration's samples/s is measured after its first batch and set
against the compute limit (profile peak / model FLOPs per sample).  A small training loop
measures how much of each step waits for input, with and without prefetch, and the storage
check reads both layouts with the page cache dropped.
"""

import pytest

from perfsuite.checks import input_pipeline as ip
from perfsuite.checks.cases import marks
from perfsuite.inputs import dataset as datasets

pytestmark = pytest.mark.perf_backend("tensorflow")  # tf.data is TensorFlow's

_BUILT = {}


def _dataset(perf):
    pytest.importorskip(
        "tensorflow", reason="TensorFlow is not installed; pip install 'perfsuite[tensorflow]'"
    )
    spec = ip.QUICK if perf.quick else ip.FULL
    if spec not in _BUILT:
        with perf.uncaptured():  # the progress bar of a full-size build reaches the terminal
            _BUILT[spec] = datasets.build(spec, perf.settings.data_dir, progress=not perf.quick)
    return _BUILT[spec]


def _flops(perf):
    return ip.model_flops(perf.settings.model_flops, perf.settings.model_path)[0]


@pytest.mark.perf
@pytest.mark.parametrize(
    "config",
    [
        pytest.param(c, marks=marks(c in ip.FULL_ONLY, c not in ip.QUICK_CONFIGS))
        for c in ip.CONFIGS
    ],
)
def test_input_pipeline(perf, config):
    data = _dataset(perf)
    perf.measure(lambda: ip.throughput_workload(config, data, perf.profile, _flops(perf)))


@pytest.mark.perf
@pytest.mark.parametrize(
    "variant", ["prefetch", pytest.param("no_prefetch", marks=marks(sweep=True))]
)
def test_input_bound_training(perf, variant):
    data = _dataset(perf)
    trace = perf.artifact("input-timeline.json")
    perf.measure(lambda: ip.training_workload(variant, data, trace))


@pytest.mark.perf
@pytest.mark.parametrize("layout", ["tfrecord", pytest.param("files", marks=marks(sweep=True))])
def test_storage_read(perf, layout):
    data = _dataset(perf)
    perf.measure(lambda: ip.storage_workload(layout, data))
