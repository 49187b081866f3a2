"""Bare references: the same operation written directly, measured in the same process.

A check's number should be the machine's, not the harness's.  Each bandwidth and GEMM
check measures a bare reference right before it and records it; the run record's
``fidelity`` section is the check's best over the reference's best.

* numpy STREAM: the four STREAM kernels in C with OpenMP, compiled when the session first
  needs them (``cc -O3 -march=native -fopenmp``), run on the check's own arrays through
  ctypes.  No compiler: the fidelity is "no-reference", never a failure.
* numpy GEMM: ``np.matmul(a, b, out=c)`` in a plain loop.
* TensorFlow STREAM: an XLA-compiled function that updates a ``tf.Variable`` in place (no
  output allocated per call); TensorFlow GEMM: ``tf.linalg.matmul`` in a plain loop.

Each reference is timed as the checks are: warmed up, then 5 samples of at least 0.1 s
each, the best one kept.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from perfsuite import native

SAMPLES = 5
SAMPLE_SECONDS = 0.1
WARMUP_SECONDS = 0.3
STREAM_KINDS = {"copy": 0, "scale": 1, "add": 2, "triad": 3}

C_STREAM = r"""
#include <time.h>
#include <omp.h>
static double now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9;
}
/* Best seconds of `reps` passes of one STREAM kernel over n doubles. */
double stream_best(int kind, double *a, double *b, double *c, long n, double q, int reps,
                   int threads) {
    double best = 1e30;
    omp_set_num_threads(threads);
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        switch (kind) {
        case 0:
            #pragma omp parallel for simd schedule(static)
            for (long i = 0; i < n; i++) c[i] = a[i];
            break;
        case 1:
            #pragma omp parallel for simd schedule(static)
            for (long i = 0; i < n; i++) b[i] = q * c[i];
            break;
        case 2:
            #pragma omp parallel for simd schedule(static)
            for (long i = 0; i < n; i++) c[i] = a[i] + b[i];
            break;
        default:
            #pragma omp parallel for simd schedule(static)
            for (long i = 0; i < n; i++) a[i] = b[i] + q * c[i];
        }
        double t = now() - t0;
        if (t < best) best = t;
    }
    return best;
}
"""


UNIT_SCALE = {"GB/s": 1e9, "TFLOP/s": 1e12}


def bare_loop(
    what: str,
    step: Callable[[], Any],
    work: float,
    unit: str,
    sync: Callable[[], Any] = lambda: None,
) -> dict[str, Any]:
    """A bare reference's entry: what it runs, and ``step``'s best rate in ``unit``."""
    return {"what": what, "value": best_rate(step, work, sync) / UNIT_SCALE[unit], "unit": unit}


def same_call(what: str, kernels: Any, kernel: str, counted_bytes: int) -> dict[str, Any]:
    """The check's own STREAM ``kernel`` call on its own arrays, in a bare loop, in GB/s."""
    return bare_loop(what, getattr(kernels, kernel), counted_bytes, "GB/s", kernels.sync)


def best_rate(
    step: Callable[[], Any], work: float, sync: Callable[[], Any] = lambda: None
) -> float:
    """Work per second of the best of 5 samples of at least 0.1 s each, after a warm-up.

    The warm-up runs at least 2 calls and 0.3 s: the first reference of a session otherwise
    pays for the library's start-up (oneDNN's primitive cache, thread pools) that the check
    after it no longer does.
    """
    start, warmed = time.perf_counter(), 0
    while warmed < 2 or time.perf_counter() - start < WARMUP_SECONDS:
        step()
        sync()
        warmed += 1
    start = time.perf_counter()
    step()
    sync()
    once = max(time.perf_counter() - start, 1e-9)
    calls = max(1, int(SAMPLE_SECONDS / once))
    best = float("inf")
    for _ in range(SAMPLES):
        start = time.perf_counter()
        for _ in range(calls):
            step()
        sync()
        best = min(best, (time.perf_counter() - start) / calls)
    return work / best


def _c_stream() -> tuple[Any, str] | tuple[None, str]:
    """The compiled C STREAM library and how it was built, or None and why not."""
    flags = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC")
    lib, how = native.build("stream", C_STREAM, flags)
    if lib is None:
        return None, how.replace("build stream", "build the C STREAM reference")
    lib.stream_best.restype = ctypes.c_double
    pointer = ctypes.POINTER(ctypes.c_double)
    lib.stream_best.argtypes = [
        ctypes.c_int, pointer, pointer, pointer, ctypes.c_long, ctypes.c_double,
        ctypes.c_int, ctypes.c_int,
    ]  # fmt: skip
    return lib, f"C STREAM ({how})"


def c_stream_gbs(
    kernel: str,
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray,
    scalar: float,
    threads: int,
    counted_bytes: int,
) -> dict[str, Any]:
    """The C kernel on these arrays: GB/s of ``counted_bytes`` per pass, best of 10; or why not."""
    lib, how = _c_stream()
    if lib is None:
        return {"what": "C STREAM", "unavailable": how}
    pointer = ctypes.POINTER(ctypes.c_double)
    args = [x.ctypes.data_as(pointer) for x in (a, b, c)]
    lib.stream_best(STREAM_KINDS[kernel], *args, a.size, scalar, 2, threads)  # warm-up
    best = lib.stream_best(STREAM_KINDS[kernel], *args, a.size, scalar, 10, threads)
    return {
        "what": f"{how}, {threads} OpenMP threads, best of 10, on the check's arrays",
        "value": counted_bytes / best / 1e9,
        "unit": "GB/s",
    }
