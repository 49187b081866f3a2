"""Does a process keep its own STREAM level, and do huge pages decide it?  A probe.

In ``perfsuite ab`` records with the samples interleaved, a STREAM check's three samples on
one side can sit 20-30% above the other side's three, though the two alternate a tenth of
a second apart: a level the process keeps, not a moment of the machine.  numpy asks the
kernel for transparent huge pages on its large arrays (``madvise``); torch does only when
``THP_MEM_ALLOC_ENABLE=1``.  On a machine whose THP mode is ``madvise``, a process whose
arrays got 4 KiB pages walks far more page tables on every pass.

This probe starts ``--processes`` fresh processes per variant, alternating the variants,
each timing one STREAM kernel (the check's array size) as a block of one warm-up and five
timed calls, and reporting its median GB/s and how much of its arrays the kernel backed
with huge pages (``AnonHugePages`` of its ``smaps_rollup``).  Printed per variant: the
spread of the process medians across processes, and their huge-page share.

    python -m lab.process_levels [--processes 10] [--kernel scale]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, statistics, sys, time
from perfsuite.checks.stream import array_elements, counted_bytes
from perfsuite.hardware.detect import host_facts
backend, kernel = sys.argv[1], sys.argv[2]
elements = array_elements(host_facts().last_level_cache_bytes or 256 * 2**20)
if backend == "torch":
    from perfsuite.backends.torch import TorchStream
    stream = TorchStream("cpu", elements, 1)
else:
    from perfsuite.backends.numpy import NumpyStream
    stream = NumpyStream(elements, 1)
run = getattr(stream, kernel)
run()
seconds = []
for _ in range(5):
    start = time.perf_counter()
    run()
    seconds.append(time.perf_counter() - start)
huge = 0
for line in open("/proc/self/smaps_rollup"):
    if line.startswith("AnonHugePages:"):
        huge = int(line.split()[1]) * 1024
print(json.dumps({"gbs": counted_bytes(kernel, elements) / statistics.median(seconds) / 1e9,
                  "huge_share": huge / (3 * elements * 8)}))
"""

VARIANTS = {
    "torch": ("torch", {}),
    "torch THP_MEM_ALLOC_ENABLE=1": ("torch", {"THP_MEM_ALLOC_ENABLE": "1"}),
    "numpy": ("numpy", {}),
}


def main() -> None:
    """Start the processes and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--processes", type=int, default=10, help="processes per variant")
    parser.add_argument("--kernel", default="scale", choices=["copy", "scale", "add", "triad"])
    parser.add_argument("--out", type=Path, help="write every process's reading here, as JSON")
    args = parser.parse_args()
    readings: dict[str, list[dict[str, float]]] = {name: [] for name in VARIANTS}
    started = time.monotonic()
    for _ in range(args.processes):
        for name, (backend, extra) in VARIANTS.items():
            env = {**os.environ, "PYTHONPATH": str(ROOT), **extra}
            done = subprocess.run(
                [sys.executable, "-c", CHILD, backend, args.kernel],
                env=env, capture_output=True, text=True, check=True,
            )  # fmt: skip
            readings[name].append(json.loads(done.stdout.splitlines()[-1]))
    took = time.monotonic() - started
    print(f"{args.kernel}: {args.processes} processes per variant in {took:.0f} s")
    print("| variant | median GB/s | sd of log across processes | range | huge-page share |")
    print("|---|---|---|---|---|")
    for name, rows in readings.items():
        gbs = [r["gbs"] for r in rows]
        logs = [math.log(g) for g in gbs]
        share = statistics.median(r["huge_share"] for r in rows)
        print(
            f"| {name} | {statistics.median(gbs):.1f} | {100 * statistics.stdev(logs):.1f}% | "
            f"{min(gbs):.1f}-{max(gbs):.1f} | {100 * share:.0f}% |"
        )
    if args.out:
        args.out.write_text(json.dumps(readings))


if __name__ == "__main__":
    main()
