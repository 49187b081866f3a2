"""A Markdown summary of a run, for CI step summaries (e.g. ``$GITHUB_STEP_SUMMARY``)."""

from __future__ import annotations

import html as html_text
from pathlib import Path

from perfsuite import outcome, stats
from perfsuite.model import RunRecord


def _cell(text: str) -> str:
    """Table-cell text: HTML escaped (no raw tags reach a CI summary), pipes escaped."""
    return html_text.escape(text, quote=False).replace("|", "\\|").replace("\n", " ")


def render_markdown(record: RunRecord, html: Path | None = None) -> str:
    """Counts, the checks that need attention first, then every check."""
    outcomes = outcome.counts(record.results)
    fail_on = record.settings.get("fail_on") or outcome.DEFAULT_FAIL_ON
    verdict = outcome.session_verdict(record.results, fail_on)
    headline = f"**{verdict.headline}**"
    if verdict.state == "failed":
        headline += f" Worst: {_cell(verdict.named())}."
    lines = [
        f"## perfsuite: {_cell(str(record.hardware_profile.get('name')))} · run "
        f"`{_cell(record.run_id)}`",
        "",
        f"{headline} Outcomes: "
        + ", ".join(f"{outcomes[k]} {k}" for k in outcome.ORDER if outcomes.get(k)),
        "",
        "| check | value | % of peak | change [95% CI] | floor | baseline | outcome |",
        "|---|---|---|---|---|---|---|",
    ]

    for r in outcome.worst_first(record.results):
        b = r.baseline
        change = "" if b.ratio is None else f"{b.ratio - 1:+.1%}"
        if b.ci_low is not None and b.ci_high is not None:
            change += f" [{b.ci_low - 1:+.1%}, {b.ci_high - 1:+.1%}]"
        peak = "" if r.floor.fraction_of_peak is None else f"{r.floor.fraction_of_peak:.1%}"
        peak += " (est.)" if peak and r.floor.estimated else ""
        best = stats.best(r.samples, r.higher_is_better)
        lines.append(
            f"| {_cell(r.id.rsplit('::', 1)[-1])} | {best:.4g} {_cell(r.unit)} | {peak} | {change} "
            f"| {outcome.floor_label(r)} | {b.verdict} | {outcome.of(r)} |"
        )
    if html is not None:
        lines += ["", f"HTML report: `{html}`"]
    return "\n".join(lines) + "\n"
