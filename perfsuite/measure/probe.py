"""The machine probe: how fast this host is right now, measured without any framework.

A shared VM's speed drifts: for minutes at a time the same code runs 20-35% slower, with no
steal time or foreign process to show for it (its neighbours share the memory and the
caches).  Such a spell, during a rerun or during one of the baseline runs, looks to a check
exactly like a regression in the stack.  The probe tells the two apart: right before and
right after each CPU check, it runs three short kernels that no framework is part of (the
check's reading is the faster of the two for each rate):

* **memory**: one thread's STREAM triad (``a = b + q*c``) over arrays four times the
  last-level cache (64 MiB at least), best of 5 passes, in GB/s.  (The same triad on every
  CPU at once swung 0.7-1.08 of its median within seconds on a 2-core VM, three times as
  widely as one thread's, and adjusting by it added noise instead of removing it.)
* **cache**: the same triad over arrays that fill half the last-level cache, on every online
  CPU at once (one thread pinned to each, started together), repeated for about 4 ms per
  pass, best of 5; the rate is set by the slowest CPU, in GB/s: what a GEMM's or a
  convolution's blocked loads depend on, and what a neighbour thrashing the shared cache
  takes away;
* **compute**: 12 independent chains of 4-wide vector multiply-adds in registers on every
  online CPU at once, best of 5 passes, in GFLOP/s (recorded, not used for judging: it stayed
  flat while GEMMs and convolutions ran at half speed).
* **link** (where there are two CPUs and a compiler): a cache line handed back and forth
  between the first and the last online CPU, best of 7 passes, in millions of one-way
  handoffs per second.  A hypervisor moves virtual CPUs between physical cores: two that
  share a cache and two on different chiplets differ about 4x here, and collectives between
  ranks on this host follow the state, not proportionally (MPI's 64 KiB allreduce 2x, its
  1 MiB allreduce 3.6x on a 2-core AMD EPYC VM).  So a check whose ranks talk across CPUs
  is compared only with the baseline runs measured in the same link state (like with
  like), and is noisy when there is none or the state changed while it ran.

They are timed with each thread's CPU clock, so time-sharing a core with a sibling
(pytest-xdist workers) does not read as a slow machine, while contention for memory,
caches, vector units or the core's clock does.  The threads pin to every *online* CPU that
the process's cpuset allows, not only those it may run on, so a run restricted to fewer cores
(``taskset``) reads the same machine as an unrestricted one: fewer cores is a change of the
node, which the checks must show.  The kernels are C, compiled on first use (``-O2
-march=native``); without a compiler they are numpy's ``add``/``multiply`` and a Python loop
on one thread (the record names which, and how many CPUs; rates from different sources are
never compared).

How a check is judged per unit of machine speed, from these readings, is in
:mod:`perfsuite.judge.speed`.
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from perfsuite.measure import native
from perfsuite.measure.readings import HANDOFFS as HANDOFFS
from perfsuite.measure.readings import LINK as LINK
from perfsuite.measure.readings import MEMORY_LINKS as MEMORY_LINKS

PASSES = 5
MIN_BYTES = 64 * 2**20
MAX_BYTES = 512 * 2**20
COMPUTE_SECONDS = 0.004  # per pass
COMPONENTS = ("memory", "cache", "compute")
# Read where the machine allows (two CPUs and a compiler), recorded beside the components:
# ``LINK`` (see :mod:`perfsuite.measure.readings`).
LINK_ROUNDS = 2000
LINK_PASSES = 7
LINK_ON_CPU = 0.9  # a pass counts when both sides ran at least this share of it on their CPU
LINK_LIMIT_S = 1.0  # a side that waits longer than this gives up
CACHE_MIN_N = 16 * 1024

C_PROBE = r"""
#include <time.h>
static double cpu_now(void) {
    struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
/* Best thread-CPU seconds of `passes` passes of `reps` triads a = b + q*c over n doubles. */
double probe_memory(double *a, const double *b, const double *c, long n, long reps, int passes) {
    double best = 1e30;
    for (int p = 0; p < passes; p++) {
        double t0 = cpu_now();
        for (long r = 0; r < reps; r++) {
            for (long i = 0; i < n; i++) a[i] = b[i] + 0.5 * c[i];
            __asm__ volatile("" ::: "memory");  /* keep every repetition */
        }
        double t = cpu_now() - t0;
        if (t < best) best = t;
    }
    return best;
}
/* Best thread-CPU seconds of `passes` runs of `steps` steps of 12 independent chains of
   4-wide multiply-adds: enough independent work to keep the core's vector FMA units busy,
   so a neighbour sharing them (an SMT sibling) slows it as it slows a GEMM. */
typedef double v4 __attribute__((vector_size(32)));
double probe_compute(long steps, int passes, volatile double *sink) {
    double best = 1e30;
    for (int p = 0; p < passes; p++) {
        v4 x[12];
        for (int k = 0; k < 12; k++) x[k] = (v4){1.0 + k, 1.1 + k, 1.2 + k, 1.3 + k};
        const v4 m = {0.9999999, 0.9999999, 0.9999999, 0.9999999};
        const v4 q = {1e-7, 1e-7, 1e-7, 1e-7};
        double t0 = cpu_now();
        for (long i = 0; i < steps; i++) {
            #pragma GCC unroll 12
            for (int k = 0; k < 12; k++) x[k] = x[k] * m + q;
        }
        double t = cpu_now() - t0;
        double s = 0;
        for (int k = 0; k < 12; k++) s += x[k][0] + x[k][1] + x[k][2] + x[k][3];
        *sink = s;
        if (t < best) best = t;
    }
    return best;
}
/* One side of a cache-line ping-pong between two CPUs, `passes` passes of `rounds` round
   trips; side 0 starts each round trip, side 1 answers.  Both sides run at once, each pinned
   to its CPU, and write each pass's wall and thread-CPU seconds into `wall` and `cpu`: a
   pass in which either side was off its CPU (time-shared) is told by its CPU time falling
   short of its wall time.  A wait longer than `limit` seconds gives up: returns -1, after
   which the other side gives up too. */
#include <stdatomic.h>
static double wall_now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
static int wait_for(_Atomic long *flag, long value, double deadline) {
    for (long spins = 1;; spins++) {
        if (atomic_load_explicit(flag, memory_order_acquire) == value) return 0;
        if ((spins & 0xffff) == 0 && wall_now() > deadline) return -1;
    }
}
int probe_link(_Atomic long *flag, int side, long rounds, int passes, double limit,
               double *wall, double *cpu) {
    for (int p = 0; p < passes; p++) {
        long base = (long)p * 2 * rounds;
        double w0 = wall_now(), c0 = cpu_now(), deadline = w0 + limit;
        for (long i = 0; i < rounds; i++) {
            if (side == 0) {
                atomic_store_explicit(flag, base + 2 * i + 1, memory_order_release);
                if (wait_for(flag, base + 2 * i + 2, deadline)) return -1;
            } else {
                if (wait_for(flag, base + 2 * i + 1, deadline)) return -1;
                atomic_store_explicit(flag, base + 2 * i + 2, memory_order_release);
            }
        }
        wall[p] = wall_now() - w0;
        cpu[p] = cpu_now() - c0;
    }
    return 0;
}
"""


class Probe:
    """The probe kernels, with their buffers allocated once."""

    def __init__(self, llc_bytes: int | None) -> None:
        """Allocate and touch the triad arrays (4x the last-level cache, within bounds)."""
        total = min(MAX_BYTES, max(MIN_BYTES, 4 * (llc_bytes or 0)))
        n = total // (3 * 8)
        rng = np.random.default_rng(7)
        self._a = np.ones(n)  # written, so its pages exist before the first pass
        self._b = rng.random(n)
        self._c = rng.random(n)
        self._n = n
        self._steps = 0
        self._reps = 0
        self._cpus = pinnable(online_cpus())
        threads = max(1, len(self._cpus))
        self._chunk = n // threads
        # The cache kernel's arrays fill half the last-level cache, split over the threads
        # that run it (one without a compiler).
        lib, how = native.build("probe", C_PROBE, ("-O2", "-march=native", "-shared", "-fPIC"))
        runners = threads if lib is not None else 1
        self._cache_n = max(CACHE_MIN_N, (llc_bytes or 8 * 2**20) // 2 // (3 * 8 * runners))
        self._cache_n = min(self._cache_n, self._chunk)
        self._sinks = np.zeros(threads)
        self._lib = lib
        # The link: the first and the last online CPU (on a larger host, likely the farthest
        # apart); its flag sits alone in a cache line.
        self._pair = [self._cpus[0], self._cpus[-1]] if len(self._cpus) > 1 and lib else []
        self._flag_words = np.zeros(32, dtype=np.int64)
        self._flag_at = (-self._flag_words.ctypes.data % 64) // 8
        if lib is not None:
            pointer = ctypes.POINTER(ctypes.c_double)
            lib.probe_memory.restype = ctypes.c_double
            lib.probe_memory.argtypes = [
                pointer,
                pointer,
                pointer,
                ctypes.c_long,
                ctypes.c_long,
                ctypes.c_int,
            ]
            lib.probe_compute.restype = ctypes.c_double
            lib.probe_compute.argtypes = [ctypes.c_long, ctypes.c_int, pointer]
            lib.probe_link.restype = ctypes.c_int
            lib.probe_link.argtypes = [
                ctypes.POINTER(ctypes.c_long),
                ctypes.c_int,
                ctypes.c_long,
                ctypes.c_int,
                ctypes.c_double,
                pointer,
                pointer,
            ]
            self.source = f"C ({how}), thread CPU time, {threads} online CPU(s)"
        else:
            self.source = f"numpy and a Python loop ({how})"

    def _on_every_cpu(
        self, kernel: Callable[[int], float], cpus: Sequence[int] | None = None
    ) -> float:
        """The slowest CPU's seconds, every CPU (or each of ``cpus``) running ``kernel(i)``."""
        cpus = self._cpus if cpus is None else cpus
        seconds = [math.inf] * max(1, len(cpus))
        start = threading.Barrier(len(seconds), timeout=10.0)

        def one(i: int) -> None:
            try:
                if cpus:  # pin this thread alone (pid 0: the calling thread)
                    os.sched_setaffinity(0, {cpus[i]})
                start.wait()  # every CPU's kernel starts together, so each meets the others
            except (OSError, threading.BrokenBarrierError):
                start.abort()  # a CPU this thread cannot run on: no reading, no hang
                return
            seconds[i] = kernel(i)

        # ctypes releases the GIL during the call, so the threads run in parallel.
        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(seconds))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return max(seconds)

    def _triad_seconds(self, offset: int, n: int, reps: int) -> float:
        assert self._lib is not None
        pointer = ctypes.POINTER(ctypes.c_double)
        a, b, c = (x[offset:].ctypes.data_as(pointer) for x in (self._a, self._b, self._c))
        return float(self._lib.probe_memory(a, b, c, n, reps, PASSES))

    def _memory_seconds(self) -> float:
        """One thread's triad over all of the arrays."""
        if self._lib is None:
            return self._numpy_triad(self._n, 1)
        return self._triad_seconds(0, self._n, 1)

    def _cache_seconds(self, reps: int) -> float:
        """Every CPU's triad, ``reps`` times, over arrays that stay in the last-level cache."""
        if self._lib is None:
            return self._numpy_triad(self._cache_n, reps)
        n = self._cache_n
        return self._on_every_cpu(lambda i: self._triad_seconds(i * self._chunk, n, reps))

    def _numpy_triad(self, n: int, reps: int) -> float:
        a, b, c = self._a[:n], self._b[:n], self._c[:n]

        def step() -> None:  # a = b + 0.5*c in two passes over a; counted as one triad
            for _ in range(reps):
                np.multiply(c, 0.5, out=a)
                np.add(a, b, out=a)

        return _best(step)

    @property
    def native(self) -> bool:
        """Whether the probe's C kernels were built (else numpy and a Python loop stand in)."""
        return self._lib is not None

    def compute_pass(self, steps: int, passes: int = 1) -> float:
        """Seconds of ``passes`` over ``steps`` multiply-add chains on every CPU at once.

        The slowest CPU's best; the C kernels only (see :attr:`native`).
        """
        if self._lib is None:
            raise RuntimeError("the probe's C kernels were not built (no C compiler)")
        lib = self._lib
        pointer = ctypes.POINTER(ctypes.c_double)

        def one(i: int) -> float:
            sink = self._sinks[i : i + 1].ctypes.data_as(pointer)
            return float(lib.probe_compute(steps, passes, sink))

        return self._on_every_cpu(one)

    def _compute_seconds(self, steps: int) -> float:
        """The slowest CPU's best seconds, every CPU running the kernel at once."""
        if self._lib is None:
            return _best(lambda: _python_chains(steps))
        return self.compute_pass(steps, PASSES)

    def _link_seconds(self) -> float | None:
        """Best seconds per one-way cache-line handoff between the pair's two CPUs.

        Only passes in which both sides stayed on their CPUs count (thread CPU time at least
        ``LINK_ON_CPU`` of wall time); None when none did, or a side could not run.
        """
        assert self._lib is not None
        lib = self._lib
        pointer = ctypes.POINTER(ctypes.c_double)
        times = np.zeros((2, 2, LINK_PASSES))  # side, (wall, cpu), pass
        self._flag_words[:] = 0
        flag = self._flag_words[self._flag_at :].ctypes.data_as(ctypes.POINTER(ctypes.c_long))

        def side(i: int) -> float:
            wall, cpu = (times[i, k].ctypes.data_as(pointer) for k in (0, 1))
            status = lib.probe_link(flag, i, LINK_ROUNDS, LINK_PASSES, LINK_LIMIT_S, wall, cpu)
            return 0.0 if status == 0 else math.inf

        if not math.isfinite(self._on_every_cpu(side, self._pair)):
            return None
        wall, cpu = times[:, 0, :], times[:, 1, :]
        steady = np.all(cpu >= LINK_ON_CPU * wall, axis=0) & np.all(wall > 0, axis=0)
        if not steady.any():
            return None
        return float(wall[0, steady].min()) / (2 * LINK_ROUNDS)

    @property
    def _flops_per_step(self) -> int:
        # C: 12 chains x 4 lanes x (mul + add); Python: a multiply-add per step
        return 8 * 12 if self._lib is not None else 2

    def _threads(self) -> int:
        return max(1, len(self._cpus)) if self._lib is not None else 1

    def measure(self) -> dict[str, Any]:
        """Every rate, measured now: ``{"memory": GB/s, "compute": GFLOP/s, ...}``."""
        start = time.perf_counter()
        if not self._steps:  # size the compute and cache kernels once, to ~4 ms per pass
            self._steps = _sized(self._compute_seconds, 1 << 14)
            self._reps = _sized(self._cache_seconds, 4)
        memory = self._memory_seconds()
        cache = self._cache_seconds(self._reps)
        compute = self._compute_seconds(self._steps)
        cache_bytes = 3 * 8 * self._cache_n * self._reps * self._threads()
        flops = self._flops_per_step * self._steps * self._threads()
        reading: dict[str, Any] = {
            "memory": 3 * 8 * self._n / max(memory, 1e-9) / 1e9,
            "cache": cache_bytes / max(cache, 1e-9) / 1e9,
            "compute": flops / max(compute, 1e-9) / 1e9,
        }
        link = self._link_seconds() if self._pair else None
        if link is not None:
            reading[LINK] = 1e-6 / max(link, 1e-12)
        return {**reading, "source": self.source, "seconds": round(time.perf_counter() - start, 4)}


def pinnable(cpus: list[int]) -> list[int]:
    """The CPUs a thread may pin itself to (a container's cpuset may hold fewer than online)."""
    ok: list[int] = []

    def trial() -> None:  # a throwaway thread, so no other thread's affinity changes
        for cpu in cpus:
            try:
                os.sched_setaffinity(0, {cpu})
                ok.append(cpu)
            except OSError:
                pass

    t = threading.Thread(target=trial)
    t.start()
    t.join()
    return ok


def online_cpus() -> list[int]:
    """The online CPUs (``/sys/devices/system/cpu/online``), or the allowed ones."""
    if not hasattr(os, "sched_setaffinity"):
        return []
    try:
        text = Path("/sys/devices/system/cpu/online").read_text().strip()
        cpus: set[int] = set()
        for part in text.split(","):
            low, _, high = part.partition("-")
            cpus.update(range(int(low), int(high or low) + 1))
        return sorted(cpus)
    except (OSError, ValueError):
        return sorted(os.sched_getaffinity(0))


def _sized(seconds: Callable[[int], float], count: int) -> int:
    """The repetition count that makes one pass of a kernel last about COMPUTE_SECONDS."""
    while (once := seconds(count)) < COMPUTE_SECONDS / 4:
        count *= 4
    return max(count, int(count * COMPUTE_SECONDS / max(once, 1e-9)))


def _best(step: Callable[[], object]) -> float:
    best = math.inf
    for _ in range(PASSES):
        start = time.thread_time()
        step()
        best = min(best, time.thread_time() - start)
    return max(best, 1e-9)


def _python_chains(steps: int) -> float:
    x = [1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8]
    for _ in range(steps // 8):
        x = [v * 0.9999999 + 1e-7 for v in x]
    return sum(x)


@functools.cache
def host_probe() -> Probe:
    """The probe of this process (its buffers are allocated once, on first use)."""
    from perfsuite.hardware.detect import last_level_cache_bytes

    return Probe(last_level_cache_bytes())


def combine(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """One reading for the check's interval: the faster of the two, both kept.

    Interference only ever slows a probe kernel (a framework's worker threads still spinning
    after the check, a neighbour's burst), never speeds it up, so the faster reading is the
    closer one to what the machine could do in the interval.  Replayed on three verdict
    benchmarks' records (``lab/probe_effect.py --combine``), the faster reading called
    10-29 points more of the injected 20% slowdowns "regressed" than the geometric mean of the
    two, for 0.1-0.4 points more A/A false alarms.
    """
    out: dict[str, Any] = {"source": before.get("source", "")}
    keys = [*COMPONENTS, *([LINK] if LINK in before and LINK in after else [])]
    for key in keys:
        out[key] = max(float(before[key]), float(after[key]))
    out["before"] = {k: before[k] for k in keys}
    out["after"] = {k: after[k] for k in keys}
    return out
