"""What a backend is: its devices, kernels, timer and precisions; and the targets it offers."""

from __future__ import annotations

import importlib
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from perfsuite.hardware.detect import gpu_facts, host_facts
from perfsuite.measure.loop import Bare


@dataclass(frozen=True)
class Target:
    """One backend on one device, e.g. ``tensorflow`` on ``gpu:0``."""

    backend: str
    device: str  # "cpu" or "gpu:N"

    def __str__(self) -> str:
        """Render as a pytest parameter id, e.g. ``numpy-cpu``."""
        return f"{self.backend}-{self.device}"

    @property
    def device_kind(self) -> str:
        """``gpu`` or ``cpu``."""
        return "gpu" if self.device.startswith("gpu") else "cpu"

    @property
    def device_index(self) -> int:
        """The GPU index (0 for the CPU)."""
        return int(self.device.split(":", 1)[1]) if ":" in self.device else 0


class StreamKernels(Protocol):
    """The four STREAM kernels over three preallocated arrays a, b, c of random data."""

    elements: int
    itemsize: int

    def copy(self) -> object:
        """C = a."""

    def scale(self) -> object:
        """B = q*c."""

    def add(self) -> object:
        """C = a + b."""

    def triad(self) -> object:
        """A = b + q*c."""

    def sync(self) -> None:
        """Wait until all queued work on the device is done."""

    def describe(self) -> dict[str, object]:
        """How the kernels are implemented (threads, fusion), for the run record."""


class Kernel(Protocol):
    """One operation on preallocated random inputs, ready to run repeatedly."""

    def run(self) -> object:
        """Run the operation once (possibly asynchronously)."""

    def sync(self) -> None:
        """Wait until all queued work on the device is done."""

    def describe(self) -> dict[str, object]:
        """How the operation is run (library, flags), for the run record."""

    def close(self) -> None:
        """Release inputs and restore any global setting changed for this kernel."""


@dataclass(frozen=True)
class ConvSpec:
    """A 2-D convolution, NHWC, with square kernels and stride 1 by default."""

    batch: int
    height: int
    width: int
    cin: int
    cout: int
    kernel: int = 3
    stride: int = 1
    padding: str = "SAME"


STREAM_SCALAR = 3.0  # STREAM's q, in scale (b = q*c) and triad (a = b + q*c)

# Where each host STREAM array starts within a 4 KiB page, in bytes, as STREAM's OFFSET
# does: every array on a cache-line boundary, and no kernel's store stream (copy c=a, scale
# b=q*c, add c=a+b, triad a=b+q*c, and a blocked triad's scratch) less than 1 KiB ahead of
# one of its load streams modulo 4 KiB, where a CPU that matches loads against older stores
# by the low 12 address bits can stall on false matches.  Large arrays allocated one after
# another came out 16 bytes apart, two of three off the 64-byte line; on an AMD EPYC VM a
# vector copy whose source was off the line and whose stores ran 32 bytes ahead of its
# loads modulo 4 KiB ran at 0.77 of its speed with these offsets (interleaved, same
# minutes), and at 0.42-0.59 in other minutes.
PAGE_BYTES = 4096
STREAM_PAGE_OFFSETS = {"a": 0, "c": 1024, "scratch": 2048, "b": 2560}


def page_skip(address: int, offset: int, itemsize: int) -> int:
    """Items to skip from ``address`` to reach ``offset`` bytes into a 4 KiB page.

    An allocation of ``PAGE_BYTES // itemsize`` items more than needed always has room.
    """
    return ((offset - address) % PAGE_BYTES) // itemsize


@dataclass(frozen=True)
class Precision:
    """A numeric precision: its storage type (as numpy, TensorFlow and torch name it) and size.

    ``tf32`` stores fp32 and multiplies on tensor cores with a 10-bit mantissa; ``fp8`` is
    e4m3 (the inference and forward-pass format), multiplied with fp32 accumulation.
    """

    name: str
    dtype: str
    itemsize: int
    gpu_only: bool = False
    output: str = ""  # the precision a GEMM writes C in, where it differs from the inputs'
    min_capability: tuple[int, int] | None = None  # an NVIDIA GPU's, for its tensor cores


# The one table of precisions: checks, backends and the roofline all read it.
PRECISION = {
    p.name: p
    for p in (
        Precision("fp64", "float64", 8),
        Precision("fp32", "float32", 4),
        Precision("tf32", "float32", 4, gpu_only=True, min_capability=(8, 0)),
        Precision("fp16", "float16", 2),
        Precision("bf16", "bfloat16", 2, min_capability=(8, 0)),
        Precision("fp8", "float8_e4m3fn", 1, gpu_only=True, output="bf16", min_capability=(8, 9)),
    )
}


def output_precision(precision: str) -> Precision:
    """The precision a GEMM of ``precision`` inputs writes its result in."""
    return PRECISION[PRECISION[precision].output or precision]


def gpu_precision_reason(device: str, capability: tuple[int, int], precision: str) -> str | None:
    """Why a GPU of this compute capability has no ``precision`` kernels, or None."""
    need = PRECISION[precision].min_capability
    if need and capability < need:
        cc = f"{capability[0]}.{capability[1]}"
        return (
            f"{device} (compute capability {cc}) has no {precision}; it needs {need[0]}.{need[1]}+"
        )
    return None


# STREAM's word: the arrays of every backend's STREAM kernels are of this precision.
STREAM_WORD = PRECISION["fp64"]
# What GEMM and conv are measured in (fp64 is STREAM's word, not a deep-learning precision).
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8")


def precisions_for(device_kind: str) -> tuple[str, ...]:
    """The GEMM/conv precisions that exist on a device kind (``cpu`` or ``gpu``)."""
    return tuple(p for p in PRECISIONS if device_kind == "gpu" or not PRECISION[p].gpu_only)


# CPU instructions without which a framework's 16-bit kernels are emulated: torch's run
# hundreds of times slower than fp32, TensorFlow's convolution gradients 20-30x slower, and
# TensorFlow's GEMMs at the fp32 rate.  Timing them measures the emulation, not a peak.
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
HALF_CPU_FLAGS = {"bf16": (*BF16_CPU_FLAGS, "bf16"), "fp16": ("avx512_fp16", "amx_fp16", "fphp")}


def cpu_precision_reason(framework: str, precision: str) -> str | None:
    """Why ``precision`` is no peak measurement on this host CPU, or None where it is."""
    if PRECISION[precision].gpu_only:
        return f"{precision} is a GPU tensor-core mode; the CPU has none"
    flags = HALF_CPU_FLAGS.get(precision)
    if flags and not any(f in host_facts().flags for f in flags):
        return (
            f"this CPU has no {precision} instructions ({' or '.join(flags[:2])}); "
            f"{framework}'s {precision} kernels would be emulated, not a peak measurement"
        )
    return None


def cpu_amp_reason() -> str | None:
    """Why mixed precision (bf16 autocast) cannot run natively on this host CPU, or None."""
    if not any(f in host_facts().flags for f in BF16_CPU_FLAGS):
        return "this CPU has no bf16 instructions (avx512_bf16 or amx_bf16)"
    return None


CONV_PASSES = ("forward", "input_grad", "filter_grad")


class Backend(ABC):
    """A framework that can run workloads on some devices."""

    name: str = ""
    extra: str = ""  # the perfsuite extra that installs it
    profiler: str = ""  # whose FLOP counter cross-checks the analytic counts, if any
    operations: frozenset[str] = frozenset({"stream"})
    # The training-step variants the knobs check runs (each backend's own knobs).
    knob_variants: tuple[str, ...] = ()
    # The framework's import name and its name in messages; "" where it is always present.
    module: str = ""
    framework: str = ""
    uses_gpus: bool = False  # parametrized over the GPU slots as well as the CPU
    # Where the extra is not the way to install it on a machine without a GPU, what is.
    cpu_install: str = ""
    # Arrays of a STREAM set's size that its kernels allocate beside a, b and c (the
    # outputs of a framework whose kernels cannot write into a given array).
    stream_outputs: int = 0

    def unavailable_reason(self) -> str | None:
        """Why the backend cannot run here (its framework is not installed), or None."""
        if not self.module:
            return None
        try:
            importlib.import_module(self.module)
        except ImportError as exc:
            hint = f"pip install 'perfsuite[{self.extra}]'"
            if self.cpu_install:
                hint += f" (without a GPU: {self.cpu_install})"
            return f"{self.framework} is not installed ({exc}); {hint}"
        return None

    def device_slots(self) -> list[str]:
        """Devices to parametrize over; a slot may still turn out to be unavailable."""
        return ["cpu", *gpu_slots()] if self.uses_gpus else ["cpu"]

    def device_unavailable_reason(self, device: str) -> str | None:
        """Why ``device`` cannot be used by this backend, or None."""
        return None if device == "cpu" else f"{self.name} runs on the CPU only"

    def timer(self, device: str) -> Any:
        """The sample source that times work on ``device``: None for the host clock.

        A GPU backend returns an event source (CUDA events and the like) here.
        """
        return None

    def cache_bytes(self, device: str) -> int | None:
        """The last-level cache of an accelerator as the device reports it, or None."""
        return None

    def capture(self, device: str) -> Any:
        """What records a call repeated N times for replay on ``device`` (a CUDA graph), or None.

        Given ``(run, calls)`` it returns a callable that replays the calls without launching
        each from the host: on a GPU, kernels of a few microseconds otherwise measure the
        host's launch rate.  None (the default): each call is launched from the host.
        """
        return None

    def amp_unavailable_reason(self, device: str) -> str | None:
        """Why mixed precision cannot run on ``device``, or None."""
        return f"{self.name} has no mixed precision"

    @abstractmethod
    def version(self) -> str:
        """The version of the framework that is loaded."""

    @abstractmethod
    def stream_kernels(
        self, device: str, elements: int, seed: int, host: Sequence[Any] | None = None
    ) -> StreamKernels:
        """STREAM kernels over three arrays of random float64 data on ``device``.

        ``host``: on the CPU, a host set to run on (a, b and c, numpy arrays at STREAM's page
        offsets: ``backends.numpy.host_arrays``), which the CPU backends share; None: a new
        set of their own.  A GPU's arrays are allocated on the device.
        """

    def precision_unavailable_reason(self, device: str, precision: str) -> str | None:
        """Why ``device`` cannot run ``precision`` with this backend, or None."""
        return None if precision == "fp32" else f"{self.name} has no {precision} kernels"

    def stream_reference(self, kernels: StreamKernels, kernel: str, counted_bytes: int) -> Bare:
        """A bare reference for one STREAM kernel, in GB/s, or why there is none.

        ``counted_bytes`` is one call's traffic as the check counts it (STREAM's words).
        """
        return Bare("bare reference", unavailable=f"{self.name} has none")

    def matmul_reference(self, kernel: Kernel, flops: float) -> Bare:
        """A bare matmul on the kernel's inputs, in TFLOP/s, or why there is none."""
        return Bare("bare matmul", unavailable=f"{self.name} has none")

    def conv2d_reference(self, kernel: Kernel, flops: float) -> Bare:
        """The conv pass written directly against the framework, on the kernel's tensors."""
        return Bare("bare conv2d", unavailable=f"{self.name} has none")

    def host_copy_reference(self, kernel: Kernel, nbytes: int) -> Bare:
        """The copy written directly against the framework, on the kernel's buffers, in GB/s."""
        return Bare("bare copy", unavailable=f"{self.name} has none")

    def matmul(self, device: str, m: int, n: int, k: int, precision: str, seed: int) -> Kernel:
        """C[M,N] = A[M,K] x B[K,N] on random data."""
        raise NotImplementedError(f"{self.name} has no matmul")

    def conv2d(self, device: str, spec: ConvSpec, precision: str, pass_: str, seed: int) -> Kernel:
        """One pass of a 2-D convolution on random data."""
        raise NotImplementedError(f"{self.name} has no conv2d")

    def matmul_shape_reason(self, m: int, n: int, k: int, precision: str) -> str | None:
        """Why this backend cannot multiply these shapes in ``precision``, or None."""
        return None

    def matmul_counted_flops(self, m: int, n: int, k: int, precision: str) -> int | None:
        """FLOPs of the matmul as the framework's own profiler counts them, or None."""
        return None

    def conv2d_counted_flops(self, spec: ConvSpec, precision: str, pass_: str) -> int | None:
        """FLOPs of one conv2d pass as the framework's own profiler counts them, or None."""
        return None

    def train_step(self, device: str, variant: str, batch: int, seed: int) -> Kernel:
        """One training step of a small CNN, with the knobs of ``variant``."""
        raise NotImplementedError(f"{self.name} has no training step")

    def host_copy(
        self, device: str, direction: str, pinned: bool, nbytes: int, seed: int
    ) -> Kernel:
        """One copy of ``nbytes`` between host memory and ``device`` (``h2d`` or ``d2h``)."""
        raise NotImplementedError(f"{self.name} has no host-device copy")


def gpu_slots(environ: Mapping[str, str] | None = None) -> list[str]:
    """``gpu:N`` for each GPU this process may use; at least ``gpu:0``, to report absence.

    NVML sees every GPU on the node; ``CUDA_VISIBLE_DEVICES`` (a job's share of them) limits
    what the frameworks may use and renumbers it from 0.
    """
    count = len(gpu_facts().names)
    visible = (os.environ if environ is None else environ).get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip().lower() != "all":
        # Set but empty means no GPU for this process.
        count = min(count, len([d for d in visible.split(",") if d.strip()]))
    return [f"gpu:{i}" for i in range(max(1, count))]


def slot_facts(gpus: object, slot: int, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """NVML's facts (``environment.gpus()``) of the GPU behind this process's ``gpu:slot``.

    ``CUDA_VISIBLE_DEVICES`` renumbers a job's GPUs from 0: slot 0 of ``2,3`` is NVML's
    device 2.  Entries may be indices or (prefixes of) UUIDs; anything else, or no such
    GPU, gives an empty dict.
    """
    if not isinstance(gpus, list):
        return {}
    visible = (os.environ if environ is None else environ).get("CUDA_VISIBLE_DEVICES")
    if visible is None or visible.strip().lower() == "all":
        return gpus[slot] if slot < len(gpus) else {}
    entries = [d.strip() for d in visible.split(",") if d.strip()]
    if slot >= len(entries):
        return {}
    entry = entries[slot]
    if entry.isdigit():
        index = int(entry)
        return gpus[index] if index < len(gpus) else {}
    matches = [g for g in gpus if str(g.get("uuid", "")).startswith(entry)]
    return matches[0] if len(matches) == 1 else {}
