"""Does a framework-independent C kernel, sampled in pairs, take the drift out of a check.

    python lab/yardstick.py [--check numpy-gemm|torch-gemm|torch-triad] [--seconds 60]

In one process, for ``--seconds``, this takes samples of 0.1 s in turn of: the check's
operation (a 2048³ fp32 GEMM, or a 128 MiB STREAM triad), the machine probe's C compute
kernel (independent chains of vector multiply-adds on every CPU, wall clock), the C STREAM
triad on arrays of its own (every CPU) and a 1024³ GEMM through numpy's BLAS (for a torch
check, a GEMM of another library).  It then groups the check's samples in windows of 5
(one quick check's worth) and prints how much the windows' medians move (sd of the log,
max/min) for the check alone and for the check over each yardstick sampled beside it.

The drift between windows a few seconds apart is what moves a check from run to run on a
shared VM (``lab/variance_levels.py``).  A yardstick that tracks the check would
shrink the ratio's sd well below the check's; then judging the paired ratio (``python
lab/paired_replay.py`` gives the upper bound, with the check's own bare reference as
the yardstick) would leave the verdict's between-run level to the software alone.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perfsuite import backends
from perfsuite.backends import reference
from perfsuite.backends.base import STREAM_SCALAR
from perfsuite.measure import probe
from perfsuite.measure.loop import QUICK, Workload, calibrate, warm_up
from perfsuite.model import Work

TRIAD_ELEMENTS = 16 * 1024 * 1024
WINDOW = 5


def check_workload(name: str) -> Workload:
    """The check's operation as a workload (a rate)."""
    framework, kind = name.split("-")
    backend = backends.get(framework)
    k: Any
    if kind == "gemm":
        k = backend.matmul("cpu", 2048, 2048, 2048, "fp32", 1)
        run, work = k.run, 2.0 * 2048**3
    else:
        k = backend.stream_kernels("cpu", TRIAD_ELEMENTS, 1)
        run, work = k.triad, 24.0 * TRIAD_ELEMENTS
    return Workload("check", {}, "", "", Work(work, ""), run, sync=k.sync)


def compute_yardstick() -> Callable[[], object]:
    """The probe's C multiply-add chains on every CPU at once, one pass."""
    host = probe.host_probe()
    if not host.native:
        raise SystemExit("no C compiler: the probe's C kernels are not available")
    return lambda: host.compute_pass(200_000)


class Arrays:
    """Three float64 arrays of random data for the C triad."""

    def __init__(self, n: int) -> None:
        rng = np.random.default_rng(3)
        self.a, self.b, self.c = (rng.random(n) for _ in range(3))


def main() -> None:
    """Print the windows' spread for the check alone and over each yardstick."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", choices=["numpy-gemm", "torch-gemm", "torch-triad"], default="numpy-gemm"
    )
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    if args.seconds < 10:
        parser.error("--seconds must be at least 10 (a few windows of 5 samples)")
    arrays = Arrays(TRIAD_ELEMENTS // 2)
    triad = reference.c_stream(
        "triad", arrays, STREAM_SCALAR, len(probe.online_cpus()), 24 * TRIAD_ELEMENTS // 2
    )
    if triad.run is None:
        raise SystemExit(f"no C triad: {triad.unavailable}")
    a, b = (np.random.default_rng(5).random((1024, 1024), dtype=np.float32) for _ in range(2))
    c = np.empty_like(a)
    workloads = {
        "check": check_workload(args.check),
        "C compute": Workload("y", {}, "", "", Work(1.0, ""), compute_yardstick()),
        "C triad": triad.timed(),
        # numpy's BLAS: a GEMM of another library than torch's and TensorFlow's
        "numpy GEMM 1024³": Workload(
            "y", {}, "", "", Work(1.0, ""), lambda: np.matmul(a, b, out=c)
        ),
    }
    calls = {}
    for name, w in workloads.items():
        warm_up(w, QUICK)
        calls[name], _ = calibrate(w, QUICK.sample_seconds)
    rates: dict[str, list[float]] = {name: [] for name in workloads}
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        for name, w in workloads.items():
            w.sync()
            start = time.perf_counter()
            w.step(calls[name])
            rates[name].append(calls[name] / (time.perf_counter() - start))
    check = np.array(rates["check"])
    print(f"{args.check}: {len(check)} samples of each, windows of {WINDOW}")
    print("| series | sd of window medians (log) | max/min | correlation with the check |")
    print("|---|---|---|---|")
    series = {"check alone": check}
    for name in ("C compute", "C triad", "numpy GEMM 1024³"):
        series[f"check / {name}"] = check / np.array(rates[name])
    for name, values in series.items():
        logs = [
            math.log(statistics.median(values[i : i + WINDOW]))
            for i in range(0, len(values) - WINDOW + 1, WINDOW)
        ]
        other = name.removeprefix("check / ")
        corr = (
            f"{np.corrcoef(np.log(check), np.log(rates[other]))[0, 1]:.2f}"
            if other in rates
            else "-"
        )
        print(
            f"| {name} | {statistics.stdev(logs):.3f} | {math.exp(max(logs) - min(logs)):.2f} "
            f"| {corr} |"
        )


if __name__ == "__main__":
    main()
