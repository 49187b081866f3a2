"""Outcomes that change once the session's whole family is in.

Each check's pytest report is written when its test ends; its significance is final only at
the end of the session (:func:`perfsuite.judge.finalize`).  A check whose change only became
significant then is regressed (or improved) in the run record, the reports and the exit
status; here the pytest report and JUnit XML that were written before are brought in line,
so that every view counts the same outcomes.
"""

from __future__ import annotations

import contextlib
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any

import pytest

from perfsuite.model import Result


def amend(config: pytest.Config, late: Mapping[str, Result], fail_on: frozenset[str]) -> None:
    """Fail the tests whose new outcome fails the session; update their JUnit properties."""
    if not late:
        return
    failing = {node_id: r for node_id, r in late.items() if r.outcome in fail_on}
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    stats: dict[str, list[Any]] = getattr(terminal, "stats", {})
    for report in list(stats.get("passed", ())):
        result = failing.get(report.nodeid)
        if result is None or report.when != "call":
            continue
        stats["passed"].remove(report)
        report.outcome = "failed"
        report.longrepr = f"{result.outcome}: {result.message}"
        stats.setdefault("failed", []).append(report)
    # JUnit XML is written after this hook; its test cases were frozen when they ended.
    with contextlib.suppress(ImportError, AttributeError, KeyError, TypeError):
        _amend_junit(config, late, failing)


def _amend_junit(
    config: pytest.Config, late: Mapping[str, Result], failing: Mapping[str, Result]
) -> None:
    from _pytest import junitxml

    xml = config.stash.get(junitxml.xml_key, None)
    if xml is None:
        return
    prefix = getattr(xml, "prefix", None)

    def key(node_id: str) -> tuple[str, str]:
        names = junitxml.mangle_test_address(node_id)
        classnames = ([prefix] if prefix else []) + names[:-1]
        return ".".join(classnames), names[-1]

    wanted = {key(node_id): node_id for node_id in late}
    for reporter in xml.node_reporters_ordered:
        case: ET.Element = reporter.to_xml()
        node_id = wanted.get((case.get("classname", ""), case.get("name", "")))
        if node_id is None:
            continue
        result = late[node_id]
        for prop in case.iter("property"):
            if prop.get("name") == "perf_outcome":
                prop.set("value", result.outcome)
            if prop.get("name") == "perf_baseline":
                prop.set("value", result.baseline.verdict)
        if node_id in failing and case.find("failure") is None:
            ET.SubElement(case, "failure", message=f"{result.outcome}: {result.message}")
            xml.stats["passed"] -= 1
            xml.stats["failure"] += 1
