"""Bare torch figures on one CUDA device, outside perfsuite: the yardstick for its GPU checks.

    python lab/gpu_bare.py [--device 0] [--gib 2]

Prints one JSON object: a device-to-device copy (``dst.copy_(src)``, read plus write counted,
STREAM's copy), a bf16 GEMM at 8192^3 (``torch.matmul(a, b, out=c)``), and an empty launch
with its synchronisation (what a sample pays once).  Each figure is the best of 10 samples
timed with CUDA events after a warm-up, on random data; nothing is allocated while timed.
"""

from __future__ import annotations

import argparse
import json
import time


def best_seconds(torch, step, calls: int, samples: int = 10) -> float:  # type: ignore[no-untyped-def]
    """Best per-call seconds of ``samples`` samples of ``calls`` back-to-back calls."""
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(samples):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            step()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3 / calls)
    return best


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--gib", type=float, default=2.0, help="bytes per copy buffer, GiB")
    args = parser.parse_args()
    import torch

    dev = torch.device("cuda", args.device)
    torch.cuda.set_device(dev)
    props = torch.cuda.get_device_properties(dev)
    n = int(args.gib * 2**30) // 8
    src = torch.randn(n, device=dev, dtype=torch.float64)
    dst = torch.empty_like(src)
    copy_s = best_seconds(torch, lambda: dst.copy_(src), calls=20)
    size = 8192
    a = torch.randn(size, size, device=dev, dtype=torch.bfloat16)
    b = torch.randn(size, size, device=dev, dtype=torch.bfloat16)
    c = torch.empty(size, size, device=dev, dtype=torch.bfloat16)
    gemm_s = best_seconds(torch, lambda: torch.matmul(a, b, out=c), calls=20)
    tiny = torch.empty(1, device=dev)
    launches = []
    for _ in range(200):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        tiny.zero_()
        torch.cuda.synchronize()
        launches.append(time.perf_counter() - t0)
    launches.sort()
    print(
        json.dumps(
            {
                "device": props.name,
                "multiprocessors": props.multi_processor_count,
                "l2_bytes": getattr(props, "L2_cache_size", None),
                "memory_bytes": props.total_memory,
                "torch": torch.__version__,
                "cuda": torch.version.cuda,
                "copy_bytes_per_buffer": n * 8,
                "copy_gbs_read_plus_write": 2 * n * 8 / copy_s / 1e9,
                "bf16_gemm_8192_tflops": 2 * size**3 / gemm_s / 1e12,
                "launch_and_sync_us_median": launches[len(launches) // 2] * 1e6,
                "launch_and_sync_us_best": launches[0] * 1e6,
            }
        )
    )


if __name__ == "__main__":
    main()
