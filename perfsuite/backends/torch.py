"""PyTorch on the CPU and on each visible CUDA device; imported only when a check runs.

Buffers are allocated once, when a kernel is built; every timed call writes into them:

* STREAM: ``copy_``, ``torch.mul(out=)``, ``torch.add(out=)`` and, for the triad,
  ``torch.add(b, c, alpha=q, out=a)``: one pass that reads b and c and writes a, as STREAM
  counts it;
* GEMM: ``torch.matmul(a, b, out=c)``; fp8 (e4m3, devices of compute capability 8.9 and up)
  through ``torch._scaled_mm`` with unit scales and fast accumulation (as fp8 training
  recipes run the forward GEMMs); K and N must be multiples of 16;
* conv: ``aten.convolution`` and ``aten.convolution_backward`` (cuDNN, benchmark mode, on a
  GPU; oneDNN on the CPU), NCHW, or channels-last for fp16 and bf16 on a GPU; torch has no
  true ``out=`` for them, so the output is allocated per call (the caching allocator on a
  GPU; once, at capture, in a CUDA graph) and the record says so;
* host copies: ``Tensor.copy_`` between a pinned or pageable host buffer and a device
  buffer, ``non_blocking`` where the host side is pinned.

fp32 is measured with ``torch.backends.cuda.matmul.allow_tf32`` (and cuDNN's) off, tf32 with
them on, whatever the defaults; each kernel restores the settings it changed.  On a GPU the
samples are timed with CUDA events on the current stream (the device-event sample source),
and the calls of a STREAM, GEMM or conv sample are replayed from a CUDA graph: a kernel of a
few microseconds, launched call by call from Python, measures the host's launch rate.
The training-step knobs are PyTorch's: ``torch.compile`` where TensorFlow has XLA, automatic
mixed precision (fp16 with a gradient scaler on a GPU, bf16 on a CPU), and channels-last.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from perfsuite.backends import reference
from perfsuite.backends.base import (
    PAGE_BYTES,
    PRECISION,
    STREAM_PAGE_OFFSETS,
    STREAM_SCALAR,
    STREAM_WORD,
    Backend,
    ConvSpec,
    cpu_amp_reason,
    cpu_precision_reason,
    gpu_precision_reason,
    output_precision,
    page_skip,
)
from perfsuite.errors import PerfsuiteError, first_line
from perfsuite.hardware.detect import gpu_facts
from perfsuite.measure.loop import Bare
from perfsuite.measure.sources import EventSource

# gpu:N is NVML's device N (PCI bus order), as the run record's GPU facts number them.
os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
KNOB_VARIANTS = ("baseline", "compile", "amp", "compile+amp", "channels_last")
HALF_PRECISIONS = ("fp16", "bf16")


def _torch() -> Any:
    import torch

    return torch


def _device(device: str) -> Any:
    torch = _torch()
    kind, _, index = device.partition(":")
    return torch.device("cpu") if kind == "cpu" else torch.device("cuda", int(index or 0))


def _sync(device: str) -> None:
    if device != "cpu":
        _torch().cuda.synchronize(_device(device))


def _release(device: str) -> None:
    """Return a closed kernel's cached device memory, for the next check (any framework)."""
    if device != "cpu":
        _torch().cuda.empty_cache()


def _random(shape: list[int], device: str, dtype: Any, seed: int) -> Any:
    """Random normal data made on the device, then cast (fp8 has no random generator)."""
    torch = _torch()
    generator = torch.Generator(device=_device(device)).manual_seed(seed)
    values = torch.randn(shape, generator=generator, device=_device(device))
    return values.to(dtype)


class _Precision(contextlib.AbstractContextManager[None]):
    """TF32 on for ``tf32`` and off otherwise, for matmul and cuDNN; restored on close."""

    def __init__(self, precision: str) -> None:
        torch = _torch()
        self._before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
        on = precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = on
        torch.backends.cudnn.allow_tf32 = on

    def __exit__(self, *exc: object) -> None:
        torch = _torch()
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = self._before


class _TorchKernel:
    """Shared plumbing: the device, its sync, TF32 settings and the run record's notes."""

    def __init__(self, device: str, precision: str, *, set_tf32: bool = True) -> None:
        torch = self._torch = _torch()
        self.device = device
        self.torch_device = _device(device)
        if device != "cpu":
            torch.cuda.set_device(self.torch_device)  # events are recorded on its stream
        self.precision = precision
        self.dtype = getattr(torch, PRECISION[precision].dtype)
        self._tf32 = _Precision(precision) if set_tf32 else None

    def sync(self) -> None:
        """Wait for the device (torch's CPU kernels are synchronous)."""
        _sync(self.device)

    def describe(self) -> dict[str, object]:
        """Device, dtype, TF32 and threads."""
        torch = self._torch
        return {
            "torch_device": str(self.torch_device),
            "dtype": str(self.dtype).removeprefix("torch."),
            "tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn_tf32": torch.backends.cudnn.allow_tf32,
            "threads": torch.get_num_threads(),
        }

    def close(self) -> None:
        """Restore the TF32 settings; the subclass drops its tensors."""
        if self._tf32 is not None:
            self._tf32.__exit__(None, None, None)
            self._tf32 = None


class TorchStream(_TorchKernel):
    """STREAM kernels on three preallocated float64 tensors, written in place."""

    itemsize = STREAM_WORD.itemsize

    def __init__(self, device: str, elements: int, seed: int) -> None:
        """Allocate a, b, c of random float64 data on the device.

        On the host each array starts at its place in a 4 KiB page
        (``base.STREAM_PAGE_OFFSETS``), each on a cache line and apart modulo 4 KiB.
        """
        super().__init__(device, STREAM_WORD.name, set_tf32=False)
        self.elements = elements
        self.a, self.b, self.c = (
            self._placed(_random([elements], device, self.dtype, seed + i), name)
            for i, name in enumerate("abc")
        )

    def _placed(self, values: Any, name: str) -> Any:
        if self.device != "cpu":
            return values
        raw = self._torch.empty(values.numel() + PAGE_BYTES // self.itemsize, dtype=values.dtype)
        skip = page_skip(raw.data_ptr(), STREAM_PAGE_OFFSETS[name], raw.element_size())
        return raw.narrow(0, skip, values.numel()).copy_(values)

    def copy(self) -> Any:
        """C = a."""
        return self.c.copy_(self.a)

    def scale(self) -> Any:
        """B = q*c."""
        return self._torch.mul(self.c, STREAM_SCALAR, out=self.b)

    def add(self) -> Any:
        """C = a + b."""
        return self._torch.add(self.a, self.b, out=self.c)

    def triad(self) -> Any:
        """A = b + q*c, in one pass."""
        return self._torch.add(self.b, self.c, alpha=STREAM_SCALAR, out=self.a)

    def describe(self) -> dict[str, object]:
        """Device, dtype, threads, and that outputs are written in place."""
        placed = {"page_offsets": dict(STREAM_PAGE_OFFSETS)} if self.device == "cpu" else {}
        return {**super().describe(), "in_place": True, **placed}

    def close(self) -> None:
        """Drop the tensors."""
        super().close()
        self.a = self.b = self.c = None
        _release(self.device)


class TorchMatmul(_TorchKernel):
    """C = A x B into a preallocated C; fp8 through ``torch._scaled_mm``."""

    def __init__(self, device: str, m: int, n: int, k: int, precision: str, seed: int) -> None:
        """Allocate A[M,K], B[K,N] and C[M,N] on the device."""
        super().__init__(device, precision)
        torch = self._torch
        self.a = _random([m, k], device, self.dtype, seed)
        if precision == "fp8":
            # _scaled_mm wants B column-major: the transpose of a row-major [N,K] tensor.
            self.b = _random([n, k], device, self.dtype, seed + 1).t()
            self.scale = torch.ones((), device=self.torch_device)
            out = getattr(torch, output_precision(precision).dtype)
            self.c = torch.empty([m, n], device=self.torch_device, dtype=out)
        else:
            self.b = _random([k, n], device, self.dtype, seed + 1)
            self.c = torch.empty([m, n], device=self.torch_device, dtype=self.dtype)

    def run(self) -> Any:
        """C = A x B."""
        torch = self._torch
        if self.precision == "fp8":
            return torch._scaled_mm(
                self.a, self.b, self.scale, self.scale, out_dtype=self.c.dtype,
                use_fast_accum=True, out=self.c,
            )  # fmt: skip
        return torch.matmul(self.a, self.b, out=self.c)

    def close(self) -> None:
        """Drop the tensors and restore TF32."""
        super().close()
        self.a = self.b = self.c = None
        _release(self.device)


class TorchConv2D(_TorchKernel):
    """One pass of a 2-D convolution: forward, input gradient or filter gradient.

    NCHW, or channels-last for fp16 and bf16 on a GPU, where tensor cores want NHWC.

    torch's convolutions have no true ``out=`` form (``convolution.out`` is the functional op
    followed by a copy), so each call allocates its output: from the caching allocator on a
    GPU (no device allocation once warm), from the host allocator on the CPU.  cuDNN picks
    its algorithm by benchmarking (``cudnn.benchmark``), as TensorFlow autotunes; the setting
    is restored on close.
    """

    def __init__(self, device: str, spec: ConvSpec, precision: str, pass_: str, seed: int) -> None:
        """Allocate input, filter and output gradient."""
        super().__init__(device, precision)
        torch = self._torch
        s = spec
        self.args = conv_args(s)
        self.pass_ = pass_
        self.x = _random([s.batch, s.cin, s.height, s.width], device, self.dtype, seed)
        self.w = _random([s.cout, s.cin, s.kernel, s.kernel], device, self.dtype, seed + 1)
        with torch.no_grad():
            y = torch.ops.aten.convolution(self.x, self.w, None, *self.args)
        self.dy = _random(list(y.shape), device, self.dtype, seed + 2)
        # Tensor cores take half precision in NHWC: NCHW would time cuDNN's transposes.
        self.channels_last = device != "cpu" and precision in HALF_PRECISIONS
        if self.channels_last:
            self.x, self.w, self.dy = (
                t.contiguous(memory_format=torch.channels_last) for t in (self.x, self.w, self.dy)
            )
        self.mask = [pass_ == "input_grad", pass_ == "filter_grad", False]
        self._benchmark_before = torch.backends.cudnn.benchmark
        torch.backends.cudnn.benchmark = True

    def run(self) -> Any:
        """The pass this kernel measures."""
        aten = self._torch.ops.aten
        if self.pass_ == "forward":
            return aten.convolution(self.x, self.w, None, *self.args)
        grads = aten.convolution_backward(self.dy, self.x, self.w, None, *self.args, self.mask)
        return grads[0] if self.pass_ == "input_grad" else grads[1]

    def describe(self) -> dict[str, object]:
        """Library, layout and how the output is allocated."""
        torch = self._torch
        if self.device != "cpu":
            library = "cuDNN"
            output = "allocated per call (caching allocator; once, at capture, when replayed)"
        else:
            library = "oneDNN" if torch.backends.mkldnn.is_available() else "ATen"
            output = "allocated per call (host allocator)"
        layout = "NHWC (channels-last)" if self.channels_last else "NCHW"
        return {**super().describe(), "library": library, "layout": layout, "output": output}

    def close(self) -> None:
        """Drop the tensors and restore TF32 and cuDNN's benchmark mode."""
        super().close()
        self._torch.backends.cudnn.benchmark = self._benchmark_before
        self.x = self.w = self.dy = None
        _release(self.device)


class TorchTrainStep(_TorchKernel):
    """One SGD step of the same small CNN as TensorFlow's, with PyTorch's knobs.

    ``variant``: ``baseline``, ``compile`` (``torch.compile``), ``amp`` (autocast: fp16 with a
    gradient scaler on a GPU, bf16 on a CPU), ``compile+amp``, or ``channels_last`` (model and
    inputs in channels-last memory format).  TF32 stays as the framework has it.
    """

    def __init__(self, device: str, variant: str, batch: int, seed: int) -> None:
        """Build the model, optimizer and random inputs for the variant."""
        super().__init__(device, "fp32", set_tf32=False)
        torch = self._torch
        nn = torch.nn
        torch.manual_seed(seed)
        self.variant = variant
        self.amp_dtype = (
            (torch.float16 if device != "cpu" else torch.bfloat16) if "amp" in variant else None
        )
        model = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
            nn.Linear(128, 10),
        ).to(self.torch_device)  # fmt: skip
        self.images = _random([batch, 3, 32, 32], device, torch.float32, seed)
        self.labels = torch.randint(0, 10, [batch], device=self.torch_device)
        if variant == "channels_last":
            model = model.to(memory_format=torch.channels_last)
            self.images = self.images.contiguous(memory_format=torch.channels_last)
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        self.loss = nn.CrossEntropyLoss()
        use_scaler = self.amp_dtype is torch.float16
        self.scaler = torch.amp.GradScaler("cuda") if use_scaler else None
        forward = torch.compile(model) if "compile" in variant else model
        self._forward = forward

    def run(self) -> Any:
        """One training step."""
        torch = self._torch
        self.optimizer.zero_grad(set_to_none=True)
        kind = "cpu" if self.device == "cpu" else "cuda"
        with torch.autocast(kind, dtype=self.amp_dtype, enabled=self.amp_dtype is not None):
            loss = self.loss(self._forward(self.images), self.labels)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        return loss

    def describe(self) -> dict[str, object]:
        """Variant and AMP dtype."""
        amp = str(self.amp_dtype).removeprefix("torch.") if self.amp_dtype is not None else None
        return {**super().describe(), "variant": self.variant, "amp_dtype": amp}

    def close(self) -> None:
        """Drop the model and inputs."""
        super().close()
        self.model = self._forward = self.optimizer = self.images = self.labels = None
        _release(self.device)


class TorchHostCopy:
    """One copy between a host buffer (pinned or pageable) and a device buffer."""

    def __init__(self, device: str, direction: str, pinned: bool, nbytes: int, seed: int) -> None:
        """Allocate the host and device buffers once, with random bytes."""
        torch = self._torch = _torch()
        self.device = device
        self.direction = direction
        self.pinned = pinned
        self.nbytes = nbytes
        torch.cuda.set_device(_device(device))
        generator = torch.Generator().manual_seed(seed)
        host = torch.randint(0, 256, [nbytes], dtype=torch.uint8, generator=generator)
        self.host = host.pin_memory() if pinned else host
        self.dev = torch.empty(nbytes, dtype=torch.uint8, device=_device(device))
        self.dev.copy_(self.host)
        torch.cuda.synchronize()

    def run(self) -> Any:
        """H2D or D2H; asynchronous where the host side is pinned."""
        if self.direction == "h2d":
            return self.dev.copy_(self.host, non_blocking=self.pinned)
        return self.host.copy_(self.dev, non_blocking=self.pinned)

    def sync(self) -> None:
        """Wait for the device."""
        _sync(self.device)

    def describe(self) -> dict[str, object]:
        """Direction, host memory kind and size."""
        return {
            "direction": self.direction,
            "host_memory": "pinned" if self.pinned else "pageable",
            "bytes": self.nbytes,
        }

    def close(self) -> None:
        """Drop the buffers."""
        self.host = self.dev = None
        _release(self.device)


def cuda_graph(device: str, run: Any, calls: int) -> Any:
    """Capture ``calls`` back-to-back calls of ``run`` in a CUDA graph; return its replay.

    The calls are warmed up on a side stream first, as capture requires (cuDNN has picked its
    algorithms by then).  Tensors a call allocates come from the graph's private pool, once,
    at capture.  Replaying issues all the calls with one launch from the host.
    """
    torch = _torch()
    torch.cuda.set_device(_device(device))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            run()
    current = torch.cuda.current_stream()
    current.wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            for _ in range(calls):
                run()
    finally:
        # A capture that fails in capture_end leaves the capture stream current: the calls
        # measured instead (launched from the host) must run on the stream the events use.
        torch.cuda.set_stream(current)
    torch.cuda.synchronize()
    return graph.replay


def conv_args(spec: ConvSpec) -> tuple[Any, ...]:
    """``aten.convolution``'s arguments after input, weight and bias for a ``ConvSpec``.

    Stride, padding (SAME: half the kernel, which is SAME only at stride 1), dilation 1,
    not transposed, no output padding, one group.
    """
    if spec.padding.upper() == "SAME" and spec.stride != 1:
        raise ValueError("the torch backend pads SAME only for stride 1")
    pad = (spec.kernel - 1) // 2 if spec.padding.upper() == "SAME" else 0
    return ([spec.stride] * 2, [pad] * 2, [1, 1], False, [0, 0], 1)


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
        torch = _torch()
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
        torch = _torch()
        parts = [str(torch.__version__)]
        if torch.version.cuda:
            parts.append(f"CUDA {torch.version.cuda}")
            cudnn = torch.backends.cudnn.version()
            if cudnn:
                parts.append(f"cuDNN {cudnn}")
        return ", ".join(parts)

    def _capability(self, device: str) -> tuple[int, int]:
        major, minor = _torch().cuda.get_device_capability(_device(device))
        return int(major), int(minor)

    def precision_unavailable_reason(self, device: str, precision: str) -> str | None:
        """TF32 and fp8 are GPU modes; bf16 needs compute capability 8.0, fp8 8.9."""
        if precision not in PRECISION:
            return f"unknown precision {precision!r}"
        if device == "cpu":
            return cpu_precision_reason("torch", precision)
        if precision == "fp8" and not hasattr(_torch(), "_scaled_mm"):
            return f"torch {_torch().__version__} has no fp8 matmul (torch._scaled_mm)"
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
        torch = _torch()
        return EventSource(lambda: torch.cuda.Event(enable_timing=True), device=device)

    def cache_bytes(self, device: str) -> int | None:
        """A GPU's L2 as CUDA reports it (cudaDevAttrL2CacheSize); None on the CPU."""
        if device == "cpu":
            return None
        size = getattr(_torch().cuda.get_device_properties(_device(device)), "L2_cache_size", 0)
        return int(size) or None

    def capture(self, device: str) -> Any:
        """A CUDA graph of the calls on a GPU (as nccl-tests' ``-G``); None on the CPU."""
        if device == "cpu":
            return None
        return lambda run, calls: cuda_graph(device, run, calls)

    def stream_kernels(self, device: str, elements: int, seed: int) -> TorchStream:
        """Allocate the arrays on the device."""
        return TorchStream(device, elements, seed)

    def stream_reference(self, kernels: Any, kernel: str, counted_bytes: int) -> Bare:
        """The same in-place torch call in a bare loop, on the check's tensors."""
        return reference.same_call(
            f"torch in-place {kernel} in a bare loop", kernels, kernel, counted_bytes
        )

    def matmul_reference(self, kernel: Any, flops: float) -> Bare:
        """``torch.matmul`` (or ``_scaled_mm``) on the check's tensors, in a bare loop.

        The tensors are read from the kernel at each call, so closing the kernel frees them.
        """
        torch = _torch()
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
        torch = _torch()
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

        torch = _torch()
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
