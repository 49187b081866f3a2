"""The torch backend on this machine's CPU: real torch, real kernels, no mocks.

GPU paths are covered where they can be without a GPU: the precision and broken-CUDA rules
are pure functions of the device's facts, and the host-copy check is parametrized over the
GPU slots only.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from perfsuite import backends
from perfsuite.backends import ConvSpec, Target
from perfsuite.checks import gemm, host_copy, knobs
from perfsuite.measure.loop import Measurement

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed; pip install 'perfsuite[torch]'"
)
from perfsuite.backends import torch as torch_backend  # noqa: E402

TB = backends.get("torch")
# Real framework kernels / a real browser: the integration tier.
pytestmark = pytest.mark.integration


def test_torch_is_one_registered_module_and_the_registry_has_no_import_cycle() -> None:
    assert backends.BUILTIN["torch"] == "perfsuite.backends.torch:TorchBackend"
    assert isinstance(TB, torch_backend.TorchBackend)
    for module in ("perfsuite.backends.torch", "perfsuite.backends", "perfsuite.checks.gemm"):
        subprocess.run([sys.executable, "-c", f"import {module}"], check=True)


def test_stream_kernels_write_in_place_and_compute_streams_formulas() -> None:
    k = TB.stream_kernels("cpu", 4096, seed=3)
    a0, b0, c0 = (x.clone() for x in (k.a, k.b, k.c))
    pointers = [x.data_ptr() for x in (k.a, k.b, k.c)]
    k.copy()
    assert torch.equal(k.c, a0)
    k.scale()
    assert torch.allclose(k.b, 3.0 * a0)
    k.add()
    assert torch.allclose(k.c, a0 + 3.0 * a0)
    k.triad()
    assert torch.allclose(k.a, 3.0 * a0 + 3.0 * (a0 + 3.0 * a0))
    assert [x.data_ptr() for x in (k.a, k.b, k.c)] == pointers, "a kernel allocated"
    assert not torch.equal(b0, c0), "the arrays hold random data"
    from perfsuite.backends.base import STREAM_PAGE_OFFSETS

    assert {n: getattr(k, n).data_ptr() % 4096 for n in "abc"} == {
        n: STREAM_PAGE_OFFSETS[n] for n in "abc"
    }, "each host array starts at its place in a page"


def test_matmul_writes_into_its_output_and_restores_tf32() -> None:
    before = torch.backends.cuda.matmul.allow_tf32
    mm = TB.matmul("cpu", 64, 32, 48, "fp32", seed=1)
    assert torch.backends.cuda.matmul.allow_tf32 is False, "fp32 is measured with TF32 off"
    pointer = mm.c.data_ptr()
    out = mm.run()
    assert out.data_ptr() == pointer
    np.testing.assert_allclose(out.numpy(), mm.a.numpy() @ mm.b.numpy(), rtol=1e-4, atol=1e-4)
    mm.close()
    assert torch.backends.cuda.matmul.allow_tf32 is before


@pytest.mark.smoke
@pytest.mark.parametrize("pass_", ["forward", "input_grad", "filter_grad"])
def test_conv_passes_match_autograd(pass_: str) -> None:
    spec = ConvSpec(2, 8, 8, 4, 6)
    k = TB.conv2d("cpu", spec, "fp32", pass_, seed=1)
    out = k.run()
    x = k.x.clone().requires_grad_(True)
    w = k.w.clone().requires_grad_(True)
    y = torch.nn.functional.conv2d(x, w, padding=1)
    y.backward(k.dy)
    expected = {"forward": y.detach(), "input_grad": x.grad, "filter_grad": w.grad}[pass_]
    assert out.shape == expected.shape
    assert torch.allclose(out, expected, atol=1e-4)
    assert "allocated per call" in k.describe()["output"]
    k.close()
    assert torch.backends.cudnn.benchmark is False, "benchmark mode is restored"


@pytest.mark.parametrize(
    ("kind", "args"),
    [("matmul", (1760, 128, 1760)), ("conv", ("forward",)), ("conv", ("input_grad",))],
)
def test_flop_counter_agrees_with_the_analytic_count(kind: str, args: tuple) -> None:
    if kind == "matmul":
        m, n, k = args
        assert TB.matmul_counted_flops(m, n, k, "bf16") == 2 * m * n * k
    else:
        spec = ConvSpec(4, 28, 28, 64, 128)
        analytic = 2 * 4 * 28 * 28 * 128 * 64 * 9
        assert TB.conv2d_counted_flops(spec, "fp32", args[0]) == analytic


def test_fp8_shapes_that_scaled_mm_cannot_take_are_skipped() -> None:
    assert TB.matmul_shape_reason(5124, 9124, 2560, "fp8") == (
        "fp8 matmul needs K and N to be multiples of 16 (K=2560, N=9124)"
    )
    assert TB.matmul_shape_reason(8192, 8192, 8192, "fp8") is None
    assert TB.matmul_shape_reason(5124, 9124, 2560, "bf16") is None


def test_precisions_the_device_lacks_are_skipped_with_the_reason() -> None:
    assert "GPU tensor-core mode" in TB.precision_unavailable_reason("cpu", "fp8")
    assert "GPU tensor-core mode" in TB.precision_unavailable_reason("cpu", "tf32")
    a100, h100, v100 = (8, 0), (9, 0), (7, 0)
    reason = torch_backend.gpu_precision_reason("gpu:0", a100, "fp8")
    assert reason == "gpu:0 (compute capability 8.0) has no fp8; it needs 8.9+"
    assert torch_backend.gpu_precision_reason("gpu:0", h100, "fp8") is None
    assert torch_backend.gpu_precision_reason("gpu:1", v100, "bf16").startswith("gpu:1")
    assert torch_backend.gpu_precision_reason("gpu:0", a100, "tf32") is None


def test_a_cuda_torch_that_cannot_use_the_visible_gpus_names_both_versions() -> None:
    text = torch_backend.cuda_broken_message(
        "2.13.0", "13.0", "535.104.05", "CUDA driver version is insufficient"
    )
    assert "driver 535.104.05" in text and "torch 2.13.0" in text and "CUDA 13.0" in text
    cpu = torch_backend.cuda_broken_message("2.13.0+cpu", None, "550.54", "")
    assert "CPU-only build" in cpu and "550.54" in cpu


def test_cpu_gemm_cases_and_gpu_gemm_precisions() -> None:
    ids = {c.id for c in gemm.cases()}
    assert "torch-cpu-fp32-2048x2048x2048" in ids
    assert "torch-gpu:0-fp8-8192x8192x8192" in ids
    assert "torch-cpu-fp8-2048x2048x2048" not in ids, "fp8 exists on GPUs only"


def test_host_copies_are_gpu_cases_and_skip_without_a_gpu() -> None:
    cases = host_copy.cases()
    assert {c.target for c in cases} == {Target("torch", "gpu:0")}
    assert {c.name for c in cases} == {"h2d-pinned", "h2d-pageable", "d2h-pinned", "d2h-pageable"}
    if not torch.cuda.is_available():
        assert "no CUDA device" in backends.skip_reason(cases[0].target, "host_copy")


def test_the_pinned_copy_floor_is_the_link_the_gpu_trained_to() -> None:
    from perfsuite.hardware.profile import ProfileRegistry

    h100 = ProfileRegistry().load("h100-sxm")  # PCIe Gen 5 x16 in the profile: 64 GB/s
    gen4 = host_copy.reference(h100, {"pcie_max_generation": 4, "pcie_max_width": 16})
    assert gen4.measured == pytest.approx(31.5, abs=0.1)
    gen5 = host_copy.reference(h100, {"pcie_max_generation": 5, "pcie_max_width": 16})
    assert gen5.measured is None and gen5.figure == "interconnect.pcie_gbs_per_direction"
    assert host_copy.reference(h100, {}).measured is None  # NVML said nothing


def test_knob_variants_are_the_backends_own() -> None:
    variants = {c.name for c in knobs.cases() if c.target == Target("torch", "cpu")}
    assert variants == {"baseline", "compile", "amp", "compile+amp", "channels_last"}
    step = TB.train_step("cpu", "channels_last", 4, 0)
    loss = step.run()
    assert loss.ndim == 0 and torch.isfinite(loss)
    assert step.images.is_contiguous(memory_format=torch.channels_last)
    step.close()


def test_the_gpu_timer_is_device_events_and_the_cpu_uses_the_clock() -> None:
    assert TB.timer("cpu") is None
    assert TB.timer("gpu:0").kind == "device-events"


def test_per_sample_overhead_is_measured_from_one_call_timed_alone() -> None:
    m = Measurement(seconds=(0.10, 0.11, 0.12), values=(1, 1, 1), timer="t", calls=100,
                    call_seconds=0.0021)  # fmt: skip
    # one call alone 2.1 ms; a call's share of the median sample 1.1 ms: 1.0 ms per sample
    assert m.overhead_fraction == pytest.approx(0.001 / 0.11)


def test_gpu_slots_honour_a_jobs_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    from perfsuite.backends import base
    from perfsuite.hardware.detect import GpuFacts

    monkeypatch.setattr(base, "gpu_facts", lambda: GpuFacts(("H100",) * 8))  # the device count
    assert base.gpu_slots({}) == [f"gpu:{i}" for i in range(8)]
    assert base.gpu_slots({"CUDA_VISIBLE_DEVICES": "4,5"}) == ["gpu:0", "gpu:1"]
    assert base.gpu_slots({"CUDA_VISIBLE_DEVICES": ""}) == ["gpu:0"]  # reported absent


def test_slot_facts_follow_cuda_visible_devices_to_nvmls_device() -> None:
    """gpu:0 of a job given GPUs 2,3 is NVML's device 2: its link, not device 0's."""
    from perfsuite.backends import base

    gpus = [{"index": i, "uuid": f"GPU-{i}aaa-bbbb", "pcie_max_generation": 5} for i in range(4)]
    assert base.slot_facts(gpus, 1, {})["index"] == 1
    assert base.slot_facts(gpus, 0, {"CUDA_VISIBLE_DEVICES": "2,3"})["index"] == 2
    assert base.slot_facts(gpus, 1, {"CUDA_VISIBLE_DEVICES": " 2, 3"})["index"] == 3
    assert base.slot_facts(gpus, 0, {"CUDA_VISIBLE_DEVICES": "GPU-3aaa"})["index"] == 3
    assert base.slot_facts(gpus, 0, {"CUDA_VISIBLE_DEVICES": "GPU-"}) == {}  # ambiguous
    assert base.slot_facts(gpus, 2, {"CUDA_VISIBLE_DEVICES": "2,3"}) == {}
    assert base.slot_facts(gpus, 0, {"CUDA_VISIBLE_DEVICES": ""}) == {}
    assert base.slot_facts(gpus, 0, {"CUDA_VISIBLE_DEVICES": "7"}) == {}
    assert base.slot_facts({"error": "no NVML"}, 0, {}) == {}


def test_short_gpu_kernels_are_replayed_from_a_graph_and_the_cpu_launches_each_call() -> None:
    assert TB.capture("cpu") is None
    assert TB.capture("gpu:0") is not None  # built lazily: nothing touches CUDA here
    assert TB.cache_bytes("cpu") is None


def test_gemm_floors_judge_the_peak_squares_and_not_the_deepbench_shapes() -> None:
    from perfsuite.checks.cases import Case
    from perfsuite.hardware.profile import ProfileRegistry

    profile = ProfileRegistry().load("h100-sxm")
    floors = {}
    for shape in (gemm.Shape(256, 256, 256), gemm.Shape(256, 64, 512)):
        case = Case(Target("torch", "cpu"), "fp32", str(shape), shape)
        work = gemm.workload(case, profile)
        floors[str(shape)] = work.reference
        work.close()
    assert floors["256x256x256"] is not None
    assert floors["256x256x256"].figure == "compute.fp32_tflops"
    assert floors["256x64x512"] is None


cuda = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device (runs on GPU runners)"
)


@cuda
def test_a_cuda_graph_replays_the_calls_it_captured() -> None:
    kernel = TB.matmul("gpu:0", 256, 128, 64, "fp32", seed=3)
    replay = TB.capture("gpu:0")(kernel.run, 4)
    kernel.c.zero_()
    replay()
    torch.cuda.synchronize()
    expected = kernel.a.double() @ kernel.b.double()
    assert torch.allclose(kernel.c.double(), expected, rtol=1e-4, atol=1e-3)
    kernel.close()


@cuda
def test_gpu_stream_arrays_outgrow_the_l2_the_device_reports() -> None:
    from perfsuite.checks import stream
    from perfsuite.hardware.profile import ProfileRegistry

    l2 = TB.cache_bytes("gpu:0")
    assert l2 and l2 > 0
    size = stream.sizing(Target("torch", "gpu:0"), ProfileRegistry().load("a100"))
    assert size.array_bytes >= 4 * l2


@cuda
def test_half_precision_gpu_convs_run_channels_last_and_match_autograd() -> None:
    spec = ConvSpec(batch=2, height=16, width=16, cin=8, cout=16, kernel=3, stride=1,
                    padding="SAME")  # fmt: skip
    kernel = TB.conv2d("gpu:0", spec, "fp16", "forward", seed=5)
    assert kernel.describe()["layout"] == "NHWC (channels-last)"
    got = kernel.run().float()
    want = torch.nn.functional.conv2d(kernel.x.float(), kernel.w.float(), None, 1, 1)
    assert torch.allclose(got, want, rtol=2e-2, atol=2e-2)
    kernel.close()


def test_conv_floors_judge_layers_that_fill_a_device_against_their_roofline_bound() -> None:
    from perfsuite.checks import conv
    from perfsuite.checks.cases import Case
    from perfsuite.hardware.profile import ProfileRegistry

    profile = ProfileRegistry().load("h100-sxm")
    refs = {}
    for name, batch, cin in (("fills", 16, 64), ("batch1", 1, 64), ("narrow", 16, 16)):
        spec = ConvSpec(batch=batch, height=8, width=8, cin=cin, cout=cin)
        case = Case(Target("torch", "cpu"), "fp32", name, spec,
                    extra={"layer": name, "pass": "forward"})  # fmt: skip
        work = conv.workload(case, profile)
        refs[name] = (work.reference, work.floor_note)
        work.close()
    reference, note = refs["fills"]
    assert reference is not None and reference.figure == "roofline" and note == ""
    geometry = conv.Geometry.of(ConvSpec(batch=16, height=8, width=8, cin=64, cout=64), "fp32")
    assert reference.combine(67.0, 3350.0) == pytest.approx(min(67.0, geometry.ai * 3.35))
    assert refs["batch1"] == (None, "batch 1 < 16: judged against its baseline only")
    assert refs["narrow"] == (None, "16 input channels < 64: judged against its baseline only")


def test_closing_a_kernel_frees_the_tensors_its_bare_references_use() -> None:
    """A reference reads the kernel's tensors at each call: it keeps none alive on its own."""
    import gc
    import weakref

    mm = TB.matmul("cpu", 64, 32, 48, "fp32", seed=1)
    conv = TB.conv2d("cpu", ConvSpec(1, 8, 8, 4, 4), "fp32", "input_grad", seed=1)
    refs = [TB.matmul_reference(mm, 1.0), TB.conv2d_reference(conv, 1.0)]
    for bare in refs:
        assert bare.run is not None
        bare.run()
    alive = [weakref.ref(t) for t in (mm.a, mm.b, mm.c, conv.x, conv.w, conv.dy)]
    mm.close()
    conv.close()
    gc.collect()
    assert all(r() is None for r in alive), "a bare reference kept a closed kernel's tensor"
    assert len(refs) == 2


@pytest.mark.parametrize("direction", ["h2d", "d2h"])
def test_the_host_copy_reference_is_copy_between_the_kernels_own_buffers(direction: str) -> None:
    """The bare copy moves the kernel's bytes in the check's direction, counted once."""
    from types import SimpleNamespace

    host = torch.arange(64, dtype=torch.uint8)
    dev = torch.zeros(64, dtype=torch.uint8)
    if direction == "d2h":
        host, dev = dev, host
    kernel = SimpleNamespace(
        direction=direction, pinned=False, host=host, dev=dev, sync=lambda: None
    )
    bare = TB.host_copy_reference(kernel, 64)
    assert (bare.work, bare.unit, bare.scale) == (64, "GB/s", 1e9)
    assert bare.what == ("device.copy_(host) in a loop" if direction == "h2d" else
                         "host.copy_(device) in a loop")  # fmt: skip
    assert bare.run is not None
    bare.run()
    assert torch.equal(kernel.host, kernel.dev)
    assert int(kernel.dev.sum()) == sum(range(64))


@cuda
def test_a_gpu_host_copy_carries_its_bare_reference() -> None:
    from perfsuite.checks.cases import Case
    from perfsuite.hardware.profile import ProfileRegistry

    case = Case(Target("torch", "gpu:0"), "", "h2d-pinned", ("h2d", "pinned"))
    work = host_copy.workload(case, ProfileRegistry().load("h100-sxm"))
    assert work.bare is not None and work.bare.run is not None
    work.bare.run()
    work.bare.sync()
    work.close()
