"""Which cuDNN kernels an fp32 conv runs with TF32 off and on, and how fast (a GPU diagnostic).

    python lab/gpu_diag.py

An fp32 conv's effective FLOP/s (direct-convolution FLOPs over time) can pass the device's
fp32 peak when cuDNN picks an algorithm with fewer multiplications (Winograd, FFT) or uses
tensor cores.  This prints, for each pass of one layer and each TF32 setting, the effective
TFLOP/s and the names of the kernels that ran, so the cause can be read off.
"""

from __future__ import annotations

import json

import torch
from gpu_bare import best_seconds  # beside this script
from torch.profiler import ProfilerActivity, profile

N, C, H, K = 16, 512, 16, 512
FLOPS = 2 * N * H * H * K * C * 9


def main() -> None:
    torch.backends.cudnn.benchmark = True
    x = torch.randn(N, C, H, H, device="cuda")
    w = torch.randn(K, C, 3, 3, device="cuda")
    dy = torch.randn(N, K, H, H, device="cuda")
    passes = {
        "forward": lambda: torch.nn.functional.conv2d(x, w, padding=1),
        "input_grad": lambda: torch.nn.grad.conv2d_input(x.shape, w, dy, padding=1),
        "filter_grad": lambda: torch.nn.grad.conv2d_weight(x, w.shape, dy, padding=1),
    }
    out = []
    for tf32 in (False, True):
        torch.backends.cudnn.allow_tf32 = tf32
        for name, step in passes.items():
            tflops = FLOPS / best_seconds(torch, step, calls=50) / 1e12
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                step()
                torch.cuda.synchronize()
            kernels = sorted({e.name[:120] for e in prof.events() if e.device_type.name == "CUDA"})
            out.append(
                {"cudnn_tf32": tf32, "pass": name, "tflops": round(tflops, 1), "kernels": kernels}
            )
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
