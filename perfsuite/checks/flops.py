"""FLOP and byte accounting, derived from shapes; framework-neutral.

Conventions (the ones DeepBench, cuDNN papers and the roofline literature use):

* GEMM C[M,N] = A[M,K] x B[K,N]: 2*M*N*K FLOPs (a multiply and an add per term).
* conv2d, each of forward, input gradient and filter gradient:
  2*N*Hout*Wout*Cout*Cin*Kh*Kw FLOPs.
* Where the backend running the check has a FLOP counter of its own (TensorFlow's profiler,
  torch's ``FlopCounterMode``), the analytic count is cross-checked against it.
* conv2d minimum bytes: input + output (+ filter) elements x dtype size; the seed lectures'
  arithmetic intensity treats the weights as cached (input + output only).
"""

from __future__ import annotations

import math

from perfsuite.measure.workload import Expectation

MISMATCH_TOLERANCE = 0.01


def matmul_flops(m: int, n: int, k: int) -> int:
    """2*M*N*K."""
    return 2 * m * n * k


def conv2d_output(h: int, w: int, kh: int, kw: int, stride: int, padding: str) -> tuple[int, int]:
    """Output height and width of a conv2d with TensorFlow's SAME/VALID padding."""
    if padding == "SAME":
        return math.ceil(h / stride), math.ceil(w / stride)
    return (h - kh) // stride + 1, (w - kw) // stride + 1


def conv2d_flops(n: int, ho: int, wo: int, cout: int, cin: int, kh: int, kw: int) -> int:
    """2*N*Hout*Wout*Cout*Cin*Kh*Kw, for the forward pass and for each gradient."""
    return 2 * n * ho * wo * cout * cin * kh * kw


def conv2d_bytes(
    n: int,
    h: int,
    w: int,
    cin: int,
    ho: int,
    wo: int,
    cout: int,
    kh: int,
    kw: int,
    itemsize: int,
    *,
    include_filter: bool = True,
) -> int:
    """Minimum bytes a conv2d must move: input + output (+ filter)."""
    elements = n * h * w * cin + n * ho * wo * cout
    if include_filter:
        elements += kh * kw * cin * cout
    return elements * itemsize


def cross_check(
    analytic: int, counted: int | None, what: str, profiler: str = "the framework's profiler"
) -> Expectation:
    """Expect the profiler's count within 1% of the analytic one."""
    if counted is None:
        return Expectation(
            "flop count",
            True,
            f"{what}: not cross-checked (this backend has no FLOP counter of its own)",
        )
    ratio = counted / analytic if analytic else math.inf
    ok = abs(ratio - 1) <= MISMATCH_TOLERANCE
    detail = (
        f"{what}: analytic {analytic:,} FLOPs, {profiler} {counted:,} "
        f"(ratio {ratio:.4f}{'' if ok else f', beyond {MISMATCH_TOLERANCE:.0%}'})"
    )
    return Expectation("flop count", ok, detail)
