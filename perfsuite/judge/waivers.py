"""Waivers: known regressions, marked with a reason (in the spirit of ReFrame's xfail).

``baselines/<profile>/waivers.toml``::

    schema_version = 1

    [[waiver]]
    test = "suites/test_memory_bandwidth.py::test_stream[[]tensorflow-*"
    reason = "XLA CPU copy regression in TF 2.21, tracked upstream"
    expires = 2027-01-31        # optional; from that day on the waiver no longer applies

A waiver turns a *regressed* verdict into an expected failure (xfail) with its reason.  A
waived check that no longer regresses is reported as a *stale* waiver; an expired waiver
does not apply and is reported as expired.
"""

from __future__ import annotations

from dataclasses import replace
from fnmatch import fnmatchcase

from perfsuite.model.rules import Waiver, WaiverState


def rejudged(waiver: WaiverState | None, verdict: str) -> WaiverState | None:
    """A recorded waiver's status once its check's baseline verdict is decided again.

    A waiver that was in force (applied or stale) applies to a regression and is stale
    otherwise; an expired one stays expired.
    """
    if waiver is None or waiver.status not in ("applied", "stale"):
        return waiver
    return replace(waiver, status="applied" if verdict == "regressed" else "stale")


def find(waivers: list[Waiver], node_id: str) -> Waiver | None:
    """The first waiver whose pattern matches a test id."""
    return next((w for w in waivers if fnmatchcase(node_id, w.test)), None)
