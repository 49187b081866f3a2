"""PyTorch on the CPU and on each visible CUDA device; imported only when a check runs.

The backend says what torch can run here (its devices, precisions, autocast), times a GPU's
samples with CUDA events on the current stream (the device-event sample source), and
replays the calls of a STREAM, GEMM or conv sample from a CUDA graph: a kernel of a few
microseconds, launched call by call from Python, measures the host's launch rate.  The
kernels themselves, their buffers and the graph's capture are in
:mod:`perfsuite.backends.torch_kernels`; the bare references here are the same operations
as users write them, and FLOPs are counted by torch's ``FlopCounterMode`` on meta tensors.
The training-step knobs are PyTorch's: ``torch.compile`` where TensorFlow has XLA, automatic
mixed precision (fp16 with a gradient scaler on a GPU, bf16 on a CPU), and channels-last.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from perfsuite.backends import reference
from perfsuite.backends.base import (
    PRECISION,
    Backend,
    ConvSpec,
    cpu_amp_reason,
    cpu_precision_reason,
    gpu_precision_reason,
)
from perfsuite.backends.torch_kernels import (
    TorchConv2D,
    TorchHostCopy,
    TorchMatmul,
    TorchStream,
    TorchTrainStep,
    conv_args,
    cuda_graph,
    device_of,
    torch_module,
)
from perfsuite.errors import PerfsuiteError, first_line
from perfsuite.hardware.detect import gpu_facts
from perfsuite.measure.loop import Bare
from perfsuite.measure.sources import EventSource

KNOB_VARIANTS = ("baseline", "compile", "amp", "compile+amp", "channels_last")


def cuda_broken_message(torch_version: str, torch_cuda: str | None, driver: str, error: str) -> str:
    """The error when GPUs are visible but this torch cannot use them, naming both versions."""
    if torch_cuda is None:
        return (
            f"GPUs are visible (NVIDIA driver {driver}) but torch {torch_version} is a CPU-only "
            "build; install a CUDA build of torch (pip install 'perfsuite[torch]' on a GPU "
            "runner takes one from PyPI)"
        )
    return (
        f"GPUs are visible (NVIDIA driver {driver}) but torch {torch_version}, built for CUDA "
        f"{torch_cuda}, cannot use them: {error or 'torch.cuda.is_available() is False'}. "
        f"A driver older than CUDA {torch_cuda} needs is the usual cause: update the driver, "
        "or install a torch built for an older CUDA"
    )


class TorchBackend(Backend):
    """PyTorch, an optional extra."""

    name = "torch"
    extra = "torch"
    # A plain torch from the package index is a CUDA build of several GB; PyTorch's own
    # index serves the CPU build (about 200 MB to download).
    cpu_install = "pip install torch --index-url https://download.pytorch.org/whl/cpu"
    module = "torch"
    framework = "PyTorch"
    uses_gpus = True
    profiler = "torch's FlopCounterMode"
    operations = frozenset({"stream", "matmul", "conv2d", "train_step", "host_copy"})
    knob_variants = KNOB_VARIANTS

    def device_unavailable_reason(self, device: str) -> str | None:
        """None when torch can use the device; an error when GPUs are there but torch is blind."""
        if device == "cpu":
            return None
        torch = torch_module()
        index = int(device.split(":", 1)[1])
        if torch.cuda.is_available():
            count = torch.cuda.device_count()
            return None if index < count else f"torch sees {count} CUDA device(s); no {device}"
        facts = gpu_facts()
        if not facts.names:
            return f"no CUDA device here ({facts.reason or 'NVML sees none'})"
        error = ""
        try:
            torch.cuda.init()
        except Exception as exc:  # torch raises RuntimeError or its own AssertionError
            error = first_line(exc) or type(exc).__name__
        raise PerfsuiteError(
            cuda_broken_message(torch.__version__, torch.version.cuda, facts.driver, error)
        )

    def version(self) -> str:
        """Torch's version, with its CUDA and cuDNN where built with them."""
        torch = torch_module()
        parts = [str(torch.__version__)]
        if torch.version.cuda:
            parts.append(f"CUDA {torch.version.cuda}")
            cudnn = torch.backends.cudnn.version()
            if cudnn:
                parts.append(f"cuDNN {cudnn}")
        return ", ".join(parts)

    def _capability(self, device: str) -> tuple[int, int]:
        major, minor = torch_module().cuda.get_device_capability(device_of(device))
        return int(major), int(minor)

    def precision_unavailable_reason(self, device: str, precision: str) -> str | None:
        """TF32 and fp8 are GPU modes; bf16 needs compute capability 8.0, fp8 8.9."""
        if precision not in PRECISION:
            return f"unknown precision {precision!r}"
        if device == "cpu":
            return cpu_precision_reason("torch", precision)
        if precision == "fp8" and not hasattr(torch_module(), "_scaled_mm"):
            return f"torch {torch_module().__version__} has no fp8 matmul (torch._scaled_mm)"
        return gpu_precision_reason(device, self._capability(device), precision)

    def amp_unavailable_reason(self, device: str) -> str | None:
        """Autocast: bf16 instructions on a CPU, compute capability 7.0+ on a GPU."""
        if device == "cpu":
            return cpu_amp_reason()
        cc = self._capability(device)
        if cc < (7, 0):
            return f"{device} (compute capability {cc[0]}.{cc[1]}) has no fp16 tensor cores"
        return None

    def timer(self, device: str) -> EventSource | None:
        """CUDA events on a GPU; the host clock (None) on the CPU."""
        if device == "cpu":
            return None
        torch = torch_module()
        return EventSource(lambda: torch.cuda.Event(enable_timing=True), device=device)

    def cache_bytes(self, device: str) -> int | None:
        """A GPU's L2 as CUDA reports it (cudaDevAttrL2CacheSize); None on the CPU."""
        if device == "cpu":
            return None
        size = getattr(
            torch_module().cuda.get_device_properties(device_of(device)), "L2_cache_size", 0
        )
        return int(size) or None

    def capture(self, device: str) -> Any:
        """A CUDA graph of the calls on a GPU (as nccl-tests' ``-G``); None on the CPU."""
        if device == "cpu":
            return None
        return lambda run, calls: cuda_graph(device, run, calls)

    def stream_kernels(
        self, device: str, elements: int, seed: int, host: Sequence[Any] | None = None
    ) -> TorchStream:
        """Allocate the arrays on the device; on the CPU, tensors over the host set."""
        return TorchStream(device, elements, seed, host)

    def stream_reference(self, kernels: Any, kernel: str, counted_bytes: int) -> Bare:
        """The same in-place torch call in a bare loop, on the check's tensors."""
        return reference.same_call(
            f"torch in-place {kernel} in a bare loop", kernels, kernel, counted_bytes
        )

    def matmul_reference(self, kernel: Any, flops: float) -> Bare:
        """``torch.matmul`` (or ``_scaled_mm``) on the check's tensors, in a bare loop.

        The tensors are read from the kernel at each call, so closing the kernel frees them.
        """
        torch = torch_module()
        k = kernel
        if kernel.precision == "fp8":

            def step() -> None:
                torch._scaled_mm(
                    k.a, k.b, k.scale, k.scale, out_dtype=k.c.dtype, use_fast_accum=True,
                    out=k.c,
                )  # fmt: skip

            what = "torch._scaled_mm in a loop"
        else:

            def step() -> None:
                torch.matmul(k.a, k.b, out=k.c)

            what = "torch.matmul(a, b, out=c) in a loop"
        return reference.bare_loop(what, step, flops, "TFLOP/s", kernel.sync)

    def conv2d_reference(self, kernel: Any, flops: float) -> Bare:
        """The pass as users write it: ``F.conv2d`` or ``torch.nn.grad``, in a bare loop."""
        torch = torch_module()
        k = kernel  # its tensors are read at each call, so closing the kernel frees them
        stride, padding = kernel.args[0], kernel.args[1]
        calls = {
            "forward": (
                "F.conv2d",
                lambda: torch.nn.functional.conv2d(k.x, k.w, None, stride, padding),
            ),
            "input_grad": (
                "torch.nn.grad.conv2d_input",
                lambda: torch.nn.grad.conv2d_input(k.x.shape, k.w, k.dy, stride, padding),
            ),
            "filter_grad": (
                "torch.nn.grad.conv2d_weight",
                lambda: torch.nn.grad.conv2d_weight(k.x, k.w.shape, k.dy, stride, padding),
            ),
        }
        name, step = calls[kernel.pass_]
        return reference.bare_loop(f"{name} in a loop", step, flops, "TFLOP/s", kernel.sync)

    def host_copy_reference(self, kernel: Any, nbytes: int) -> Bare:
        """``Tensor.copy_`` between the kernel's buffers, as users write it, in a bare loop.

        The buffers are read from the kernel at each call, so closing the kernel frees them.
        """
        k = kernel
        if k.direction == "h2d":

            def step() -> None:
                k.dev.copy_(k.host, non_blocking=k.pinned)

            what = "device.copy_(host) in a loop"
        else:

            def step() -> None:
                k.host.copy_(k.dev, non_blocking=k.pinned)

            what = "host.copy_(device) in a loop"
        return reference.bare_loop(what, step, nbytes, "GB/s", kernel.sync)

    def matmul_shape_reason(self, m: int, n: int, k: int, precision: str) -> str | None:
        """fp8 GEMMs (``_scaled_mm``) need K and N to be multiples of 16."""
        if precision == "fp8" and (k % 16 or n % 16):
            return f"fp8 matmul needs K and N to be multiples of 16 (K={k}, N={n})"
        return None

    def matmul(self, device: str, m: int, n: int, k: int, precision: str, seed: int) -> TorchMatmul:
        """GEMM on the device."""
        return TorchMatmul(device, m, n, k, precision, seed)

    def conv2d(
        self, device: str, spec: ConvSpec, precision: str, pass_: str, seed: int
    ) -> TorchConv2D:
        """One conv2d pass on the device."""
        return TorchConv2D(device, spec, precision, pass_, seed)

    def train_step(self, device: str, variant: str, batch: int, seed: int) -> TorchTrainStep:
        """The small CNN's training step with the variant's knobs."""
        return TorchTrainStep(device, variant, batch, seed)

    def host_copy(
        self, device: str, direction: str, pinned: bool, nbytes: int, seed: int
    ) -> TorchHostCopy:
        """A host-device copy of ``nbytes``."""
        return TorchHostCopy(device, direction, pinned, nbytes, seed)

    def _counted(self, precision: str, fn: Any) -> int:
        """FLOPs of ``fn(torch, dtype)`` on meta tensors (no memory, no compute)."""
        from torch.utils.flop_counter import FlopCounterMode

        torch = torch_module()
        # fp8 GEMM is counted as its bf16 equivalent: _scaled_mm has no meta FLOP formula.
        dtype = getattr(torch, PRECISION["bf16" if precision == "fp8" else precision].dtype)
        with torch.device("meta"):
            inputs = fn(torch, dtype, None)
            with FlopCounterMode(display=False) as counter:
                fn(torch, dtype, inputs)
        return int(counter.get_total_flops())

    def matmul_counted_flops(self, m: int, n: int, k: int, precision: str) -> int | None:
        """``torch.matmul`` on meta tensors, counted by ``FlopCounterMode``."""

        def run(t: Any, dtype: Any, inputs: Any) -> Any:
            if inputs is None:
                return t.empty(m, k, dtype=dtype), t.empty(k, n, dtype=dtype)
            return t.matmul(*inputs)

        return self._counted(precision, run)

    def conv2d_counted_flops(self, spec: ConvSpec, precision: str, pass_: str) -> int | None:
        """The conv pass on meta tensors, counted by ``FlopCounterMode``."""
        s = spec
        args = conv_args(s)
        mask = [pass_ == "input_grad", pass_ == "filter_grad", False]

        def run(t: Any, dtype: Any, inputs: Any) -> Any:
            aten = t.ops.aten
            if inputs is None:
                x = t.empty(s.batch, s.cin, s.height, s.width, dtype=dtype)
                w = t.empty(s.cout, s.cin, s.kernel, s.kernel, dtype=dtype)
                return x, w, t.empty_like(aten.convolution(x, w, None, *args))
            x, w, dy = inputs
            if pass_ == "forward":
                return aten.convolution(x, w, None, *args)
            return aten.convolution_backward(dy, x, w, None, *args, mask)

        return self._counted(precision, run)
