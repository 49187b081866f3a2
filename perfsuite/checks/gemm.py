"""GEMM peak: matmul FLOP/s per precision, on large squares and DeepBench training shapes.

FLOPs = 2*M*N*K for C[M,N] = A[M,K] x B[K,N]; random normal inputs; the device is
synchronised before every clock read; TFLOP/s are decimal (1e12).  fp32 is measured with
TF32 off and tf32 with it on, each set explicitly.  The floor is the best repetition
against the profile's peak for that precision x ``FLOOR_FRACTION``, on the large squares
only: they are the peak measurement.  The DeepBench shapes are skinny (N of 64 or 128) or
unaligned (N = 9124 is no multiple of 8, which tensor cores want); no fixed fraction of the
peak says what a healthy device reaches on them (on an H200: 15-27% of the bf16 peak), so
they are judged against their baseline only, and their roofline point is recorded.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfsuite import backends
from perfsuite.checks import flops, roofline
from perfsuite.checks.cases import Case
from perfsuite.hardware.profile import HardwareProfile
from perfsuite.measure.workload import Reference, Workload
from perfsuite.model import Work

# Large bf16 GEMMs reach 80-87% of the dense peak on good hardware; DCGM-style floors sit
# at ~0.75x of what good hardware reaches: 0.75 x 0.8 = 0.6.
FLOOR_FRACTION = 0.6
SEED = 1760


@dataclass(frozen=True)
class Shape:
    """A GEMM shape, M x N x K."""

    m: int
    n: int
    k: int

    def __str__(self) -> str:
        """M x N x K."""
        return f"{self.m}x{self.n}x{self.k}"


# DeepBench training GEMMs (M x N x K) named in the issue, on every device.
DEEPBENCH = (Shape(1760, 128, 1760), Shape(7860, 64, 2560), Shape(5124, 9124, 2560))
SQUARES = {"cpu": (2048, 4096), "gpu": (8192, 16384)}
# The largest shapes take seconds per repetition on a CPU: full mode (--perf-full) only.
FULL_ONLY = {Shape(4096, 4096, 4096), Shape(16384, 16384, 16384), Shape(5124, 9124, 2560)}


def cases() -> list[Case]:
    """Every (target, precision, shape) the GEMM check runs."""
    out = []
    for target in backends.targets_for("matmul"):
        kind = target.device_kind
        shapes = [Shape(s, s, s) for s in SQUARES[kind]] + list(DEEPBENCH)
        for precision in backends.precisions_for(kind):
            for shape in shapes:
                sweep = shape != shapes[0]  # quick mode: the smaller square only
                out.append(Case(target, precision, str(shape), shape, shape in FULL_ONLY, sweep))
    return out


def shape_reason(case: Case) -> str | None:
    """Why the case's backend cannot multiply its shape in its precision, or None."""
    shape: Shape = case.spec
    backend = backends.get(case.target.backend)
    return backend.matmul_shape_reason(shape.m, shape.n, shape.k, case.precision)


def workload(case: Case, profile: HardwareProfile) -> Workload:
    """Build the GEMM workload of one case."""
    shape: Shape = case.spec
    backend = backends.get(case.target.backend)
    kernel = backend.matmul(case.target.device, shape.m, shape.n, shape.k, case.precision, SEED)
    analytic = flops.matmul_flops(shape.m, shape.n, shape.k)
    inputs = backends.PRECISION[case.precision]
    output = backends.output_precision(case.precision)
    bare = backend.matmul_reference(kernel, analytic)  # sampled beside the check: fidelity
    square = shape.m == shape.n == shape.k  # a peak shape: judged against the floor too
    # The running framework's own FLOP counter cross-checks the count, where it has one.
    counted = backend.matmul_counted_flops(shape.m, shape.n, shape.k, case.precision)

    return Workload(
        check="gemm",
        params={
            "backend": case.target.backend,
            "device": case.target.device,
            "precision": case.precision,
            "m": shape.m,
            "n": shape.n,
            "k": shape.k,
        },
        metric="matmul",
        unit="TFLOP/s",
        work=Work(analytic, "FLOP", "2*M*N*K per call"),
        run=kernel.run,
        sync=kernel.sync,
        scale=1e12,
        reference=(
            Reference(f"compute.{case.precision}_tflops", FLOOR_FRACTION, case.target.device_kind)
            if square
            else None
        ),
        floor_note=""
        if square
        else "a DeepBench shape: judged against its baseline (the floor is for the squares)",
        context={
            # Minimum bytes: read A and B, write C once (fp8 GEMMs write bf16).
            "roofline": roofline.point(
                profile,
                case.precision,
                case.target.device_kind,
                analytic,
                (shape.m * shape.k + shape.k * shape.n) * inputs.itemsize
                + shape.m * shape.n * output.itemsize,
            ),
            "backend_version": backend.version(),
            **kernel.describe(),
        },
        close=kernel.close,
        source=backend.timer(case.target.device),
        capture=backend.capture(case.target.device),
        bare=bare,
        expectations=(flops.cross_check(analytic, counted, f"matmul {shape}", backend.profiler),),
    )
