"""Conv arithmetic intensity and roofline attainment.

For each case: analytic FLOPs (2*N*Hout*Wout*Cout*Cin*Kh*Kw per pass), minimum bytes
(input + output + filter), the arithmetic intensity (AI), the roofline bound
min(peak FLOP/s, AI x peak bandwidth) from the profile, achieved FLOP/s, and attainment =
achieved / bound.  The seed lectures' AI treats the weights as cached (input + output only):
for the 3x3 seed layer 128x128x16 -> 16 in fp32 that is 36 FLOP/B, and for the ResNet-50 3x3
layers with Cin = Cout = C it is 9*C/4: 144, 288, 576 and 1152 FLOP/B.  Both are recorded;
the bound uses the stricter one with the filter.  The floor applies to attainment, for the
layers that can fill a device: batch >= ``FLOOR_MIN_BATCH`` and >= ``FLOOR_MIN_CHANNELS``
input channels.  On an H200 the batch-1 ResNet layers reached 0.07-0.18 of their bound in
fp16 (too little work to fill 132 SMs at the tensor-core rate) and 0.17-0.76 in fp32, and
the 16-channel seed layer 0.01-0.18 at either batch (too few channels for tensor cores),
while the batch-16 ResNet layers reached 0.36-1.84; the others are judged against their
baseline, and their roofline point is recorded.

Analytic FLOPs count a direct convolution.  Libraries may use Winograd or FFT algorithms
that execute fewer FLOPs, so attainment above 1 is possible and means just that.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfsuite import backends
from perfsuite.backends import CONV_PASSES, ConvSpec
from perfsuite.checks import flops, roofline
from perfsuite.checks.cases import Case
from perfsuite.hardware.profile import HardwareProfile
from perfsuite.measure.workload import Reference, Workload
from perfsuite.model import Work

# A conservative floor: well-tuned 3x3 layers reach 40-70% of their roofline bound;
# 0.75 x 0.4 = 0.3.
FLOOR_FRACTION = 0.3
FLOOR_MIN_BATCH = 16
FLOOR_MIN_CHANNELS = 64
SEED = 128
# (name, H, W, C): the seed example has 16 channels; then the ResNet-50 3x3 layers.
LAYERS = (
    ("seed-128x128x16", 128, 128, 16),
    ("resnet-128x128x64", 128, 128, 64),
    ("resnet-64x64x128", 64, 64, 128),
    ("resnet-32x32x256", 32, 32, 256),
    ("resnet-16x16x512", 16, 16, 512),
)
BATCHES = (1, 16)
# The default mode runs one layer per regime, every pass, precision and backend; quick mode
# the forward pass of those layers.
# The seed layer (16 channels, far below the ridge) and a ResNet layer at the
# ridge and above; the other ResNet layers, and batch 16, run in full mode (--perf-full).
QUICK_LAYERS = ("seed-128x128x16", "resnet-32x32x256")
QUICK_PASS = "forward"  # quick mode: each regime's layer, forward only
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
            backends.PRECISION[precision].itemsize,
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
                                full_only=batch > 1 or name not in QUICK_LAYERS,
                                sweep=pass_ != QUICK_PASS,
                                extra={"pass": pass_, "layer": name},
                            )
                        )
    return out


def floor_note(spec: ConvSpec) -> str:
    """Why a layer gets no floor (too small to fill a device), or "" where it gets one."""
    if spec.batch < FLOOR_MIN_BATCH:
        return f"batch {spec.batch} < {FLOOR_MIN_BATCH}: judged against its baseline only"
    if spec.cin < FLOOR_MIN_CHANNELS:
        return f"{spec.cin} input channels < {FLOOR_MIN_CHANNELS}: judged against its baseline only"
    return ""


def workload(case: Case, profile: HardwareProfile) -> Workload:
    """Build the conv workload of one case."""
    spec: ConvSpec = case.spec
    pass_ = case.extra["pass"]
    backend = backends.get(case.target.backend)
    geometry = Geometry.of(spec, case.precision)
    kernel = backend.conv2d(case.target.device, spec, case.precision, pass_, SEED)
    bare = backend.conv2d_reference(kernel, geometry.flops)  # sampled beside the check: fidelity
    no_floor = floor_note(spec)

    what = f"conv2d {pass_} {spec.batch}x{spec.height}x{spec.width}x{spec.cin}->{spec.cout}"
    roof = Reference(
        "roofline",
        FLOOR_FRACTION,
        case.target.device_kind,
        figures=(f"compute.{case.precision}_tflops", "memory.bandwidth_gbs"),
        combine=lambda peak, bw: roofline.bound_tflops(geometry.ai, peak, bw),
    )
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
        reference=roof if not no_floor else None,
        floor_note=no_floor,
        ceiling=roof if no_floor else None,  # the roofline bounds it still
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
        source=backend.timer(case.target.device),
        capture=backend.capture(case.target.device),
        bare=bare,
        expectations=(
            flops.cross_check(
                geometry.flops,
                backend.conv2d_counted_flops(spec, case.precision, pass_),
                what,
                backend.profiler,
            ),
        ),
    )
