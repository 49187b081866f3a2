"""Which framework-free kernel moves with the frameworks' speed?  A probe, not a test.

On shared VMs, GEMMs and convolutions sometimes run at half speed for tens of seconds while
the machine probe (a register-only multiply-add loop and a one-thread triad, timed by thread
CPU time) stays flat.  This script samples, in a loop and in the same process, framework
work and candidate probe kernels side by side, each tagged with the time, and then says how
closely each candidate's log-rate follows each framework's (Pearson correlation, and how
far each candidate fell in the minutes the frameworks fell most):

* framework work: numpy fp32 GEMM (1024^3) and, when installed, a torch fp32 3x3 convolution;
* ``regs``: 12 chains of 4-wide FMAs in registers on every allowed CPU (today's probe);
* ``tile``: a register-blocked fp32 tile product whose operands live in L1/L2, on every CPU
  (the loads and FMAs a GEMM's inner kernel issues);
* ``triad1`` / ``triadN``: the DRAM triad on one thread / on every CPU;
* each timed by the thread CPU clock (``cpu``) and by the wall clock (``wall``).

    python lab/probe_track.py [--minutes 20] [--out track.jsonl]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import statistics
import threading
import time
from pathlib import Path

import numpy as np

from perfsuite.measure import native

SOURCE = r"""
#include <time.h>
static double now(int clock) {
    struct timespec t; clock_gettime(clock ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
typedef double v4 __attribute__((vector_size(32)));
typedef float v8 __attribute__((vector_size(32)));
/* out[0]: cpu seconds, out[1]: wall seconds, best of passes each. */
void regs(long steps, int passes, double *out, volatile double *sink) {
    out[0] = out[1] = 1e30;
    for (int p = 0; p < passes; p++) {
        v4 x[12];
        for (int k = 0; k < 12; k++) x[k] = (v4){1.0 + k, 1.1 + k, 1.2 + k, 1.3 + k};
        const v4 m = {0.9999999, 0.9999999, 0.9999999, 0.9999999};
        const v4 q = {1e-7, 1e-7, 1e-7, 1e-7};
        double c0 = now(0), w0 = now(1);
        for (long i = 0; i < steps; i++) {
            #pragma GCC unroll 12
            for (int k = 0; k < 12; k++) x[k] = x[k] * m + q;
        }
        double c = now(0) - c0, w = now(1) - w0;
        double s = 0;
        for (int k = 0; k < 12; k++) s += x[k][0];
        *sink = s;
        if (c < out[0]) out[0] = c;
        if (w < out[1]) out[1] = w;
    }
}
/* C[64x64] = A[64xK] B[Kx64], fp32, a row of C (8 vectors) held in registers. */
void tile(const float *A, const v8 *B, v8 *C, long K, long reps, int passes, double *out) {
    out[0] = out[1] = 1e30;
    for (int p = 0; p < passes; p++) {
        double c0 = now(0), w0 = now(1);
        for (long r = 0; r < reps; r++) {
            for (int i = 0; i < 64; i++) {
                v8 acc[8] = {0};
                for (long k = 0; k < K; k++) {
                    float a = A[i * K + k];
                    v8 av = {a, a, a, a, a, a, a, a};
                    #pragma GCC unroll 8
                    for (int j = 0; j < 8; j++) acc[j] += av * B[k * 8 + j];
                }
                for (int j = 0; j < 8; j++) C[i * 8 + j] = acc[j];
            }
        }
        double c = now(0) - c0, w = now(1) - w0;
        if (c < out[0]) out[0] = c;
        if (w < out[1]) out[1] = w;
    }
}
void triad(double *a, const double *b, const double *c, long n, int passes, double *out) {
    out[0] = out[1] = 1e30;
    for (int p = 0; p < passes; p++) {
        double c0 = now(0), w0 = now(1);
        for (long i = 0; i < n; i++) a[i] = b[i] + 0.5 * c[i];
        double ct = now(0) - c0, w = now(1) - w0;
        if (ct < out[0]) out[0] = ct;
        if (w < out[1]) out[1] = w;
    }
}
"""

PASSES = 5
K = 256
TILE_REPS = 24
REG_STEPS = 1 << 15
TRIAD_N = 8 * 2**20  # 3 x 64 MiB


class Kernels:
    """The candidate kernels with their buffers allocated once."""

    def __init__(self) -> None:
        lib, how = native.build("probe_track", SOURCE, ("-O2", "-march=native", "-shared", "-fPIC"))
        if lib is None:
            raise SystemExit(how)
        self.lib = lib
        self.cpus = sorted(os.sched_getaffinity(0))
        rng = np.random.default_rng(3)
        n = len(self.cpus)
        self.A = [rng.random(64 * K, dtype=np.float32) for _ in range(n)]
        self.B = [rng.random(K * 64, dtype=np.float32) for _ in range(n)]
        self.C = [np.zeros(64 * 64, dtype=np.float32) for _ in range(n)]
        self.a = np.zeros(TRIAD_N)
        self.b = rng.random(TRIAD_N)
        self.c = rng.random(TRIAD_N)
        self.out = np.zeros((n, 2))
        self.sink = np.zeros(n)

    def _ptr(self, x: np.ndarray) -> ctypes.c_void_p:
        return ctypes.c_void_p(x.ctypes.data)

    def _all(self, call) -> list[tuple[float, float]]:
        def one(i: int) -> None:
            os.sched_setaffinity(0, {self.cpus[i]})
            call(i)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(self.cpus))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return [(float(c), float(w)) for c, w in self.out]

    def regs(self) -> dict[str, float]:
        flops = 8 * 12 * REG_STEPS
        res = self._all(
            lambda i: self.lib.regs(
                ctypes.c_long(REG_STEPS), PASSES, self._ptr(self.out[i]), self._ptr(self.sink[i:])
            )
        )
        return {
            "regs_cpu": flops / max(c for c, _ in res) / 1e9,
            "regs_wall": flops / max(w for _, w in res) / 1e9,
        }

    def tile(self) -> dict[str, float]:
        flops = 2 * 64 * 64 * K * TILE_REPS
        res = self._all(
            lambda i: self.lib.tile(
                self._ptr(self.A[i]),
                self._ptr(self.B[i]),
                self._ptr(self.C[i]),
                ctypes.c_long(K),
                ctypes.c_long(TILE_REPS),
                PASSES,
                self._ptr(self.out[i]),
            )
        )
        return {
            "tile_cpu": flops / max(c for c, _ in res) / 1e9,
            "tile_wall": flops / max(w for _, w in res) / 1e9,
        }

    def triad(self) -> dict[str, float]:
        n = len(self.cpus)
        chunk = TRIAD_N // n
        total = 24 * chunk * n / 1e9
        res = self._all(
            lambda i: self.lib.triad(
                self._ptr(self.a[i * chunk :]),
                self._ptr(self.b[i * chunk :]),
                self._ptr(self.c[i * chunk :]),
                ctypes.c_long(chunk),
                2,
                self._ptr(self.out[i]),
            )
        )
        self.lib.triad(
            self._ptr(self.a),
            self._ptr(self.b),
            self._ptr(self.c),
            ctypes.c_long(TRIAD_N),
            2,
            self._ptr(self.out[0]),
        )
        one_c, one_w = self.out[0]
        return {
            "triadN_cpu": total / max(c for c, _ in res),
            "triadN_wall": total / max(w for _, w in res),
            "triad1_cpu": 24 * TRIAD_N / 1e9 / one_c,
            "triad1_wall": 24 * TRIAD_N / 1e9 / one_w,
        }


def framework_work() -> dict[str, object]:
    """Steps of framework work, each with its FLOPs, buffers allocated once."""
    rng = np.random.default_rng(5)
    x = rng.random((1024, 1024), dtype=np.float32)
    y = rng.random((1024, 1024), dtype=np.float32)
    z = np.empty((1024, 1024), dtype=np.float32)
    work: dict[str, object] = {"numpy_gemm": (lambda: np.matmul(x, y, out=z), 2 * 1024**3)}
    try:
        import torch
    except ImportError:
        return work
    inp = torch.randn(1, 256, 32, 32)
    conv = torch.nn.Conv2d(256, 256, 3, padding=1, bias=False)
    with torch.no_grad():
        conv(inp)
    work["torch_conv"] = (lambda: conv(inp), 2 * 256 * 256 * 9 * 32 * 32)
    return work


def sample(kernels: Kernels, work: dict[str, object]) -> dict[str, float]:
    row: dict[str, float] = {"t": time.time()}
    import contextlib

    with contextlib.suppress(ImportError):
        import torch

        torch.set_grad_enabled(False)
    for name, (step, flops) in work.items():  # type: ignore[misc]
        step()
        times = []
        for _ in range(3):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        row[name] = flops / statistics.median(times) / 1e9
    row.update(kernels.regs())
    row.update(kernels.tile())
    row.update(kernels.triad())
    return row


def summarise(rows: list[dict[str, float]]) -> None:
    keys = [k for k in rows[0] if k != "t"]
    logs = {k: np.log([r[k] for r in rows]) for k in keys}
    targets = [k for k in ("numpy_gemm", "torch_conv") if k in logs]
    candidates = [k for k in keys if k not in targets]
    print(f"{len(rows)} samples over {(rows[-1]['t'] - rows[0]['t']) / 60:.1f} min")
    for k in keys:
        v = np.exp(logs[k] - np.median(logs[k]))
        print(f"  {k:12s} median {math.exp(np.median(logs[k])):8.2f}  min/median {v.min():.2f}")
    for target in targets:
        slow = logs[target] < np.median(logs[target]) + math.log(0.85)
        print(f"{target}: {int(slow.sum())} samples below 0.85 of its median")
        for c in candidates:
            r = float(np.corrcoef(logs[target], logs[c])[0, 1])
            fell = math.exp(np.median(logs[c][slow]) - np.median(logs[c])) if slow.any() else 1.0
            print(f"  {c:12s} corr {r:+.2f}   in those samples: {fell:.2f} of its median")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--out", type=Path, default=Path("probe_track.jsonl"))
    parser.add_argument("--summarise", action="store_true", help="only read --out")
    args = parser.parse_args()
    if not args.summarise:
        kernels = Kernels()
        work = framework_work()
        end = time.time() + 60 * args.minutes
        with args.out.open("a") as f:
            while time.time() < end:
                f.write(json.dumps(sample(kernels, work)) + "\n")
                f.flush()
    rows = [json.loads(line) for line in args.out.read_text().splitlines() if line.strip()]
    summarise(rows)


if __name__ == "__main__":
    main()
