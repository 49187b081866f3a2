"""Does the machine itself drift?  A benchmark, not a test.

Bare numpy, no perfsuite in the timed path: a STREAM-style triad (three 128 MiB arrays) and
a 1024^3 fp64 GEMM, each measured in short bursts (5 samples, median) one after the other
for ``--seconds``, in one process; then the first burst of ``--processes`` fresh processes.
If the bursts of one process spread as widely as fresh processes do, the run-to-run spread
that the verdicts see comes from the machine (neighbours on a shared host, clocks), not from
process start-up or the suite, and only more measurement time spread over minutes narrows it.

Usage::

    python lab/drift.py [--seconds 60] [--processes 8]

It prints a Markdown table: bursts, sd of log(burst median), lag-1 autocorrelation and
max/min, within one process and across fresh ones.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import numpy as np

N = 1 << 24  # 128 MiB per float64 array: far past any L3
M = 1024


def _bursts(seconds: float) -> dict[str, list[float]]:
    rng = np.random.default_rng()
    a, b, c = (rng.random(N) for _ in range(3))
    x, y = rng.random((M, M)), rng.random((M, M))
    z = np.empty((M, M))

    def triad() -> None:
        np.multiply(c, 3.0, out=a)
        np.add(a, b, out=a)

    def gemm() -> None:
        np.matmul(x, y, out=z)

    work = {"triad GB/s": (triad, 3 * 8 * N / 1e9), "gemm GFLOP/s": (gemm, 2 * M**3 / 1e9)}
    rates: dict[str, list[float]] = {k: [] for k in work}
    start = time.perf_counter()
    while True:
        for name, (fn, amount) in work.items():
            fn()
            fn()  # warm-up
            times = []
            for _ in range(5):
                t0 = time.perf_counter()
                for _ in range(3):
                    fn()
                times.append((time.perf_counter() - t0) / 3)
            rates[name].append(amount / float(np.median(times)))
        if time.perf_counter() - start >= seconds:
            return rates


def _row(label: str, name: str, values: list[float]) -> str:
    logs = np.log(values)
    lag1 = np.corrcoef(logs[:-1], logs[1:])[0, 1] if len(logs) > 2 else float("nan")
    return (
        f"| {name} | {label} | {len(values)} | {np.min(values):.1f} to {np.max(values):.1f} "
        f"| {logs.std(ddof=1):.3f} | {lag1:.2f} | {np.exp(np.ptp(logs)):.2f} |"
    )


def main() -> None:
    """Measure bursts in one process, then in fresh ones, and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_bursts(0.0)))
        return
    if args.seconds <= 0 or args.processes < 3:
        parser.error("--seconds must be positive and --processes at least 3")
    within = _bursts(args.seconds)
    fresh: dict[str, list[float]] = {k: [] for k in within}
    for _ in range(args.processes):
        out = subprocess.run(
            [sys.executable, __file__, "--child"], check=True, capture_output=True, text=True
        ).stdout
        for name, values in json.loads(out).items():
            fresh[name].append(values[0])
    print("| kernel | where | bursts | range | sd(log) | lag-1 corr | max/min |")
    print("|---|---|---|---|---|---|---|")
    for name in within:
        print(_row(f"one process, {args.seconds:.0f} s", name, within[name]))
        print(_row("fresh processes", name, fresh[name]))


if __name__ == "__main__":
    main()
