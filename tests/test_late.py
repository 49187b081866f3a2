"""The rewrites of pytest's reports and counts that a family decided at session end needs.

:mod:`perfsuite.late` says why pytest offers no hook for them.  Each rewrite is tested here
on pytest's own objects' shapes (the terminal's ``stats``, a session's counts and exit
status), without a pytest run; ``tests/test_verdict_rules.py`` runs them end to end and
tests the JUnit rewrites.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from perfsuite import late
from perfsuite.model import Result

FIXTURES = Path(__file__).parent / "fixtures"
FAIL_ON = frozenset({"regressed", "fail"})


def _result(outcome: str) -> Result:
    data = json.loads((FIXTURES / "report-run.json").read_text())
    result = Result.from_dict(data["results"][0])
    return replace(result, outcome=outcome, message=f"{outcome} at session end")


def _report(nodeid: str, outcome: str, then: str = "noisy", when: str = "call") -> Any:
    return SimpleNamespace(
        nodeid=nodeid,
        when=when,
        outcome=outcome,
        longrepr="kept" if outcome == "failed" else None,
        user_properties=[("perf_outcome", then)],
    )


def _config(stats: dict[str, list[Any]]) -> Any:
    terminal = SimpleNamespace(stats=stats)
    return SimpleNamespace(pluginmanager=SimpleNamespace(get_plugin=lambda name: terminal))


def test_a_passed_check_that_regressed_at_session_end_moves_to_failed() -> None:
    result = _result("regressed")
    passed = _report(result.id, "passed")
    setup = _report(result.id, "passed", when="setup")
    stats: dict[str, list[Any]] = {"passed": [passed, setup]}
    assert late.amend_reports(_config(stats), {result.id: result}, FAIL_ON) == 1
    assert stats["failed"] == [passed] and stats["passed"] == [setup], "only the call report"
    assert passed.outcome == "failed" and passed.longrepr == "regressed: regressed at session end"


def test_a_check_failed_for_noise_passes_or_is_waived_and_other_failures_stay() -> None:
    fail_on = FAIL_ON | {"noisy"}
    same, waived, own = _result("ok"), _result("waived"), _result("ok")
    waived, own = replace(waived, id="w"), replace(own, id="own")
    noisy, noisy_waived = _report(same.id, "failed"), _report("w", "failed")
    asserted = _report("own", "failed", then="ok")  # failed by its own assertion
    stats: dict[str, list[Any]] = {"failed": [noisy, noisy_waived, asserted]}
    late_results = {same.id: same, "w": waived, "own": own}
    assert late.amend_reports(_config(stats), late_results, fail_on) == -2
    assert stats["passed"] == [noisy] and noisy.outcome == "passed" and noisy.longrepr is None
    assert stats["xfailed"] == [noisy_waived] and noisy_waived.outcome == "skipped"
    assert noisy_waived.wasxfail == "waived at session end"
    assert stats["failed"] == [asserted] and asserted.longrepr == "kept"
    assert late.amend_reports(_config({}), {}, fail_on) == 0


def _session(failed: int, status: pytest.ExitCode, stopped: bool = False) -> Any:
    return SimpleNamespace(
        testsfailed=failed, exitstatus=status, shouldfail=stopped, shouldstop=False
    )


@pytest.mark.parametrize(
    ("failed", "status", "moved", "fails", "stopped", "expect"),
    [
        # a check's outcome fails the session though every pytest test passed
        (0, pytest.ExitCode.OK, 0, True, False, (0, pytest.ExitCode.TESTS_FAILED)),
        # a report moved to failed
        (0, pytest.ExitCode.OK, 1, True, False, (1, pytest.ExitCode.TESTS_FAILED)),
        # every failure was noise the family decided otherwise
        (2, pytest.ExitCode.TESTS_FAILED, -2, False, False, (0, pytest.ExitCode.OK)),
        # ... but -x stopped the run: the checks it never ran stay unknown
        (1, pytest.ExitCode.TESTS_FAILED, -1, False, True, (0, pytest.ExitCode.TESTS_FAILED)),
        # a failure of the test's own is left failed
        (2, pytest.ExitCode.TESTS_FAILED, -1, False, False, (1, pytest.ExitCode.TESTS_FAILED)),
        # another exit status (interrupted, usage) is never turned into a pass or a failure
        (0, pytest.ExitCode.INTERRUPTED, 0, True, False, (0, pytest.ExitCode.INTERRUPTED)),
    ],
)
def test_the_session_count_and_exit_status_follow_the_moved_reports(
    failed: int,
    status: pytest.ExitCode,
    moved: int,
    fails: bool,
    stopped: bool,
    expect: tuple[int, pytest.ExitCode],
) -> None:
    session = _session(failed, status, stopped)
    late.amend_session(session, moved, fails)
    assert (session.testsfailed, session.exitstatus) == expect
