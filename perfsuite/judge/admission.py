"""Which results a baseline may take in, and why a run saves none: typed, never worded.

A baseline is what later runs are judged by, so it must not hold a failure, a regression or
a reading the noise guard flagged, nor a quick mode's short samples.  A load the check
shared with its bare reference, pair by pair, cancels in their ratios: such a reading is
kept, with its load, for the verdict that judges by those ratios.
``perfsuite.report.terminal`` words the reasons.
"""

from __future__ import annotations

from perfsuite.judge import outcome
from perfsuite.model import FlagKind, Result
from perfsuite.model.baseline import paired_ratios
from perfsuite.model.finished import NotSaved, Refusal, Refused


def refusals(result: Result, quick: bool) -> list[Refusal]:
    """Why a result should not become part of a baseline (empty when it may)."""
    why = []
    kind = outcome.of(result)
    if kind == "fail":
        why.append(Refusal(Refused.FAILED))
    if result.baseline.verdict == "regressed":
        why.append(Refusal(Refused.REGRESSED_WAIVED if kind == "waived" else Refused.REGRESSED))
    paired = bool(paired_ratios(result.bare_reference, len(result.samples)))
    for flag in result.noise_flags:
        if not (paired and flag.kind is FlagKind.FOREIGN_LOAD):
            why.append(Refusal(Refused.FLAGGED, flag))
    if quick:
        why.append(Refusal(Refused.QUICK))
    return why


def not_saved(incomplete: str, crashed: int, force: bool) -> NotSaved | None:
    """Why a run saves no baseline at all (None: it may save one).

    An incomplete run never saves one; a run with crashed checks saves none unless forced
    (``--perf-force-baseline`` saves the checks that measured).
    """
    if incomplete:
        return NotSaved.INCOMPLETE
    if crashed and not force:
        return NotSaved.CRASHED
    return None
