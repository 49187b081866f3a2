"""Framework backends and the (backend, device) targets that checks are parametrized over.

A backend says which devices it can use and implements each workload's primitive
operations.  Checks never name a backend: they iterate :func:`targets`, so a new framework
(for example PyTorch) is added by registering a backend, here or through the
``perfsuite.backends`` entry-point group, without touching any check.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Protocol

from perfsuite.hardware.detect import gpu_facts


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


PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
CONV_PASSES = ("forward", "input_grad", "filter_grad")


class Backend(ABC):
    """A framework that can run workloads on some devices."""

    name: str = ""
    extra: str = ""  # the perfsuite extra that installs it
    operations: frozenset[str] = frozenset({"stream"})

    @abstractmethod
    def unavailable_reason(self) -> str | None:
        """Why the backend cannot run here (e.g. not installed), or None."""

    def device_slots(self) -> list[str]:
        """Devices to parametrize over; a slot may still turn out to be unavailable."""
        return ["cpu"]

    def device_unavailable_reason(self, device: str) -> str | None:
        """Why ``device`` cannot be used by this backend, or None."""
        return None if device == "cpu" else f"{self.name} runs on the CPU only"

    @abstractmethod
    def version(self) -> str:
        """The version of the framework that is loaded."""

    @abstractmethod
    def stream_kernels(self, device: str, elements: int, seed: int) -> StreamKernels:
        """Allocate STREAM arrays of random float64 data on ``device``."""

    def precision_unavailable_reason(self, device: str, precision: str) -> str | None:
        """Why ``device`` cannot run ``precision`` with this backend, or None."""
        return None if precision == "fp32" else f"{self.name} has no {precision} kernels"

    def stream_reference(self, kernels: StreamKernels, kernel: str) -> dict[str, Any]:
        """A bare reference for one STREAM kernel: what it is and its GB/s, or why none."""
        return {"what": "bare reference", "unavailable": f"{self.name} has none"}

    def matmul_reference(self, kernel: Kernel, flops: float) -> dict[str, Any]:
        """A bare matmul on the kernel's inputs: what it is and its TFLOP/s, or why none."""
        return {"what": "bare matmul", "unavailable": f"{self.name} has none"}

    def matmul(self, device: str, m: int, n: int, k: int, precision: str, seed: int) -> Kernel:
        """C[M,N] = A[M,K] x B[K,N] on random data."""
        raise NotImplementedError(f"{self.name} has no matmul")

    def conv2d(self, device: str, spec: ConvSpec, precision: str, pass_: str, seed: int) -> Kernel:
        """One pass of a 2-D convolution on random data."""
        raise NotImplementedError(f"{self.name} has no conv2d")

    def train_step(self, device: str, variant: str, batch: int, seed: int) -> Kernel:
        """One training step of a small CNN, with the XLA/AMP knobs of ``variant``."""
        raise NotImplementedError(f"{self.name} has no training step")


def gpu_slots() -> list[str]:
    """``gpu:N`` for each GPU NVML sees, and at least ``gpu:0`` so its absence is reported."""
    return [f"gpu:{i}" for i in range(max(1, len(gpu_facts().names)))]


@functools.cache
def registry() -> dict[str, Backend]:
    """Built-in backends, then any registered under the ``perfsuite.backends`` entry points."""
    from perfsuite.workloads.numpy_backend import NumpyBackend
    from perfsuite.workloads.tensorflow_backend import TensorFlowBackend

    backends: dict[str, Backend] = {b.name: b for b in (NumpyBackend(), TensorFlowBackend())}
    for ep in entry_points(group="perfsuite.backends"):
        backend = ep.load()()
        backends[backend.name] = backend
    return backends


def get(name: str) -> Backend:
    """Look up a backend by name."""
    return registry()[name]


def targets() -> list[Target]:
    """Every (backend, device) pair a check is parametrized over."""
    return [Target(b.name, d) for b in registry().values() for d in b.device_slots()]


def skip_reason(target: Target, operation: str = "stream", precision: str = "fp32") -> str | None:
    """Why a target cannot run an operation in a precision here, or None when it can."""
    backend = get(target.backend)
    if operation not in backend.operations:
        return f"{backend.name} has no {operation}"
    return (
        backend.unavailable_reason()
        or backend.device_unavailable_reason(target.device)
        or backend.precision_unavailable_reason(target.device, precision)
    )


def targets_for(operation: str) -> list[Target]:
    """The targets whose backend implements ``operation``."""
    return [
        Target(b.name, d)
        for b in registry().values()
        if operation in b.operations
        for d in b.device_slots()
    ]
