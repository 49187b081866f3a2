"""Outcomes that change once the session's whole family is in.

Each check's pytest report is written when its test ends; its significance is final only at
the end of the session (:func:`perfsuite.judge.verdict.finalize`).  There a check left ``noisy``
(beyond its tolerance, not yet significant) can become ``regressed`` or ``improved``; it
never goes the other way.  The run record, the reports and the exit status are written
after that; here the pytest reports and the JUnit XML file that were written before are
brought in line, so that every view counts the same outcomes:

* a passed check whose new outcome fails the session (``--perf-fail-on``) becomes a failure;
* a check that failed only for being ``noisy`` (``--perf-fail-on noisy``) and whose new
  outcome does not fail the session becomes a pass;
* a check whose new outcome is a waived regression becomes an expected failure (xfail), as
  it would have been had it been decided when its test ran.

The session's failure count and exit status follow the moved reports
(:func:`amend_session`, from what :func:`amend_reports` says of how many failures changed).

Why rewrite rather than decide before pytest writes: pytest offers no hook between a test's
end and its report.  ``pytest_runtest_logreport`` hands the report to every plugin at once:
the terminal counts it and ``junitxml`` appends its XML element then, long before the
session's family is complete.  pytest-benchmark avoids this by never failing a test for its
figures and failing only the session; perfsuite's users asked for the failing check named
in pytest's summary and in CI's JUnit view, so the four rewrites stay, here only, each with
its test in ``tests/test_late.py`` and ``tests/test_verdict_rules.py``: the terminal's
counts and reports (:func:`amend_reports`), the session's failure count and exit status
(:func:`amend_session`), the JUnit elements (:func:`amend_junit`), and the JUnit session
verdict (:func:`state_junit`).
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from perfsuite.judge import outcome
from perfsuite.model import Result
from perfsuite.report.headline import failure_text, headline
from perfsuite.store.files import write_text_atomic

WAS = "noisy"  # the only outcome a late decision changes


def _failed_for_noise(outcome_then: object, fail_on: frozenset[str]) -> bool:
    """Whether a failure was perfsuite's own, for the ``noisy`` outcome the check had then.

    ``outcome_then`` is the ``perf_outcome`` property the check recorded when it was judged.
    A check fails at once for an outcome in ``fail_on``, so a failed check whose outcome was
    ``noisy`` (and ``noisy`` fails) failed for that, not for an assertion of its own.
    """
    return outcome_then == WAS and WAS in fail_on


def _recorded_outcome(properties: Sequence[tuple[str, object]]) -> object:
    """The ``perf_outcome`` among a report's user properties (None when it has none)."""
    return next((value for name, value in properties if name == "perf_outcome"), None)


def pytest_state(result: Result, fail_on: frozenset[str]) -> str:
    """How pytest shows a result: ``failed`` (it fails the session), ``xfailed`` or ``passed``."""
    if result.outcome in fail_on:
        return "failed"
    return "xfailed" if result.outcome == "waived" else "passed"


def amend_reports(
    config: pytest.Config, late: Mapping[str, Result], fail_on: frozenset[str]
) -> int:
    """Move the call reports of checks whose outcome changed; the change in failed reports.

    A report is moved between passed, failed and xfailed (a regression with a waiver) as the
    final outcome says.  A failed report moves only if it failed for being noisy.
    """
    if not late:
        return 0
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    stats: dict[str, list[Any]] = getattr(terminal, "stats", {})
    moved = 0
    for report in list(stats.get("passed", ())) + list(stats.get("failed", ())):
        result = late.get(report.nodeid)
        if result is None or report.when != "call":
            continue
        have, want = report.outcome, pytest_state(result, fail_on)
        then = _recorded_outcome(getattr(report, "user_properties", ()))
        if want == have or (have == "failed" and not _failed_for_noise(then, fail_on)):
            continue
        stats[have].remove(report)
        report.longrepr = None
        if want == "failed":
            report.outcome = "failed"
            report.longrepr = failure_text(result)
            moved += 1
        elif want == "xfailed":
            report.outcome = "skipped"
            report.wasxfail = result.message
        else:
            report.outcome = "passed"
        moved -= have == "failed"
        stats.setdefault(want, []).append(report)
    return moved


def amend_session(session: pytest.Session, moved: int, fails: bool) -> None:
    """The session's failure count and exit status, after :func:`amend_reports` moved reports.

    ``moved``: how many more reports failed (fewer where negative); ``fails``: whether
    perfsuite's own evidence fails the session (a failing outcome, a crashed check, an
    error, a baseline that could not be saved).  A session that fails that way exits
    ``TESTS_FAILED`` even where every pytest test passed; one whose only failures were noisy
    checks the whole family decided otherwise exits ``OK``, unless ``-x`` or ``--maxfail``
    stopped it (the checks it never ran stay unknown).
    """
    session.testsfailed += moved
    if fails:
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    elif (
        moved < 0
        and session.testsfailed <= 0
        and session.exitstatus == pytest.ExitCode.TESTS_FAILED
        and not (session.shouldfail or session.shouldstop)
    ):
        session.exitstatus = pytest.ExitCode.OK


def junit_path(config: pytest.Config) -> Path | None:
    """Where pytest writes its JUnit XML (``--junitxml``), resolved as pytest resolves it."""
    xmlpath = getattr(config.option, "xmlpath", None)
    if not xmlpath:
        return None
    return Path(os.path.normpath(os.path.abspath(os.path.expanduser(os.path.expandvars(xmlpath)))))


def junit_address(node_id: str, prefix: str | None = None) -> tuple[str, str]:
    """The (classname, name) under which pytest's JUnit XML lists a test.

    As pytest does: the file path is cut off at the first ``::``, the parameters at the
    first ``[`` of the rest (they may hold ``::`` and ``/`` themselves).
    """
    path, _, tail = node_id.partition("::")
    name, bracket, params = tail.partition("[")
    names = [re.sub(r"\.py$", "", path.replace("/", ".")), *name.split("::")]
    if bracket:
        names[-1] += f"[{params}"
    return ".".join(([prefix] if prefix else []) + names[:-1]), names[-1]


def amend_junit(
    path: Path, late: Mapping[str, Result], fail_on: frozenset[str], prefix: str | None = None
) -> int:
    """Rewrite a JUnit XML file for outcomes decided after its test cases were written.

    Updates each late check's ``perf_outcome`` and ``perf_baseline`` properties, adds a
    ``<failure>`` where the new outcome fails the session (or drops the one it had for being
    noisy where it no longer does), marks a waived regression skipped as an xfail, and keeps
    the suite's failure and skip counts in step.  Returns
    how many test cases changed; a missing or unreadable file is left alone.
    """
    if not late:
        return 0
    try:
        tree = ET.parse(path)
    except (OSError, ET.ParseError):
        return 0
    wanted = {junit_address(node_id, prefix): r for node_id, r in late.items()}
    changed = 0
    for suite in tree.iter("testsuite"):
        failures = int(suite.get("failures", "0"))
        skipped = int(suite.get("skipped", "0"))
        for case in suite.iter("testcase"):
            result = wanted.get((case.get("classname", ""), case.get("name", "")))
            if result is None:
                continue
            changed += 1
            then = next(
                (p.get("value") for p in case.iter("property") if p.get("name") == "perf_outcome"),
                None,
            )
            for prop in case.iter("property"):
                if prop.get("name") == "perf_outcome":
                    prop.set("value", result.outcome)
                if prop.get("name") == "perf_baseline":
                    prop.set("value", result.baseline.verdict)
            failure = case.find("failure")
            if result.outcome in fail_on and failure is None:
                added = ET.SubElement(case, "failure", message=failure_text(result))
                added.text = result.message
                failures += 1
            elif (
                result.outcome not in fail_on
                and failure is not None
                and _failed_for_noise(then, fail_on)
            ):
                case.remove(failure)
                failures -= 1
            if pytest_state(result, fail_on) == "xfailed" and case.find("skipped") is None:
                # As pytest writes an expected failure.
                ET.SubElement(case, "skipped", type="pytest.xfail", message=result.message)
                skipped += 1
        suite.set("failures", str(failures))
        suite.set("skipped", str(skipped))
    if changed:
        _write(path, tree)
    return changed


def state_junit(path: Path, verdict: outcome.SessionVerdict) -> bool:
    """Put the session's verdict on each test suite of a JUnit XML file, as properties.

    ``perfsuite_verdict`` is the state (passed, failed, inconclusive, empty, interrupted)
    and ``perfsuite_headline`` the line the terminal ends with, so a CI system that reads
    only JUnit sees an interrupted or crashed run for what it is.  A missing or unreadable
    file is left alone.
    """
    try:
        tree = ET.parse(path)
    except (OSError, ET.ParseError):
        return False
    for suite in tree.iter("testsuite"):
        props = suite.find("properties")
        if props is None:
            props = ET.Element("properties")
            suite.insert(0, props)
        for name, value in (
            ("perfsuite_verdict", verdict.state),
            ("perfsuite_headline", headline(verdict)),
        ):
            for old in [p for p in props.iter("property") if p.get("name") == name]:
                props.remove(old)
            ET.SubElement(props, "property", name=name, value=value)
    _write(path, tree)
    return True


def _write(path: Path, tree: ET.ElementTree[ET.Element[str]]) -> None:
    """Write a JUnit XML tree back, with the declaration pytest writes."""
    text = '<?xml version="1.0" encoding="utf-8"?>' + ET.tostring(
        tree.getroot(), encoding="unicode"
    )
    write_text_atomic(path, text)
