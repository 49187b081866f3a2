"""Roofline points: where an operation sits against a profile's compute and bandwidth ceilings.

Attainable FLOP/s = min(peak FLOP/s, AI x peak bandwidth); the ridge point is
peak / bandwidth (13 FLOP/B for A100 FP32, 100 for TF32 at 1555 GB/s).

The bandwidth slope is the device memory's.  An operation whose whole working set (its
minimum bytes) fits in the device's last-level cache is marked ``cache_resident``: a check
repeats it on the same buffers, so after the first call it runs from that cache, and the
memory slope does not bound it.  On an H100 (50 MB of L2), the fp16 GEMM 7860x64x2560
(41.6 MB) read 1.0-1.2 of its HBM bound, and its run medians moved by 4.6% (sd) where the
square GEMMs' moved by under 1%.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from perfsuite import sections
from perfsuite.backends import PRECISION
from perfsuite.hardware.profile import HardwareProfile
from perfsuite.judge import stats
from perfsuite.model import Result


def bound_tflops(ai: float, peak_tflops: float, bandwidth_gbs: float) -> float:
    """min(peak, AI x bandwidth), in TFLOP/s."""
    return min(peak_tflops, ai * bandwidth_gbs / 1000.0)


def point(
    profile: HardwareProfile,
    precision: str,
    device_kind: str,
    flops: int,
    min_bytes: int,
    **extra: Any,
) -> dict[str, Any]:
    """The roofline facts of an operation on a profile: AI, and bound and regime where known."""
    ai = flops / min_bytes
    peak = profile.figure(f"compute.{precision}_tflops")
    bandwidth = profile.figure("memory.bandwidth_gbs")
    facts: dict[str, Any] = {
        "flops": flops,
        "min_bytes": min_bytes,
        "ai": ai,
        "precision": precision,
        **extra,
    }
    cache_mib = profile.figure("memory.last_level_cache_mib")
    if profile.kind == device_kind and cache_mib:
        facts.update(cache_mib=cache_mib, cache_resident=min_bytes <= cache_mib * 2**20)
    if profile.kind == device_kind and peak is not None and bandwidth is not None:
        ridge = peak * 1000.0 / bandwidth
        facts.update(
            bound_tflops=bound_tflops(ai, peak, bandwidth),
            ridge_ai=ridge,
            regime="compute-bound" if ai >= ridge else "memory-bound",
        )
    return facts


def section(profile: HardwareProfile, results: Iterable[Result]) -> dict[str, Any]:
    """The run record's roofline: the profile's ceilings and every measured point."""
    points = []
    for r in results:
        facts = r.context.get("roofline")
        if not facts:
            continue
        achieved = stats.best(r.samples, r.higher_is_better)
        bound = facts.get("bound_tflops")
        points.append(
            {
                "id": r.id,
                "check": r.check,
                "precision": facts["precision"],
                "ai": facts["ai"],
                "achieved_tflops": achieved,
                "bound_tflops": bound,
                "attainment": achieved / bound if bound else None,
                "regime": facts.get("regime"),
                "cache_resident": bool(facts.get("cache_resident")),
            }
        )
    compute = {
        p: profile.figure(f"compute.{p}_tflops")
        for p in PRECISION
        if profile.figure(f"compute.{p}_tflops") is not None
    }
    return {
        "ceilings": {
            "compute_tflops": compute,
            "bandwidth_gbs": profile.figure("memory.bandwidth_gbs"),
            "estimated": sorted(profile.estimated),
        },
        "points": points,
    }


sections.register("roofline", section)
