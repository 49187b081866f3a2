"""Unit tests: FLOP and byte accounting, roofline bounds, cases, and the compute kernels."""

from __future__ import annotations

import numpy as np
import pytest

from perfsuite.backends import ConvSpec, Target
from perfsuite.checks import conv, flops, gemm, knobs, roofline
from perfsuite.hardware.profile import ProfileRegistry
from perfsuite.model import BaselineVerdict, FloorVerdict, Result, Summary, Work


def test_seed_conv_counts() -> None:
    spec = ConvSpec(1, 128, 128, 16, 16)
    g = conv.Geometry.of(spec, "fp32")
    assert g.flops == 2 * 128 * 128 * 16 * 16 * 9 == 75_497_472  # "72 MFlop" in the lecture
    assert g.ai_weights_cached == pytest.approx(36.0)
    # Input 1 MiB + output 1 MiB + 9 KiB of weights.
    assert g.min_bytes == (2 * 128 * 128 * 16 + 9 * 16 * 16) * 4


@pytest.mark.parametrize(
    ("h", "c", "ai"), [(128, 64, 144), (64, 128, 288), (32, 256, 576), (16, 512, 1152)]
)
def test_resnet_layer_intensities(h: int, c: int, ai: float) -> None:
    # 9*C/4 FLOP/B with the weights cached (the brief's 1156 for C=512 is 1152 exactly).
    assert conv.Geometry.of(ConvSpec(1, h, h, c, c), "fp32").ai_weights_cached == pytest.approx(ai)
    assert conv.Geometry.of(ConvSpec(1, h, h, c, c), "bf16").ai_weights_cached == pytest.approx(
        2 * ai
    )


def test_conv_output_shapes() -> None:
    assert flops.conv2d_output(227, 227, 11, 11, 4, "VALID") == (55, 55)
    assert flops.conv2d_output(27, 27, 5, 5, 1, "SAME") == (27, 27)
    assert flops.conv2d_output(7, 7, 3, 3, 2, "SAME") == (4, 4)


def test_roofline_ridge_points_of_the_a100() -> None:
    a100 = ProfileRegistry().load("a100")
    fp32 = roofline.point(a100, "fp32", "gpu", 13_000, 1_000)
    assert fp32["ridge_ai"] == pytest.approx(19.5e12 / 1555e9)  # ~12.5, the lecture's "13"
    assert fp32["regime"] == "compute-bound"
    tf32 = roofline.point(a100, "tf32", "gpu", 36, 1)
    assert tf32["ridge_ai"] == pytest.approx(100.3, abs=0.1)
    assert tf32["regime"] == "memory-bound"
    assert tf32["bound_tflops"] == pytest.approx(36 * 1555 / 1000)
    assert "bound_tflops" not in roofline.point(a100, "fp32", "cpu", 1, 1), (
        "no GPU figure for a CPU point"
    )


def test_a_working_set_that_fits_in_the_last_level_cache_is_marked_cache_resident() -> None:
    h100 = ProfileRegistry().load("h100-sxm")  # 50 MB of L2

    def fp16_gemm(m: int, n: int, k: int) -> dict:
        minimum = (m * k + k * n + m * n) * 2  # read A and B, write C once
        return roofline.point(h100, "fp16", "gpu", flops.matmul_flops(m, n, k), minimum)

    inside = fp16_gemm(7860, 64, 2560)  # 41.6 MB
    assert inside["cache_resident"] and inside["cache_mib"] == 50
    outside = fp16_gemm(8192, 8192, 8192)  # 403 MB
    assert outside["cache_resident"] is False
    assert "cache_resident" not in roofline.point(h100, "fp16", "cpu", 1, 1), (
        "no GPU cache figure for a CPU point"
    )


def test_gemm_cases_cover_precisions_shapes_and_quick_mode() -> None:
    ids = {c.id: c for c in gemm.cases()}
    assert "numpy-cpu-fp32-1760x128x1760" in ids
    assert "tensorflow-gpu:0-tf32-8192x8192x8192" in ids
    assert "tensorflow-cpu-tf32-2048x2048x2048" not in ids, "TF32 exists on GPUs only"
    assert ids["tensorflow-cpu-bf16-5124x9124x2560"].full_only
    assert not ids["tensorflow-cpu-bf16-7860x64x2560"].full_only


def test_conv_cases() -> None:
    cases = [c for c in conv.cases() if c.target == Target("tensorflow", "cpu")]
    assert len(cases) == 2 * 5 * 2 * 3
    quick = {c.extra["layer"] for c in cases if not c.full_only}
    assert quick == {"seed-128x128x16", "resnet-32x32x256"}  # one layer per regime
    assert sum(not c.full_only for c in cases) == 2 * 2 * 3  # both precisions, every pass
    assert {c.precision for c in cases} == {"fp32", "bf16"}
    gpu = {c.precision for c in conv.cases() if c.target.device_kind == "gpu"}
    assert gpu == {"fp32", "fp16"}


def test_profiler_cross_check_catches_a_mismatch() -> None:
    assert flops.cross_check(1000, 1005, "x").passed
    bad = flops.cross_check(1000, 720, "winograd")
    assert not bad.passed and "ratio 0.7200, beyond 1%" in bad.detail
    assert flops.cross_check(1000, None, "x").passed


def _result(variant: str, median: float) -> Result:
    return Result(
        id=f"t[{variant}]",
        check="knobs",
        params={"backend": "tensorflow", "device": "cpu", "variant": variant},
        metric="train_step",
        unit="samples/s",
        higher_is_better=True,
        samples=(median,),
        seconds=(1.0,),
        summary=Summary(median, median, median, median, 1, None),
        work=Work(64, "samples"),
        floor=FloorVerdict("no-reference"),
        baseline=BaselineVerdict("new"),
    )


def test_knob_speedups() -> None:
    results = [_result("baseline", 100.0), _result("xla", 150.0), _result("amp", 200.0)]
    assert knobs.speedups(None, results) == {"tensorflow-cpu": {"xla": 1.5, "amp": 2.0}}


@pytest.mark.smoke
@pytest.mark.integration
def test_tensorflow_kernels_compute_the_right_thing() -> None:
    pytest.importorskip("tensorflow")
    from perfsuite import backends

    tfb = backends.get("tensorflow")
    mm = tfb.matmul("cpu", 64, 32, 48, "fp32", seed=1)
    out = mm.run()
    mm.sync()
    np.testing.assert_allclose(out.numpy(), mm.a.numpy() @ mm.b.numpy(), rtol=1e-4, atol=1e-4)
    assert mm.describe()["tf32"] is False
    mm.close()
    spec = ConvSpec(2, 8, 8, 4, 6)
    shapes = {
        p: tuple(tfb.conv2d("cpu", spec, "bf16", p, seed=1).run().shape)
        for p in ("forward", "input_grad", "filter_grad")
    }
    assert shapes == {
        "forward": (2, 8, 8, 6),
        "input_grad": (2, 8, 8, 4),
        "filter_grad": (3, 3, 4, 6),
    }
    assert "GPU tensor-core mode" in tfb.precision_unavailable_reason("cpu", "tf32")


@pytest.mark.parametrize(
    ("flags", "precision", "skips"),
    [
        ({"avx2", "f16c"}, "bf16", True),
        ({"avx2", "f16c"}, "fp16", True),
        ({"avx2", "f16c"}, "fp32", False),
        ({"avx512f", "avx512_bf16"}, "bf16", False),
        ({"avx512f", "avx512_bf16"}, "fp16", True),
        ({"amx_bf16", "amx_fp16"}, "fp16", False),
        ({"asimd", "bf16"}, "bf16", False),
    ],
)
def test_cpu_16_bit_kernels_skip_where_they_would_be_emulated(
    monkeypatch: pytest.MonkeyPatch, flags: set[str], precision: str, skips: bool
) -> None:
    """Without the CPU's bf16/fp16 instructions, every backend skips that precision alike."""
    from types import SimpleNamespace

    from perfsuite import backends
    from perfsuite.backends import base

    monkeypatch.setattr(base, "host_facts", lambda: SimpleNamespace(flags=flags))
    for name in ("tensorflow", "torch"):
        reason = backends.get(name).precision_unavailable_reason("cpu", precision)
        assert (reason is not None) == skips, (name, reason)
        if skips:
            assert "emulated" in reason and precision in reason


def test_numpy_matmul_is_fp32_only() -> None:
    from perfsuite import backends

    np_backend = backends.get("numpy")
    assert np_backend.precision_unavailable_reason("cpu", "fp32") is None
    assert "no bf16 BLAS" in np_backend.precision_unavailable_reason("cpu", "bf16")
    mm = np_backend.matmul("cpu", 16, 8, 4, "fp32", seed=2)
    mm.run()
    np.testing.assert_allclose(mm.c, mm.a @ mm.b, rtol=1e-5)


@pytest.mark.integration
def test_the_training_step_keeps_the_frameworks_tf32_setting() -> None:
    """Forcing TF32 off in the plain step would inflate the AMP and XLA speedups."""
    tf = pytest.importorskip("tensorflow")
    from perfsuite.backends.tensorflow import TensorFlowTrainStep

    before = tf.config.experimental.tensor_float_32_execution_enabled()
    try:
        tf.config.experimental.enable_tensor_float_32_execution(True)
        step = TensorFlowTrainStep("cpu", "baseline", 4, 0)
        assert tf.config.experimental.tensor_float_32_execution_enabled()
        assert step.describe()["tf32"] is True
        # The step says its precision policy; tests/test_typed_contract.py shows it survives.
        assert step.describe()["precision_policy"] == "float32"
        step.close()
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(before)


@pytest.mark.integration
def test_the_numpy_gemm_never_imports_tensorflow() -> None:
    """FLOP counts are framework-neutral; the numpy backend runs without TensorFlow loaded."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from perfsuite.hardware.profile import ProfileRegistry\n"
        "from perfsuite.checks import gemm\n"
        "case = next(c for c in gemm.cases() if c.target.backend == 'numpy')\n"
        "w = gemm.workload(case, ProfileRegistry().load('a100'))\n"
        "assert 'tensorflow' not in sys.modules, 'numpy GEMM imported TensorFlow'\n"
        "print(w.expectations[0].detail)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "not cross-checked" in out.stdout


def test_bare_loop_reports_its_rate_in_the_unit_the_check_uses() -> None:
    """A reference's value is comparable with its check's: GB/s is 1e9 B/s, TFLOP/s 1e12."""
    from perfsuite.backends import reference

    timed = reference.bare_loop("x", lambda: None, 5e12, "TFLOP/s").timed()
    assert timed.value(2.0) == pytest.approx(2.5)
    assert reference.bare_loop("y", lambda: None, 5e9, "GB/s").timed().value(2.0) == 2.5
    with pytest.raises(ValueError, match="not 'samples/s'"):
        reference.bare_loop("z", lambda: None, 1.0, "samples/s")
