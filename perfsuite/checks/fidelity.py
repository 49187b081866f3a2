"""Fidelity: each check's best over the bare reference measured beside it in the same run."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from perfsuite import sections, stats
from perfsuite.hardware.profile import HardwareProfile
from perfsuite.model import Result


def fidelity(best: float, reference: Mapping[str, Any] | None) -> float | None:
    """Check over reference (both rates), or None where there is no reference value."""
    if not reference or not reference.get("value"):
        return None
    return best / float(reference["value"])


def section(profile: HardwareProfile, results: Iterable[Result]) -> dict[str, Any]:
    """Every check with a bare reference: its best, the reference, and their ratio."""
    rows = []
    for r in results:
        bare = r.context.get("bare_reference")
        if not isinstance(bare, Mapping):
            continue
        best = stats.best(r.samples, r.higher_is_better)
        rows.append(
            {
                "id": r.id,
                "check": r.check,
                "value": best,
                "unit": r.unit,
                "reference": dict(bare),
                "fidelity": fidelity(best, bare),
            }
        )
    return {"checks": rows} if rows else {}


sections.register("fidelity", section)
