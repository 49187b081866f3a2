"""Conv arithmetic intensity and roofline attainment.

For each case: analytic FLOPs (2*N*Hout*Wout*Cout*Cin*Kh*Kw per pass), minimum bytes
(input + output + filter), the arithmetic intensity (AI), the roofline bound
min(peak FLOP/s, AI x peak bandwidth) from the profile, achieved FLOP/s, and attainment =
achieved / bound.  The seed lectures' AI treats the weights as cached (input + output only):
for the 3x3 seed layer 128x128x16 -> 16 in fp32 that is 36 FLOP/B, and for the ResNet-50 3x3
layers with Cin = Cout = C it is 9*C/4: 144, 288, 576 and 1152 FLOP/B.  Both are recorded;
the bound uses the stricter one with the filter.  The floor applies to attainment.

Analytic FLOPs count a direct convolution.  Libraries may use Winograd or FFT algorithms
that execute fewer FLOPs, so attainment above 1 is possible and means just that.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfsuite.hardware.profile import HardwareProfile
from perfsuite.measure import Reference, Workload
from perfsuite.model import Work
from perfsuite.workloads import backend as backends
from perfsuite.workloads import flops, roofline
from perfsuite.workloads.backend import CONV_PASSES, ConvSpec
from perfsuite.workloads.cases import Case

# A conservative floor: well-tuned 3x3 layers reach 40-70% of their roofline bound;
# 0.75 x 0.4 = 0.3.
FLOOR_FRACTION = 0.3
SEED = 128
ITEMSIZE = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2}
# (name, H, W, C): the seed example has 16 channels; then the ResNet-50 3x3 layers.
LAYERS = (
    ("seed-128x128x16", 128, 128, 16),
    ("resnet-128x128x64", 128, 128, 64),
    ("resnet-64x64x128", 64, 64, 128),
    ("resnet-32x32x256", 32, 32, 256),
    ("resnet-16x16x512", 16, 16, 512),
)
BATCHES = (1, 16)
HALF = {"cpu": "bf16", "gpu": "fp16"}


@dataclass(frozen=True)
class Geometry:
    """The FLOP and byte accounting of one conv case."""

    flops: int
    min_bytes: int
    ai: float  # FLOP/B with the filter counted
    ai_weights_cached: float  # the seed lectures' convention

    @classmethod
    def of(cls, spec: ConvSpec, precision: str) -> Geometry:
        """Account a conv pass (each pass has the same FLOPs and minimum bytes)."""
        ho, wo = flops.conv2d_output(
            spec.height, spec.width, spec.kernel, spec.kernel, spec.stride, spec.padding
        )
        args = (
            spec.batch,
            spec.height,
            spec.width,
            spec.cin,
            ho,
            wo,
            spec.cout,
            spec.kernel,
            spec.kernel,
            ITEMSIZE[precision],
        )
        count = flops.conv2d_flops(
            spec.batch, ho, wo, spec.cout, spec.cin, spec.kernel, spec.kernel
        )
        with_filter = flops.conv2d_bytes(*args)
        cached = flops.conv2d_bytes(*args, include_filter=False)
        return cls(count, with_filter, count / with_filter, count / cached)


def cases() -> list[Case]:
    """Every (target, precision, layer, batch, pass) the conv check runs."""
    out = []
    for target in backends.targets_for("conv2d"):
        for precision in ("fp32", HALF[target.device_kind]):
            for name, h, w, c in LAYERS:
                for batch in BATCHES:
                    for pass_ in CONV_PASSES:
                        spec = ConvSpec(batch, h, w, c, c)
                        out.append(
                            Case(
                                target,
                                precision,
                                f"{name}-n{batch}-{pass_}",
                                spec,
                                full_only=batch > 1,
                                extra={"pass": pass_, "layer": name},
                            )
                        )
    return out


def profiler_flops(spec: ConvSpec, precision: str, pass_: str) -> int | None:
    """TensorFlow's profiler count for the conv pass, or None without TensorFlow."""
    try:
        import tensorflow as tf
    except ImportError:
        return None
    dtype = {"bf16": tf.bfloat16, "fp16": tf.float16}.get(precision, tf.float32)
    ho, wo = flops.conv2d_output(
        spec.height, spec.width, spec.kernel, spec.kernel, spec.stride, spec.padding
    )
    x_shape = [spec.batch, spec.height, spec.width, spec.cin]
    w_shape = [spec.kernel, spec.kernel, spec.cin, spec.cout]
    y_shape = [spec.batch, ho, wo, spec.cout]
    strides = [1, spec.stride, spec.stride, 1]
    x, w, dy = (tf.TensorSpec(s, dtype) for s in (x_shape, w_shape, y_shape))
    if pass_ == "forward":
        return flops.profiler_count(lambda a, b: tf.nn.conv2d(a, b, strides, spec.padding), x, w)
    if pass_ == "input_grad":
        return flops.profiler_count(
            lambda b, g: tf.raw_ops.Conv2DBackpropInput(
                input_sizes=x_shape, filter=b, out_backprop=g, strides=strides, padding=spec.padding
            ),
            w,
            dy,
        )
    return flops.profiler_count(
        lambda a, g: tf.raw_ops.Conv2DBackpropFilter(
            input=a, filter_sizes=w_shape, out_backprop=g, strides=strides, padding=spec.padding
        ),
        x,
        dy,
    )


def workload(case: Case, profile: HardwareProfile) -> Workload:
    """Build the conv workload of one case."""
    spec: ConvSpec = case.spec
    pass_ = case.extra["pass"]
    backend = backends.get(case.target.backend)
    geometry = Geometry.of(spec, case.precision)
    kernel = backend.conv2d(case.target.device, spec, case.precision, pass_, SEED)

    what = f"conv2d {pass_} {spec.batch}x{spec.height}x{spec.width}x{spec.cin}->{spec.cout}"
    return Workload(
        check="conv_roofline",
        params={
            "backend": case.target.backend,
            "device": case.target.device,
            "precision": case.precision,
            "layer": case.extra["layer"],
            "batch": spec.batch,
            "pass": pass_,
        },
        metric="conv2d",
        unit="TFLOP/s",
        work=Work(geometry.flops, "FLOP", "2*N*Ho*Wo*Cout*Cin*Kh*Kw per call"),
        run=kernel.run,
        sync=kernel.sync,
        scale=1e12,
        reference=Reference(
            "roofline",
            FLOOR_FRACTION,
            case.target.device_kind,
            figures=(f"compute.{case.precision}_tflops", "memory.bandwidth_gbs"),
            combine=lambda peak, bw: roofline.bound_tflops(geometry.ai, peak, bw),
        ),
        context={
            "roofline": roofline.point(
                profile,
                case.precision,
                case.target.device_kind,
                geometry.flops,
                geometry.min_bytes,
                ai_weights_cached=geometry.ai_weights_cached,
            ),
            "backend_version": backend.version(),
            **kernel.describe(),
        },
        close=kernel.close,
        expectations=(
            flops.cross_check(geometry.flops, profiler_flops(spec, case.precision, pass_), what),
        ),
    )
