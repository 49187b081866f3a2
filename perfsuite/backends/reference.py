"""Bare references: the same operation written directly, measured beside the check.

A check's number should be the machine's, not the harness's.  Each bandwidth, GEMM and
convolution check names a bare reference (:class:`perfsuite.measure.loop.Bare`), which
:func:`perfsuite.measure.loop.measure` warms up and calibrates as it does the check, then samples
one sample right before each of the check's: each pair sees the same moment of the machine,
and the record's ``fidelity`` is the median of the pairs' ratios (check over reference).

* numpy STREAM: the four STREAM kernels in C, compiled when the session first needs them
  (``cc -O3 -march=native``), as many POSIX threads as the check has, each on one
  contiguous chunk (not pinned; the check's threads are), joined before the call returns
  (an OpenMP team would go on spinning on the CPUs the check runs on next), run on the
  check's own arrays through ctypes.  No compiler: the fidelity is
  "no-reference", never a failure.
* numpy GEMM: ``np.matmul(a, b, out=c)`` in a plain loop.
* torch and TensorFlow STREAM: the check's own call in a bare loop; GEMM and convolutions:
  the framework's public function in a plain loop.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from perfsuite.measure import native
from perfsuite.measure.loop import Bare

STREAM_KINDS = {"copy": 0, "scale": 1, "add": 2, "triad": 3}

C_STREAM = r"""
#include <pthread.h>
typedef struct {
    int kind; double *restrict a, *restrict b, *restrict c; long lo, hi; double q;
} part;
static void *run(void *arg) {
    part *p = arg;
    double *restrict a = p->a, *restrict b = p->b, *restrict c = p->c;
    double q = p->q;
    switch (p->kind) {
    case 0: for (long i = p->lo; i < p->hi; i++) c[i] = a[i]; break;
    case 1: for (long i = p->lo; i < p->hi; i++) b[i] = q * c[i]; break;
    case 2: for (long i = p->lo; i < p->hi; i++) c[i] = a[i] + b[i]; break;
    default: for (long i = p->lo; i < p->hi; i++) a[i] = b[i] + q * c[i];
    }
    return 0;
}
/* One pass of one STREAM kernel over n doubles, in `threads` contiguous chunks, chunk 0 on
   the calling thread; every thread is joined before it returns. 0, or -1 if a thread could
   not start. */
int stream_pass(int kind, double *a, double *b, double *c, long n, double q, int threads) {
    enum { MAX = 1024 };
    pthread_t tid[MAX];
    part parts[MAX];
    if (threads < 1) threads = 1;
    if (threads > MAX) threads = MAX;
    for (int t = 0; t < threads; t++) {
        part p = {kind, a, b, c, n * t / threads, n * (t + 1) / threads, q};
        parts[t] = p;
    }
    int started = 1, failed = 0;
    for (; started < threads; started++)
        if (pthread_create(&tid[started], 0, run, &parts[started])) { failed = 1; break; }
    run(&parts[0]);
    for (int t = 1; t < started; t++) pthread_join(tid[t], 0);
    if (failed) for (int t = started; t < threads; t++) run(&parts[t]);
    return failed ? -1 : 0;
}
"""


UNIT_SCALE = {"GB/s": 1e9, "TFLOP/s": 1e12}


def bare_loop(
    what: str,
    step: Callable[[], Any],
    work: float,
    unit: str,
    sync: Callable[[], Any] = lambda: None,
) -> Bare:
    """A bare reference that calls ``step`` (``work`` per call) in a plain loop, in ``unit``."""
    if unit not in UNIT_SCALE:
        raise ValueError(f"a bare reference is a rate in {' or '.join(UNIT_SCALE)}, not {unit!r}")
    return Bare(what, step, work, unit, UNIT_SCALE[unit], sync)


def same_call(what: str, kernels: Any, kernel: str, counted_bytes: int) -> Bare:
    """The check's own STREAM ``kernel`` call on its own arrays, in a bare loop, in GB/s."""
    return bare_loop(what, getattr(kernels, kernel), counted_bytes, "GB/s", kernels.sync)


def c_stream_library() -> tuple[Any, str] | tuple[None, str]:
    """The compiled C STREAM library and how it was built, or None and why not.

    ``-fno-tree-loop-distribute-patterns`` keeps copy a loop of loads and stores, as STREAM
    writes it, rather than a call to the C library's ``memcpy`` (whose instructions for large
    copies depend on the CPU and the library).
    """
    flags = (
        "-O3", "-march=native", "-fno-tree-loop-distribute-patterns", "-pthread", "-shared",
        "-fPIC",
    )  # fmt: skip
    lib, how = native.build("stream_pthread", C_STREAM, flags)
    if lib is None:
        return None, how.replace("build stream_pthread", "build the C STREAM reference")
    lib.stream_pass.restype = ctypes.c_int
    pointer = ctypes.POINTER(ctypes.c_double)
    lib.stream_pass.argtypes = [
        ctypes.c_int, pointer, pointer, pointer, ctypes.c_long, ctypes.c_double, ctypes.c_int,
    ]  # fmt: skip
    return lib, f"C STREAM ({how})"


def c_stream(kernel: str, arrays: Any, scalar: float, threads: int, counted_bytes: int) -> Bare:
    """STREAM's ``kernel`` in C on ``arrays``' a, b and c, ``threads`` POSIX threads; or why none.

    The arrays are read at each call, so closing their owner frees them.
    """
    lib, how = c_stream_library()
    if lib is None:
        return Bare("C STREAM", unavailable=how)
    pointer = ctypes.POINTER(ctypes.c_double)
    kind = STREAM_KINDS[kernel]

    def step() -> None:
        a, b, c = (np.asarray(getattr(arrays, name)) for name in "abc")
        ptrs = (x.ctypes.data_as(pointer) for x in (a, b, c))
        if lib.stream_pass(kind, *ptrs, a.size, scalar, threads) != 0:
            raise RuntimeError("the C STREAM reference could not start its threads")

    return bare_loop(
        f"{how}, {threads} threads, on the check's arrays", step, counted_bytes, "GB/s"
    )
