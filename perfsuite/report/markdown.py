"""A Markdown summary of a run, for CI step summaries (e.g. ``$GITHUB_STEP_SUMMARY``)."""

from __future__ import annotations

import html as html_text
from pathlib import Path

from perfsuite.judge import outcome, stats
from perfsuite.model import RunRecord
from perfsuite.report import of_reference
from perfsuite.report.headline import floor_label, headline, worst_named
from perfsuite.report.notes import verdict_advice

# Characters that CommonMark and GitHub's tables, links, emphasis, code spans and
# strikethrough give a meaning; each is backslash-escaped (CommonMark allows this before any
# ASCII punctuation).  '&', '<' and '>' become HTML entities instead.
_MARKDOWN = frozenset("\\`*_{}[]()#+-.!|~:$@")


def _cell(text: str) -> str:
    """Text shown literally in Markdown: punctuation escaped, no raw HTML, one line."""
    flat = " ".join(str(text).split())
    escaped = "".join(f"\\{ch}" if ch in _MARKDOWN else ch for ch in flat)
    return html_text.escape(escaped, quote=False)


def short(node_id: str) -> str:
    """The test name with its parameters, without the file path."""
    return node_id.rsplit("::", 1)[-1]


def render_markdown(record: RunRecord, html: Path | None = None, baseline_notice: str = "") -> str:
    """Counts, the checks that need attention first, then every check."""
    outcomes = outcome.counts(record.results)
    fail_on = record.settings.get("fail_on") or outcome.DEFAULT_FAIL_ON
    verdict = outcome.record_verdict(record, fail_on)
    text = f"**{headline(verdict)}**"
    if verdict.state == "interrupted":
        text += f" {_cell(verdict.incomplete)}: this record is incomplete."
    if verdict.state in ("failed", "interrupted") and worst_named(verdict):
        text += f" Worst: {_cell(worst_named(verdict))}."
    advice = verdict_advice(verdict)
    if advice:
        text += f" {_cell(advice[0].upper() + advice[1:])}."
    if baseline_notice:
        text += f" **{_cell(baseline_notice[0].upper() + baseline_notice[1:])}**."
    lines = [
        f"## perfsuite: {_cell(str(record.hardware_profile.get('name')))} · run "
        f"{_cell(record.run_id)}",
        "",
        f"{text} Outcomes: "
        + ", ".join(f"{outcomes[k]} {k}" for k in outcome.ORDER if outcomes.get(k)),
        "",
        "| check | value | vs reference | change [95% CI] | floor | baseline | outcome |",
        "|---|---|---|---|---|---|---|",
    ]

    for r in outcome.worst_first(record.results):
        b = r.baseline
        change = "" if b.ratio is None else f"{b.ratio - 1:+.1%}"
        if b.ci_low is not None and b.ci_high is not None:
            change += f" [{b.ci_low - 1:+.1%}, {b.ci_high - 1:+.1%}]"
        peak = of_reference(r.floor)
        best = stats.best(r.samples, r.higher_is_better)
        lines.append(
            f"| {_cell(short(r.id))} | {best:.4g} {_cell(r.unit)} | {peak} | {change} "
            f"| {floor_label(r)} | {b.verdict} | {outcome.of(r)} |"
        )
    if verdict.crashed:
        lines += ["", f"{len(verdict.crashed)} selected check(s) crashed and produced no result:"]
        lines += [
            f"* {_cell(short(c.id))} ({_cell(c.phase)}): {_cell(c.message)}"
            for c in verdict.crashed
        ]
    if html is not None:
        lines += ["", f"HTML report: {_cell(str(html))}"]
    return "\n".join(lines) + "\n"
