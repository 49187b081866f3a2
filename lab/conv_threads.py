"""Pair-ratio spread of a short torch CPU conv, by intra-op thread count (run beside a burner).

Usage: ``python lab/conv_threads.py THREADS``.  The check side is an ``nn.Conv2d`` module and
the bare side ``F.conv2d`` on the same tensors, as the conv check and its bare reference are:
bf16, one 128x128 image of 16 channels, a 3x3 filter.  20 pairs of 40 calls each, one side
after the other; printed: the call time, the median ratio of the two sides' rates and the sd
of its log.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from collections.abc import Callable

import torch

PAIRS = 20
CALLS = 40


def main() -> None:
    torch.set_num_threads(int(sys.argv[1]))
    torch.manual_seed(0)
    x = torch.randn(1, 16, 128, 128, dtype=torch.bfloat16)
    w = torch.randn(16, 16, 3, 3, dtype=torch.bfloat16)
    conv = torch.nn.Conv2d(16, 16, 3, padding=1, bias=False).to(torch.bfloat16)
    with torch.no_grad():
        conv.weight.copy_(w)

    def check() -> None:
        with torch.no_grad():
            conv(x)

    def bare() -> None:
        torch.nn.functional.conv2d(x, w, None, 1, 1)

    def sample(step: Callable[[], None]) -> float:
        t0 = time.perf_counter()
        for _ in range(CALLS):
            step()
        return time.perf_counter() - t0

    for step in (check, bare):  # warm-up
        sample(step)
    ratios, seconds = [], []
    for _ in range(PAIRS):
        a, b = sample(check), sample(bare)
        ratios.append(b / a)  # the check's rate over its bare reference's
        seconds.append(a)
    logs = [math.log(r) for r in ratios]
    call_ms = statistics.median(seconds) / CALLS * 1e3
    print(
        f"threads {torch.get_num_threads()}: call {call_ms:.2f} ms,"
        f" ratio median {statistics.median(ratios):.3f}, sd(log) {statistics.stdev(logs):.3f},"
        f" range {min(ratios):.2f}-{max(ratios):.2f}"
    )


if __name__ == "__main__":
    main()
