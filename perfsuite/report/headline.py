"""A session's verdict and a check's floor in the words every view shows.

The terminal's last line, the HTML banner, the Markdown summary, JUnit's properties and
``perfsuite compare`` all state a session's verdict with :func:`headline`; the judge
(:mod:`perfsuite.judge.outcome`) decides it and builds no sentence.
"""

from __future__ import annotations

from collections import Counter

from perfsuite.judge import outcome
from perfsuite.judge.outcome import SessionVerdict
from perfsuite.model import Result
from perfsuite.model.verdicts import ORDER


def headline(verdict: SessionVerdict) -> str:
    """``FAILED (2 regressed)``, ``INCONCLUSIVE (3 noisy)`` or ``PASSED (54 checks)``."""
    v = verdict
    crashed = f"{len(v.crashed)} crashed" if v.crashed else ""
    if v.state == "interrupted":
        judged = f"{_checks(v.total)} judged"
        return f"INTERRUPTED ({', '.join(x for x in (judged, crashed) if x)})"
    if v.state == "failed":
        kinds = Counter(outcome.of(r) for r in v.failing)
        parts = (crashed, count_text(kinds), "run incomplete" if v.incomplete else "")
        return f"FAILED ({', '.join(x for x in parts if x)})"
    if v.state == "empty":
        return "INCONCLUSIVE (nothing judged)"
    if v.state == "measured":
        why = [
            text
            for flag, text in (
                (v.no_floor, "no floor reference for this profile"),
                (v.no_baseline, "no baseline yet"),
            )
            if flag
        ]
        return f"MEASURED ({'; '.join([_checks(v.total), ', '.join(why)])})"
    if v.state == "inconclusive":
        text = f"INCONCLUSIVE ({len(v.noisy)} noisy"
    else:
        some = "" if v.judged == v.total else f"{v.judged} of "
        text = f"PASSED ({some}{_checks(v.total)}{' judged' if some else ''}"
        if v.estimates_only:
            text += "; against estimated floors only, no baseline yet"
    if v.tolerated:
        kinds = Counter(outcome.of(r) for r in v.tolerated)
        text += f"; {count_text(kinds)} not failing under --perf-fail-on"
    return text + ")"


def worst_named(verdict: SessionVerdict, n: int = 3) -> str:
    """The ``n`` worst failing checks by name (no file path), crashed first, then more."""
    ids = [c.id for c in verdict.crashed] + [r.id for r in verdict.failing]
    ids = list(dict.fromkeys(ids))
    names = ", ".join(i.rsplit("::", 1)[-1] for i in ids[:n])
    more = len(ids) - n
    return names + (f" and {more} more" if more > 0 else "")


def count_text(counter: Counter[str]) -> str:
    """``2 regressed, 1 fail``: the outcomes counted, in the order of their severity."""
    return ", ".join(f"{counter[k]} {k}" for k in ORDER if counter.get(k))


def floor_label(result: Result) -> str:
    """The floor verdict as every view shows it: an estimated peak's miss is a warning."""
    f = result.floor
    if outcome.floor_missed(result) and outcome.tainted(result):
        return "fail (under load)"
    if f.verdict == "fail" and f.advisory:
        return "warning"
    if outcome.above_estimate(result):
        return f"{f.verdict} (above est. peak)"
    return "warning (est.)" if f.verdict == "fail" and f.estimated else f.verdict


def failure_text(result: Result) -> str:
    """How a check that fails the session says so (its pytest failure, its JUnit failure)."""
    return f"{result.outcome}: {result.message}"


def _checks(n: int) -> str:
    return f"{n} check{'' if n == 1 else 's'}"
