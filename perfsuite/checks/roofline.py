"""Roofline points: where an operation sits against a profile's compute and bandwidth ceilings.

Attainable FLOP/s = min(peak FLOP/s, AI x peak bandwidth); the ridge point is
peak / bandwidth (13 FLOP/B for A100 FP32, 100 for TF32 at 1555 GB/s).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from perfsuite import sections, stats
from perfsuite.backends import PRECISION
from perfsuite.hardware.profile import HardwareProfile
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
