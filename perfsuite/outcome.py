"""The one rule that turns a judged result into its outcome.

Every place that shows or acts on a result (the pytest outcome, the terminal summary, the
Markdown summary, the HTML report, JUnit properties and ``perfsuite compare``) asks
:func:`of`; none of them decides on its own.  Outcomes, worst first:

* ``fail``: the best sample missed a floor taken from a datasheet figure, or a check's own
  expectation (e.g. a FLOP-count cross-check) did not hold;
* ``regressed``: worse than the baseline, materially and significantly (not waived);
* ``noisy``: a change beyond the tolerance that cannot be confirmed (not significant, or
  measured under foreign load or throttling), or a comparison too dispersed to judge;
* ``floor-warning``: the best sample missed a floor whose peak is an estimate (a warning,
  never a failure);
* ``waived``: a regression covered by a waiver;
* ``no-reference``: neither a floor figure nor a baseline to judge against;
* ``pass``: everything that could be judged held.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from perfsuite.model import Result

ORDER = ("fail", "regressed", "noisy", "floor-warning", "waived", "no-reference", "pass")
DEFAULT_FAIL_ON = frozenset({"fail", "regressed"})
# What --perf-fail-on may name (a waived regression is never a failure).
CHOOSABLE = ("fail", "regressed", "noisy", "floor-warning", "no-reference")

# perfsuite compare's exit codes.
EXIT_OK = 0
EXIT_REGRESSED = 1
EXIT_USAGE = 2
EXIT_INCONCLUSIVE = 3


def of(result: Result) -> str:
    """The outcome of one judged result."""
    floor, base = result.floor, result.baseline
    expectations = result.context.get("expectations", ())
    if floor.verdict == "fail" and not floor.estimated:
        return "fail"
    if any(not e.get("passed", True) for e in expectations if isinstance(e, dict)):
        return "fail"
    if base.verdict == "regressed":
        return "waived" if (result.waiver or {}).get("status") == "applied" else "regressed"
    if base.verdict == "noisy":
        return "noisy"
    if floor.verdict == "fail":
        return "floor-warning"
    if floor.verdict == "no-reference" and base.verdict == "new":
        return "no-reference"
    return "pass"


def counts(results: Iterable[Result]) -> Counter[str]:
    """How many results have each outcome."""
    return Counter(of(r) for r in results)


def rank(result: Result) -> int:
    """Severity rank of a result's outcome: 0 is the worst."""
    return ORDER.index(of(result))


def parse_fail_on(text: str) -> frozenset[str]:
    """Parse ``--perf-fail-on`` (comma-separated outcomes); raise ValueError on a bad name."""
    names = frozenset(p.strip() for p in text.split(",") if p.strip())
    unknown = sorted(names - set(CHOOSABLE))
    if unknown or not names:
        raise ValueError(
            f"expected a comma-separated list of {', '.join(CHOOSABLE)}; got {text!r}"
            + (f" (unknown: {', '.join(unknown)})" if unknown else "")
        )
    return names


def failing(results: Iterable[Result], fail_on: Iterable[str] = DEFAULT_FAIL_ON) -> list[Result]:
    """The results whose outcome fails the session."""
    chosen = set(fail_on)
    return [r for r in results if of(r) in chosen]


def exit_code(results: Iterable[Result], fail_on: Iterable[str] = DEFAULT_FAIL_ON) -> int:
    """0 when nothing failed, 1 on a failing outcome, 3 when the only doubt is noise."""
    items = list(results)
    if failing(items, fail_on):
        return EXIT_REGRESSED
    if any(of(r) == "noisy" for r in items):
        return EXIT_INCONCLUSIVE
    return EXIT_OK


def failure_text(result: Result) -> str:
    """How a check that fails the session says so (its pytest failure, its JUnit failure)."""
    return f"{result.outcome}: {result.message}"
