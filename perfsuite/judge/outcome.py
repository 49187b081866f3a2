"""The one rule that turns a judged result into its outcome.

Every place that shows or acts on a result (the pytest outcome, the terminal summary, the
Markdown summary, the HTML report, JUnit properties and ``perfsuite compare``) asks
:func:`of`; none of them decides on its own.  Outcomes, worst first:

* ``fail``: the best sample missed a floor taken from a datasheet figure, or a check's own
  expectation (e.g. a FLOP-count cross-check) did not hold;
  a floor missed while the run flagged its own evidence (foreign load, a throttled GPU) is
  ``noisy`` instead: a verdict never goes red on evidence the suite knows is tainted;
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

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from perfsuite.model import Crash, Result, RunRecord
from perfsuite.model.verdicts import CHOOSABLE as CHOOSABLE
from perfsuite.model.verdicts import ORDER as ORDER

DEFAULT_FAIL_ON = frozenset({"fail", "regressed"})

# The exit statuses of the plugin and of every ``perfsuite`` command: one table, pytest's
# numbers (a plugin cannot renumber pytest's own 2, 3 and 4, so the commands took them).
EXIT_OK = 0  # passed or measured: nothing failed, nothing left undecided
EXIT_REGRESSED = 1  # a regression, a missed floor, a crashed check, a node to drain
EXIT_INTERRUPTED = 2  # SIGINT, SIGTERM or SIGHUP; what was decided is written first
EXIT_INTERNAL = 3  # a defect in perfsuite itself (a traceback)
EXIT_USAGE = 4  # a bad option, argument or input file; nothing was measured or written
EXIT_NOTHING_COLLECTED = 5  # pytest's own: no test selected (CI scripts often let it pass)
EXIT_INCONCLUSIVE = 6  # nothing failed, but a verdict asked for was not decided


def of(result: Result) -> str:
    """The outcome of one judged result."""
    floor, base = result.floor, result.baseline
    if floor_missed(result) and not tainted(result):
        return "fail"
    if any(not e.passed for e in result.expectations):
        return "fail"
    if base.verdict == "regressed":
        applied = result.waiver is not None and result.waiver.status == "applied"
        return "waived" if applied else "regressed"
    if base.verdict == "noisy" or floor_missed(result):  # a floor missed under load
        return "noisy"
    if floor.verdict == "fail":
        return "floor-warning"
    if floor.verdict == "no-reference" and base.verdict == "new":
        return "no-reference"
    return "pass"


def floor_missed(result: Result) -> bool:
    """Whether the best sample missed a floor taken from a datasheet figure.

    Not an estimate of a peak, and not an advisory rule of thumb: missing those is a warning.
    """
    f = result.floor
    return f.verdict == "fail" and not f.estimated and not f.advisory


def tainted(result: Result) -> bool:
    """Whether the run flagged its own evidence (foreign load, throttling) for this check."""
    return bool(result.noise_flags)


def judged(result: Result) -> bool:
    """Whether a floor figure or a baseline judged the result, or its own expectation failed.

    A check's own expectation (a FLOP-count cross-check) judges its accounting, not its
    speed: one that holds does not make a measured-only result judged, but one that fails
    is a verdict (``fail``), shown as one under every ``--perf-fail-on``.  So the judged
    results and the ``no-reference`` outcomes add up to the results.
    """
    return (
        result.floor.verdict in ("pass", "fail")
        or result.baseline.verdict != "new"
        or any(not e.passed for e in result.expectations)
    )


def estimate_only(result: Result) -> bool:
    """Whether a judged result was judged only against an estimated peak."""
    return result.floor.estimated and result.baseline.verdict == "new"


def counts(results: Iterable[Result]) -> Counter[str]:
    """How many results have each outcome."""
    return Counter(of(r) for r in results)


def rank(result: Result) -> int:
    """Severity rank of a result's outcome: 0 is the worst."""
    return ORDER.index(of(result))


def distance(result: Result) -> float:
    """How far a result is from what it was judged against (log scale, 0 when unknown).

    A floor miss: how far its best sample fell short of the floor; anything else: how far
    its median moved from the baseline's, either way.
    """
    floor, base = result.floor, result.baseline
    if of(result) in ("fail", "floor-warning") and floor.value and floor.threshold:
        return abs(math.log(floor.value / floor.threshold))
    if base.ratio:
        return abs(math.log(base.ratio))
    return 0.0


def worst_first(results: Iterable[Result]) -> list[Result]:
    """Results by outcome, worst first, and within one outcome the farthest moved first."""
    return sorted(results, key=lambda r: (rank(r), -distance(r), r.id))


def above_estimate(result: Result) -> bool:
    """Whether the best sample beat an estimated peak: a finding about the estimate.

    A host's clock under turbo, or a kernel that does less work than the convention counts
    (Winograd's convolutions), reads above an estimate; the reading stands, the estimate is
    what it questions.
    """
    f = result.floor
    judged = f.verdict in ("pass", "no-reference")  # no-reference: above its ceiling
    return judged and f.estimated and (f.fraction_of_peak or 0.0) > 1.0


@dataclass(frozen=True)
class SessionVerdict:
    """A session's outcome under its ``--perf-fail-on``, as every view states it."""

    # "failed": a selected check crashed, or an outcome --perf-fail-on names (whether or
    # not the run completed); "interrupted": the run stopped before every selected check
    # ran, and what ran did not fail (it proves nothing about the rest);
    # "inconclusive": none, but a check is noisy; "empty": no check produced a result;
    # "measured": checks were measured, but none had a floor figure or a baseline to be
    # judged against (expectations that held do not count: they judge the accounting);
    # "passed": at least one check was judged, and none of the above.  Regressions
    # --perf-fail-on tolerates are named in every state.
    state: str
    counts: Counter[str]
    failing: list[Result] = field(default_factory=list)  # worst first
    noisy: list[Result] = field(default_factory=list)  # worst first, when they do not fail
    # Regressions and floor failures that --perf-fail-on does not count as failing.
    tolerated: list[Result] = field(default_factory=list)
    total: int = 0
    crashed: tuple[Crash, ...] = ()  # selected checks that produced no result
    incomplete: str = ""  # why the run stopped early (an interrupt)
    judged: int = 0  # results judged against a floor or a baseline, or failing a count
    no_floor: bool = False  # "measured": no result had a floor figure
    no_baseline: bool = False  # "measured": no result had a baseline
    # "passed": every judged result was judged only against an estimated floor
    estimates_only: bool = False

    @property
    def exit_code(self) -> int:
        """The exit status of this verdict, for ``perfsuite compare`` and the plugin alike."""
        return {
            "failed": EXIT_REGRESSED,
            "inconclusive": EXIT_INCONCLUSIVE,
            "empty": EXIT_INCONCLUSIVE,
            "interrupted": EXIT_INCONCLUSIVE,  # the record's run stopped early
        }.get(self.state, EXIT_OK)

    @property
    def failed_count(self) -> int:
        """How many checks fail the session (a check that both failed and crashed once)."""
        return len({c.id for c in self.crashed} | {r.id for r in self.failing})


def session_verdict(
    results: Sequence[Result],
    fail_on: Iterable[str] = DEFAULT_FAIL_ON,
    *,
    crashed: Sequence[Crash] = (),
    incomplete: str = "",
) -> SessionVerdict:
    """The one session verdict (see :class:`SessionVerdict` and :func:`exit_code`).

    PASSED only when every selected check produced a result and at least one was judged:
    a crashed check fails the session, an interrupted run proves nothing, and a run that
    judged nothing is MEASURED (exit 0), never a pass.
    """
    ordered = worst_first(results)
    chosen = set(fail_on)
    failing_ = [r for r in ordered if of(r) in chosen]
    noisy = [r for r in ordered if of(r) == "noisy" and "noisy" not in chosen]
    tolerated = [r for r in ordered if of(r) in ("fail", "regressed") and of(r) not in chosen]
    if failing_ or crashed:  # a failure found is a failure, however the run ended
        state = "failed"
    elif incomplete:
        state = "interrupted"
    elif not ordered:
        state = "empty"
    elif noisy:
        state = "inconclusive"
    else:
        state = "passed" if any(judged(r) for r in ordered) else "measured"
    return SessionVerdict(
        state,
        counts(results),
        failing_,
        noisy,
        tolerated,
        total=len(ordered),
        crashed=tuple(crashed),
        incomplete=incomplete,
        judged=sum(judged(r) for r in ordered),
        no_floor=all(r.floor.verdict not in ("pass", "fail") for r in ordered),
        no_baseline=all(r.baseline.verdict == "new" for r in ordered),
        estimates_only=all(estimate_only(r) for r in ordered if judged(r)),
    )


def record_verdict(
    record: RunRecord, fail_on: Iterable[str] | None = None, results: Sequence[Result] | None = None
) -> SessionVerdict:
    """The session verdict of a run record, under its own ``--perf-fail-on`` unless given.

    ``results``: the ones to judge by, where a view shows a part of the record (compare).
    """
    chosen = fail_on if fail_on is not None else record.settings.get("fail_on") or DEFAULT_FAIL_ON
    return session_verdict(
        list(record.results if results is None else results),
        chosen,
        crashed=record.crashed,
        incomplete=record.incomplete,
    )


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
