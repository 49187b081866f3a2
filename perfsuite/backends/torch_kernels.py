"""PyTorch's kernels: the buffers each check times, allocated once, and the calls on them.

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
  buffer, ``non_blocking`` where the host side is pinned;
* the training step: the same small CNN as TensorFlow's, with PyTorch's knobs.

fp32 is measured with ``torch.backends.cuda.matmul.allow_tf32`` (and cuDNN's) off, tf32 with
them on, whatever the defaults; each kernel restores the settings it changed.  On a GPU the
calls of a STREAM, GEMM or conv sample are replayed from a CUDA graph (:func:`cuda_graph`).
torch itself is imported when the first kernel is built, never when this module is.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import Any

from perfsuite.backends.base import (
    PRECISION,
    STREAM_PAGE_OFFSETS,
    STREAM_SCALAR,
    STREAM_WORD,
    ConvSpec,
    output_precision,
)

# gpu:N is NVML's device N (PCI bus order), as the run record's GPU facts number them.
os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
HALF_PRECISIONS = ("fp16", "bf16")


def torch_module() -> Any:
    """torch, imported on first use."""
    import torch

    return torch


def device_of(device: str) -> Any:
    """The torch device of a perfsuite device name (``cpu``, ``gpu:N``)."""
    torch = torch_module()
    kind, _, index = device.partition(":")
    return torch.device("cpu") if kind == "cpu" else torch.device("cuda", int(index or 0))


def _sync(device: str) -> None:
    if device != "cpu":
        torch_module().cuda.synchronize(device_of(device))


def _release(device: str) -> None:
    """Return a closed kernel's cached device memory, for the next check (any framework)."""
    if device != "cpu":
        torch_module().cuda.empty_cache()


def _random(shape: list[int], device: str, dtype: Any, seed: int) -> Any:
    """Random normal data made on the device, then cast (fp8 has no random generator)."""
    torch = torch_module()
    generator = torch.Generator(device=device_of(device)).manual_seed(seed)
    values = torch.randn(shape, generator=generator, device=device_of(device))
    return values.to(dtype)


class _Precision(contextlib.AbstractContextManager[None]):
    """TF32 on for ``tf32`` and off otherwise, for matmul and cuDNN; restored on close."""

    def __init__(self, precision: str) -> None:
        torch = torch_module()
        self._before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
        on = precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = on
        torch.backends.cudnn.allow_tf32 = on

    def __exit__(self, *exc: object) -> None:
        torch = torch_module()
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = self._before


class _TorchKernel:
    """Shared plumbing: the device, its sync, TF32 settings and the run record's notes."""

    def __init__(self, device: str, precision: str, *, set_tf32: bool = True) -> None:
        torch = self._torch = torch_module()
        self.device = device
        self.torch_device = device_of(device)
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

    def __init__(
        self, device: str, elements: int, seed: int, host: Sequence[Any] | None = None
    ) -> None:
        """Allocate a, b, c of random float64 data on the device; on the CPU, take ``host``.

        On the CPU the tensors are made over numpy arrays (``host``, else a new host set:
        :func:`perfsuite.backends.numpy.host_arrays`), each at its place in a 4 KiB page
        (``base.STREAM_PAGE_OFFSETS``), on a cache line and apart modulo 4 KiB.
        """
        super().__init__(device, STREAM_WORD.name, set_tf32=False)
        self.elements = elements
        if device != "cpu":
            self.a, self.b, self.c = (
                _random([elements], device, self.dtype, seed + i) for i in range(3)
            )
            return
        if host is None:
            from perfsuite.backends.numpy import host_arrays

            host = host_arrays(elements, seed)
        self.a, self.b, self.c = (self._torch.from_numpy(x) for x in host)

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
        torch = self._torch = torch_module()
        self.device = device
        self.direction = direction
        self.pinned = pinned
        self.nbytes = nbytes
        torch.cuda.set_device(device_of(device))
        generator = torch.Generator().manual_seed(seed)
        host = torch.randint(0, 256, [nbytes], dtype=torch.uint8, generator=generator)
        self.host = host.pin_memory() if pinned else host
        self.dev = torch.empty(nbytes, dtype=torch.uint8, device=device_of(device))
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
    torch = torch_module()
    torch.cuda.set_device(device_of(device))
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
