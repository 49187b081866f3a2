"""The host's bandwidth and the CPUs' link state over time, read side by side.

Usage: python lab/link_series.py [--seconds 90]

Every half second it reads the machine probe (``perfsuite/measure/probe.py``: one thread's triad,
the cache triad on every CPU, the link between the first and the last CPU) and, right
after, STREAM copy on every CPU (the suite's numpy kernels, best of 5), the same copy on one
thread, and an fp32 1024^3 GEMM (best of 5).  It prints one line per reading and, at the end,
the medians of each figure per link state (the states grouped as the judge groups them,
``speed.link_groups``), and how far apart they are.  On a VM whose two vCPUs the hypervisor
moves between chiplets, this shows which figures follow the state.  A benchmark of the
machine, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perfsuite.backends.numpy import NumpyStream
from perfsuite.checks.stream import array_elements, counted_bytes
from perfsuite.hardware.detect import last_level_cache_bytes
from perfsuite.judge import speed
from perfsuite.measure import probe

PASSES = 5
GEMM_N = 1024


def best_rate(step: Callable[[], object], amount: float) -> float:
    """``amount`` per second of the fastest of ``PASSES`` calls of ``step``.

    Wall time, not ``probe``'s thread CPU time: the STREAM kernels run on pool threads.
    """
    fastest = float("inf")
    for _ in range(PASSES):
        start = time.perf_counter()
        step()
        fastest = min(fastest, time.perf_counter() - start)
    return amount / fastest


def main() -> None:
    """Print the readings, then the medians per link state."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=90.0)
    args = parser.parse_args()
    llc = last_level_cache_bytes()
    machine = probe.Probe(llc)
    elements = array_elements(llc or 32 * 2**20)
    every = NumpyStream(elements, seed=1)
    one = NumpyStream(elements, seed=2, threads=1)
    copy_bytes = counted_bytes("copy", elements)
    rng = np.random.default_rng(3)
    a = rng.random((GEMM_N, GEMM_N), dtype=np.float32)
    out = np.empty_like(a)
    rows: list[dict[str, float]] = []
    mib = elements * 8 / 2**20
    print(f"{every.threads} thread(s) for STREAM on every CPU; arrays of {mib:.0f} MiB")
    print("   t/s  link  copy-all  copy-one  gemm GFLOP/s  probe memory  probe cache")
    start = time.time()
    try:
        while time.time() - start < args.seconds:
            reading = machine.measure()
            row = {
                "link": float(reading.get(probe.LINK, float("nan"))),
                "copy-all": best_rate(every.copy, copy_bytes) / 1e9,
                "copy-one": best_rate(one.copy, copy_bytes) / 1e9,
                "gemm": best_rate(lambda: np.matmul(a, a, out=out), 2 * GEMM_N**3) / 1e9,
                "memory": float(reading["memory"]),
                "cache": float(reading["cache"]),
            }
            rows.append(row)
            print(
                f"{time.time() - start:6.1f} {row['link']:5.1f} {row['copy-all']:9.1f} "
                f"{row['copy-one']:9.1f} {row['gemm']:13.1f} {row['memory']:13.1f} "
                f"{row['cache']:12.1f}",
                flush=True,
            )
            time.sleep(0.5)
    finally:
        every.close()
        one.close()
    linked = [r for r in rows if r["link"] > 0]  # NaN: no link reading
    groups = speed.link_groups([{probe.LINK: r["link"]} for r in linked])
    if not groups:
        print("no link readings (one CPU, or no compiler): nothing to split")
        return
    keys = ["link", "copy-all", "copy-one", "gemm", "memory", "cache"]
    print("\n| link state | readings | " + " | ".join(f"{k} (median)" for k in keys) + " |")
    print("|---" * (len(keys) + 2) + "|")
    medians = []
    for g in groups:
        m = {k: statistics.median(linked[i][k] for i in g) for k in keys}
        medians.append(m)
        cells = " | ".join(f"{m[k]:.1f}" for k in keys)
        span = [linked[i]["link"] for i in g]
        print(f"| {min(span):.1f}-{max(span):.1f} | {len(g)} | {cells} |")
    if len(medians) > 1:
        slow, fast = medians[0], medians[-1]
        ratios = ", ".join(f"{k} {fast[k] / slow[k]:.2f}x" for k in keys[1:])
        print(f"\nfastest link state against slowest: {ratios}")


if __name__ == "__main__":
    main()
