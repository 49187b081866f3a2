"""TensorFlow on the CPU and on each visible GPU; imported only when a check runs.

Each STREAM kernel is one XLA-compiled function (``jit_compile=True``), so it runs as a
single fused loop: triad reads b and c and writes a once, as STREAM counts it.  Without XLA,
``tf.identity`` does not copy at all and ``b + q*c`` makes two passes through memory.
Outputs are new tensors on every call (TensorFlow tensors are immutable); its allocator
reuses the freed buffers.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from perfsuite.backends import base, reference
from perfsuite.backends.base import (
    PRECISION,
    STREAM_SCALAR,
    STREAM_WORD,
    Backend,
    ConvSpec,
)
from perfsuite.errors import with_warning
from perfsuite.hardware.detect import gpu_facts
from perfsuite.measure.loop import Bare

# TensorFlow reads these when it is imported, by this module or by the registry's probe.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Without it TensorFlow reserves most of each GPU's memory on its first op, and a torch
# check later in the same session would run out of memory.
os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
# gpu:N is NVML's device N (PCI bus order), here as in torch.
os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")


def _tf() -> Any:
    import tensorflow as tf

    return tf


def profiler_count(fn: Any, *specs: Any) -> int:
    """FLOPs of ``fn`` traced on ``specs``, as ``tf.compat.v1.profiler`` counts them."""
    tf = _tf()
    graph = tf.function(fn).get_concrete_function(*specs).graph
    builder = tf.compat.v1.profiler.ProfileOptionBuilder
    options = builder(builder.float_operation()).with_empty_output().build()
    return int(tf.compat.v1.profiler.profile(graph=graph, options=options).total_float_ops)


def _tf_device(device: str) -> str:
    kind, _, index = device.partition(":")
    return f"/{kind.upper()}:{index or 0}"


class TensorFlowStream:
    """STREAM kernels as XLA-fused TensorFlow functions on one device."""

    itemsize = STREAM_WORD.itemsize

    def __init__(
        self, device: str, elements: int, seed: int, host: Sequence[Any] | None = None
    ) -> None:
        """Allocate a, b, c of random float64 data on the device; on the CPU, take ``host``.

        On the CPU the tensors are made over numpy arrays (``host``, else a new host set:
        :func:`perfsuite.backends.numpy.host_arrays`).  A CPU tensor made by TensorFlow comes
        from its pool, which keeps every block it was given: drawn there, a set of 4x a large
        L3 and its outputs held twice the set, and none of it went back to the system.
        """
        tf = self._tf = _tf()
        self.elements = elements
        self.device = _tf_device(device)
        word = getattr(tf, STREAM_WORD.dtype)
        with tf.device(self.device):
            # On a CPU, the numpy arrays under a, b and c (None on a GPU).
            self.host: list[Any] | None = None
            if device == "cpu":
                from perfsuite.backends.numpy import host_arrays

                self.host = list(host) if host is not None else host_arrays(elements, seed)
                self.a, self.b, self.c = (_over(x) for x in self.host)
            else:
                # Drawn in fp32 and cast: the values only need to be random, and TensorFlow's
                # fp64 draw takes 2-3x as long.
                self.a, self.b, self.c = (
                    tf.cast(tf.random.stateless_uniform([elements], seed=[seed, i]), word)
                    for i in range(3)
                )
            self.q = tf.constant(STREAM_SCALAR, word)
        self._out: Any = None
        jit = tf.function(jit_compile=True)
        self._copy = jit(lambda a: tf.identity(a))
        self._scale = jit(lambda c, q: q * c)
        self._add = jit(lambda a, b: a + b)
        self._triad = jit(lambda b, c, q: b + q * c)
        self._sync_devices = getattr(tf.test.experimental, "sync_devices", None)

    def _run(self, fn: Any, *args: Any) -> Any:
        # The last output goes back to TensorFlow's pool first, so that this call takes the
        # same block: one output array is live, not two.
        self._out = None
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
        self.a = self.b = self.c = self._out = self.host = None


def _over(array: Any) -> Any:
    """A TensorFlow CPU tensor over a numpy array's memory (DLPack: no copy)."""
    return _tf().experimental.dlpack.from_dlpack(array.__dlpack__())


def _eager_loop(device: str, what: str, call: Callable[[], Any], flops: float) -> Bare:
    """``call`` (an eager op) on ``device`` in a bare loop, synced by reading its last output."""
    tf = _tf()
    out: list[Any] = [None]

    def step() -> None:
        with tf.device(device):
            out[0] = call()

    def sync() -> None:  # waits for the last output, then lets it go (nothing before the first)
        if out[0] is not None:
            out[0][..., :1].numpy()
            out[0] = None

    return reference.bare_loop(what, step, flops, "TFLOP/s", sync)


class _TensorFlowKernel:
    """Shared plumbing: the device scope, sync, and the TF32 switch (a global setting)."""

    def __init__(self, device: str, precision: str, set_tf32: bool = True) -> None:
        tf = self._tf = _tf()
        self.device = _tf_device(device)
        self.precision = precision
        self.dtype = getattr(tf, PRECISION[precision].dtype)
        self._tf32_before = tf.config.experimental.tensor_float_32_execution_enabled()
        # fp32 is measured with TF32 off and tf32 with it on, explicitly, whatever the default;
        # a training step keeps the framework's own setting (users train with it).
        if set_tf32:
            tf.config.experimental.enable_tensor_float_32_execution(precision == "tf32")
        self._out: Any = None
        self._sync_devices = getattr(tf.test.experimental, "sync_devices", None)

    def random(self, shape: list[int], seed: int) -> Any:
        with self._tf.device(self.device):
            values = self._tf.random.stateless_normal(shape, seed=[seed, len(shape)])
            return self._tf.cast(values, self.dtype)

    def sync(self) -> None:
        """Wait for the device."""
        if self._sync_devices is not None:
            self._sync_devices()
        elif self._out is not None:
            self._tf.reduce_sum(self._out[..., :1]).numpy()

    def describe(self) -> dict[str, object]:
        """Device, dtype and TF32 mode."""
        tf = self._tf
        return {
            "tf_device": self.device,
            "dtype": self.dtype.name,
            "tf32": tf.config.experimental.tensor_float_32_execution_enabled(),
        }

    def close(self) -> None:
        """Drop the tensors and restore the TF32 setting."""
        self._out = None
        self._tf.config.experimental.enable_tensor_float_32_execution(self._tf32_before)


class TensorFlowMatmul(_TensorFlowKernel):
    """tf.linalg.matmul on random inputs."""

    def __init__(self, device: str, m: int, n: int, k: int, precision: str, seed: int) -> None:
        """Allocate A[M,K] and B[K,N] on the device."""
        super().__init__(device, precision)
        self.a = self.random([m, k], seed)
        self.b = self.random([k, n], seed + 1)

    def run(self) -> Any:
        """C = A x B."""
        with self._tf.device(self.device):
            self._out = self._tf.linalg.matmul(self.a, self.b)
        return self._out


class TensorFlowConv2D(_TensorFlowKernel):
    """One pass of tf conv2d (NHWC): forward, input gradient or filter gradient."""

    def __init__(self, device: str, spec: ConvSpec, precision: str, pass_: str, seed: int) -> None:
        """Allocate input, filter and output gradient of the right shapes."""
        super().__init__(device, precision)
        tf = self._tf
        s = spec
        self.pass_ = pass_
        self.x_shape = [s.batch, s.height, s.width, s.cin]
        self.w_shape = [s.kernel, s.kernel, s.cin, s.cout]
        self.strides = [1, s.stride, s.stride, 1]
        self.padding = s.padding
        self.x = self.random(self.x_shape, seed)
        self.w = self.random(self.w_shape, seed + 1)
        with tf.device(self.device):
            y_shape = tf.nn.conv2d(self.x, self.w, self.strides, self.padding).shape
        self.dy = self.random(list(y_shape), seed + 2)

    def run(self) -> Any:
        """The pass this kernel measures."""
        tf = self._tf
        with tf.device(self.device):
            if self.pass_ == "forward":
                self._out = tf.nn.conv2d(self.x, self.w, self.strides, self.padding)
            elif self.pass_ == "input_grad":
                self._out = tf.raw_ops.Conv2DBackpropInput(
                    input_sizes=self.x_shape,
                    filter=self.w,
                    out_backprop=self.dy,
                    strides=self.strides,
                    padding=self.padding,
                )
            else:
                self._out = tf.raw_ops.Conv2DBackpropFilter(
                    input=self.x,
                    filter_sizes=self.w_shape,
                    out_backprop=self.dy,
                    strides=self.strides,
                    padding=self.padding,
                )
        return self._out


class TensorFlowTrainStep(_TensorFlowKernel):
    """One SGD step of a small Keras CNN on 32x32x3 inputs, 10 classes.

    ``variant`` is ``baseline``, ``xla`` (``jit_compile=True``), ``amp`` (mixed precision:
    ``mixed_float16`` with loss scaling on a GPU, ``mixed_bfloat16`` on a CPU) or ``xla+amp``.
    """

    def __init__(self, device: str, variant: str, batch: int, seed: int) -> None:
        """Build the model for the variant and random inputs and labels."""
        # TF32 left as the framework has it: forcing it off would slow the plain step on
        # Ampere and later and inflate the AMP and XLA speedups.
        super().__init__(device, "fp32", set_tf32=False)
        tf = self._tf
        import keras

        amp = "amp" in variant
        policy = (
            ("mixed_float16" if device.startswith("gpu") else "mixed_bfloat16")
            if amp
            else "float32"
        )
        self.policy = policy
        with tf.device(self.device):
            self.model = keras.Sequential(
                [
                    keras.Input((32, 32, 3)),
                    keras.layers.Conv2D(32, 3, padding="same", activation="relu", dtype=policy),
                    keras.layers.Conv2D(64, 3, padding="same", activation="relu", dtype=policy),
                    keras.layers.MaxPooling2D(dtype=policy),
                    keras.layers.Conv2D(128, 3, padding="same", activation="relu", dtype=policy),
                    keras.layers.GlobalAveragePooling2D(dtype=policy),
                    keras.layers.Dense(10, dtype="float32"),
                ]
            )
            optimizer = keras.optimizers.SGD(0.01)
            if policy == "mixed_float16":
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            self.optimizer = optimizer
            self.loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
            self.images = tf.random.stateless_uniform([batch, 32, 32, 3], seed=[seed, 1])
            self.labels = tf.random.stateless_uniform(
                [batch], seed=[seed, 2], maxval=10, dtype=tf.int32
            )
        model, loss_fn = self.model, self.loss

        def step(images: Any, labels: Any) -> Any:
            with tf.GradientTape() as tape:
                loss = loss_fn(labels, model(images, training=True))
                scaled = optimizer.scale_loss(loss) if hasattr(optimizer, "scale_loss") else loss
            grads = tape.gradient(scaled, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

        self._step = tf.function(step, jit_compile="xla" in variant)

    def run(self) -> Any:
        """One training step."""
        with self._tf.device(self.device):
            self._out = self._step(self.images, self.labels)
        return self._out

    def describe(self) -> dict[str, object]:
        """The precision policy (named apart from the measuring ``policy`` the judge writes)."""
        return {**super().describe(), "precision_policy": self.policy}


def gpu_blind_reason(device: str, tf_gpus: int, cuda_build: bool, visible: int) -> str:
    """Why TensorFlow cannot run on ``device``; loud when the GPUs are there but TF is blind."""
    build = "a CUDA build" if cuda_build else "a CPU-only build"
    reason = f"TensorFlow ({build}) sees {tf_gpus} GPU(s); no {device} here"
    if visible > tf_gpus and not cuda_build:
        return with_warning(
            reason,
            f"{visible} GPU(s) are visible on this machine but the installed "
            "TensorFlow cannot use them (on x86_64 the 'tensorflow' extra installs "
            "tensorflow-cpu); on a GPU runner: pip install 'perfsuite[tensorflow-gpu]'",
        )
    if visible > tf_gpus:
        return with_warning(
            reason,
            f"{visible} GPU(s) are visible on this machine but TensorFlow finds "
            f"{tf_gpus}: its CUDA libraries or the driver do not match (TensorFlow logs why "
            'at import; python -c "import tensorflow as tf; '
            "print(tf.config.list_physical_devices('GPU'))\")",
        )
    return reason


class TensorFlowBackend(Backend):
    """TensorFlow, an optional extra."""

    name = "tensorflow"
    extra = "tensorflow"
    module = "tensorflow"
    framework = "TensorFlow"
    uses_gpus = True
    profiler = "TensorFlow's profiler"
    knob_variants = ("baseline", "xla", "amp", "xla+amp")
    operations = frozenset({"stream", "matmul", "conv2d", "train_step"})
    stream_outputs = 1  # one output from its pool at a time (TensorFlowStream._run)

    def device_unavailable_reason(self, device: str) -> str | None:
        """Skip reason when TensorFlow does not see the GPU."""
        if device == "cpu":
            return None
        tf = _tf()
        gpus = tf.config.list_physical_devices("GPU")
        index = int(device.split(":", 1)[1])
        if index < len(gpus):
            return None
        return gpu_blind_reason(
            device, len(gpus), tf.test.is_built_with_cuda(), len(gpu_facts().names)
        )

    def version(self) -> str:
        """TensorFlow's version."""
        return str(_tf().__version__)

    def stream_kernels(
        self, device: str, elements: int, seed: int, host: Sequence[Any] | None = None
    ) -> TensorFlowStream:
        """Allocate the arrays on the device; on the CPU, tensors over the host set."""
        return TensorFlowStream(device, elements, seed, host)

    def _compute_capability(self, device: str) -> tuple[int, int] | None:
        tf = _tf()
        gpus = tf.config.list_physical_devices("GPU")
        index = int(device.split(":", 1)[1])
        details = tf.config.experimental.get_device_details(gpus[index])
        cc = details.get("compute_capability")
        return tuple(cc) if cc else None

    def precision_unavailable_reason(self, device: str, precision: str) -> str | None:
        """TF32 and bf16 need Ampere or newer; TF32 exists on GPUs only."""
        if precision not in PRECISION:
            return f"unknown precision {precision!r}"
        if precision == "fp8":
            return "TensorFlow has no fp8 GEMM or convolution kernels"
        if device == "cpu":
            return base.cpu_precision_reason("TensorFlow", precision)
        cc = self._compute_capability(device)
        return base.gpu_precision_reason(device, cc, precision) if cc is not None else None

    def amp_unavailable_reason(self, device: str) -> str | None:
        """Mixed precision: bf16 instructions on a CPU, compute capability 7.0+ on a GPU."""
        if device == "cpu":
            return base.cpu_amp_reason()
        cc = self._compute_capability(device)
        if cc is not None and cc < (7, 0):
            return f"{device} (compute capability {cc[0]}.{cc[1]}) has no fp16 tensor cores"
        return None

    def stream_reference(self, kernels: Any, kernel: str, counted_bytes: int) -> Bare:
        """The same XLA function in a bare loop, on the check's tensors, as torch's is.

        TensorFlow has no elementwise kernel that writes into a given buffer with STREAM's
        traffic: an XLA function assigning into a ``tf.Variable`` writes a temporary and
        copies it in (5 words per triad element instead of 3), and the in-place variable ops
        (``assign_add``) skip the write-allocate read that an out-of-place kernel pays.  The
        outputs come from TensorFlow's CPU pool (``perfsuite/measure/allocator.py``) or the
        GPU's, so no call takes fresh pages, and this loop measures what the check's harness costs.
        """
        return reference.same_call(
            f"the XLA {kernel} function in a bare loop (outputs from TensorFlow's pool)",
            kernels,
            kernel,
            counted_bytes,
        )

    def matmul_reference(self, kernel: Any, flops: float) -> Bare:
        """``tf.linalg.matmul`` on the check's inputs, in a plain loop."""
        tf = _tf()
        return _eager_loop(
            kernel.device,
            "tf.linalg.matmul in a loop",
            lambda: tf.linalg.matmul(kernel.a, kernel.b),
            flops,
        )

    def conv2d_reference(self, kernel: Any, flops: float) -> Bare:
        """The pass through TensorFlow's public functions, in a bare loop.

        ``tf.nn.conv2d``, ``tf.nn.conv2d_transpose`` (the input gradient) and
        ``tf.compat.v1.nn.conv2d_backprop_filter``: each computes the one pass (a gradient
        tape would also run the forward convolution).
        """
        tf = _tf()
        k = kernel  # its tensors are read at each call, so closing the kernel frees them
        strides, padding = kernel.strides, kernel.padding
        calls: dict[str, tuple[str, Callable[[], Any]]] = {
            "forward": ("tf.nn.conv2d", lambda: tf.nn.conv2d(k.x, k.w, strides, padding)),
            "input_grad": (
                "tf.nn.conv2d_transpose",
                lambda: tf.nn.conv2d_transpose(k.dy, k.w, k.x_shape, strides, padding),
            ),
            "filter_grad": (
                "tf.compat.v1.nn.conv2d_backprop_filter",
                lambda: tf.compat.v1.nn.conv2d_backprop_filter(
                    k.x, k.w_shape, k.dy, strides, padding
                ),
            ),
        }
        name, call = calls[kernel.pass_]
        return _eager_loop(kernel.device, f"{name} in a loop", call, flops)

    def matmul(
        self, device: str, m: int, n: int, k: int, precision: str, seed: int
    ) -> TensorFlowMatmul:
        """GEMM on the device."""
        return TensorFlowMatmul(device, m, n, k, precision, seed)

    def conv2d(
        self, device: str, spec: ConvSpec, precision: str, pass_: str, seed: int
    ) -> TensorFlowConv2D:
        """One conv2d pass on the device."""
        return TensorFlowConv2D(device, spec, precision, pass_, seed)

    def train_step(self, device: str, variant: str, batch: int, seed: int) -> TensorFlowTrainStep:
        """A small CNN's training step with the variant's knobs."""
        return TensorFlowTrainStep(device, variant, batch, seed)

    def matmul_counted_flops(self, m: int, n: int, k: int, precision: str) -> int | None:
        """``tf.linalg.matmul`` traced and counted by TensorFlow's profiler."""
        tf = _tf()
        dtype = getattr(tf, PRECISION[precision].dtype)
        a, b = tf.TensorSpec([m, k], dtype), tf.TensorSpec([k, n], dtype)
        return profiler_count(lambda x, y: tf.linalg.matmul(x, y), a, b)

    def conv2d_counted_flops(self, spec: ConvSpec, precision: str, pass_: str) -> int | None:
        """The conv pass traced and counted by TensorFlow's profiler."""
        tf = _tf()
        dtype = getattr(tf, PRECISION[precision].dtype)
        s = spec
        x_shape = [s.batch, s.height, s.width, s.cin]
        w_shape = [s.kernel, s.kernel, s.cin, s.cout]
        strides = [1, s.stride, s.stride, 1]
        x, w = tf.TensorSpec(x_shape, dtype), tf.TensorSpec(w_shape, dtype)
        forward = tf.function(lambda a, b: tf.nn.conv2d(a, b, strides, s.padding))
        dy = tf.TensorSpec(forward.get_concrete_function(x, w).output_shapes, dtype)  # traced only
        if pass_ == "forward":
            return profiler_count(lambda a, b: tf.nn.conv2d(a, b, strides, s.padding), x, w)
        if pass_ == "input_grad":
            return profiler_count(
                lambda b, g: tf.raw_ops.Conv2DBackpropInput(
                    input_sizes=x_shape,
                    filter=b,
                    out_backprop=g,
                    strides=strides,
                    padding=s.padding,
                ),
                w,
                dy,
            )
        return profiler_count(
            lambda a, g: tf.raw_ops.Conv2DBackpropFilter(
                input=a, filter_sizes=w_shape, out_backprop=g, strides=strides, padding=s.padding
            ),
            x,
            dy,
        )
