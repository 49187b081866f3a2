"""Fidelity: each check over the bare reference sampled beside it in the same run.

Where the reference's samples were taken in pairs with the check's (one right before each),
the fidelity is the median of the pairs' ratios: the machine's drift between samples then
cancels.  Otherwise it is the check's best over the reference's best.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from typing import Any

from perfsuite import sections
from perfsuite.hardware.profile import HardwareProfile
from perfsuite.judge import stats
from perfsuite.model import Result


def fidelity(best: float, reference: Mapping[str, Any] | None) -> float | None:
    """Check over reference (both rates), or None where there is no reference value."""
    if not reference or not reference.get("value"):
        return None
    ratios = reference.get("pair_ratios")
    if ratios:
        return float(statistics.median(ratios))
    return best / float(reference["value"])


def section(profile: HardwareProfile, results: Iterable[Result]) -> dict[str, Any]:
    """Every check with a bare reference: its best, the reference, and their ratio."""
    rows = []
    for r in results:
        bare = r.bare_reference.to_dict() if r.bare_reference is not None else None
        if bare is None:
            continue
        best = stats.best(r.samples, r.higher_is_better)
        ratio = fidelity(best, bare)
        rows.append(
            {
                "id": r.id,
                "check": r.check,
                "value": best,
                "unit": r.unit,
                "reference": dict(bare),
                "fidelity": ratio,
                # A reference that could not be built or run is not a failure of the check.
                "status": "measured" if ratio is not None else "no-reference",
            }
        )
    return {"checks": rows} if rows else {}


sections.register("fidelity", section)
