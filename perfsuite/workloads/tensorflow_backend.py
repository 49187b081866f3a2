"""TensorFlow on the CPU and on each visible GPU; imported only when a check runs.

Each STREAM kernel is one XLA-compiled function (``jit_compile=True``), so it runs as a
single fused loop: triad reads b and c and writes a once, as STREAM counts it.  Without XLA,
``tf.identity`` does not copy at all and ``b + q*c`` makes two passes through memory.
Outputs are new tensors on every call (TensorFlow tensors are immutable); its allocator
reuses the freed buffers.
"""

from __future__ import annotations

import os
from typing import Any

from perfsuite.workloads.backend import Backend, gpu_slots
from perfsuite.workloads.numpy_backend import SCALAR

INSTALL_HINT = "pip install 'perfsuite[tensorflow]'"


def _tf() -> Any:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    return tf


def _tf_device(device: str) -> str:
    kind, _, index = device.partition(":")
    return f"/{kind.upper()}:{index or 0}"


class TensorFlowStream:
    """STREAM kernels as XLA-fused TensorFlow functions on one device."""

    itemsize = 8

    def __init__(self, device: str, elements: int, seed: int) -> None:
        """Allocate a, b, c of random float64 data on the device."""
        tf = self._tf = _tf()
        self.elements = elements
        self.device = _tf_device(device)
        with tf.device(self.device):
            self.a, self.b, self.c = (
                tf.random.stateless_uniform([elements], seed=[seed, i], dtype=tf.float64)
                for i in range(3)
            )
            self.q = tf.constant(SCALAR, tf.float64)
        self._out: Any = None
        jit = tf.function(jit_compile=True)
        self._copy = jit(lambda a: tf.identity(a))
        self._scale = jit(lambda c, q: q * c)
        self._add = jit(lambda a, b: a + b)
        self._triad = jit(lambda b, c, q: b + q * c)
        self._sync_devices = getattr(tf.test.experimental, "sync_devices", None)

    def _run(self, fn: Any, *args: Any) -> Any:
        with self._tf.device(self.device):
            self._out = fn(*args)
        return self._out

    def copy(self) -> Any:
        """C = a."""
        return self._run(self._copy, self.a)

    def scale(self) -> Any:
        """B = q*c."""
        return self._run(self._scale, self.c, self.q)

    def add(self) -> Any:
        """C = a + b."""
        return self._run(self._add, self.a, self.b)

    def triad(self) -> Any:
        """A = b + q*c."""
        return self._run(self._triad, self.b, self.c, self.q)

    def sync(self) -> None:
        """Wait for the device: ``sync_devices`` where TensorFlow has it, else read a value."""
        if self._sync_devices is not None:
            self._sync_devices()
        elif self._out is not None:
            self._out[-1].numpy()

    def describe(self) -> dict[str, object]:
        """Device and compilation mode."""
        tf = self._tf
        return {
            "tf_device": self.device,
            "xla": True,
            "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads() or "default",
        }

    def close(self) -> None:
        """Drop the arrays."""
        self.a = self.b = self.c = self._out = None


class TensorFlowBackend(Backend):
    """TensorFlow, an optional extra."""

    name = "tensorflow"
    extra = "tensorflow"

    def unavailable_reason(self) -> str | None:
        """Skip reason when TensorFlow cannot be imported."""
        try:
            _tf()
        except ImportError as exc:
            return f"TensorFlow is not installed ({exc}); {INSTALL_HINT}"
        return None

    def device_slots(self) -> list[str]:
        """The CPU and every GPU slot."""
        return ["cpu", *gpu_slots()]

    def device_unavailable_reason(self, device: str) -> str | None:
        """Skip reason when TensorFlow does not see the GPU."""
        if device == "cpu":
            return None
        tf = _tf()
        gpus = tf.config.list_physical_devices("GPU")
        index = int(device.split(":", 1)[1])
        if index < len(gpus):
            return None
        build = "a CUDA build" if tf.test.is_built_with_cuda() else "a CPU-only build"
        return f"TensorFlow ({build}) sees {len(gpus)} GPU(s); no {device} here"

    def version(self) -> str:
        """TensorFlow's version."""
        return str(_tf().__version__)

    def stream_kernels(self, device: str, elements: int, seed: int) -> TensorFlowStream:
        """Allocate the arrays on the device."""
        return TensorFlowStream(device, elements, seed)
