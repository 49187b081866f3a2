"""A Markdown summary of a run, for CI step summaries (e.g. ``$GITHUB_STEP_SUMMARY``)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from perfsuite import stats
from perfsuite.model import Result, RunRecord

# Severity order: what needs attention first.
RANK = {"regressed": 0, "noisy": 2, "improved": 3}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(record: RunRecord, html: Path | None = None) -> str:
    """Counts, the checks that need attention first, then every check."""
    verdicts = Counter(r.baseline.verdict for r in record.results)
    floors = Counter(r.floor.verdict for r in record.results)
    regressed = verdicts.get("regressed", 0) + floors.get("fail", 0)
    lines = [
        f"## perfsuite: {record.hardware_profile.get('name')} · run `{record.run_id}`",
        "",
        (
            f"**{regressed} check(s) regressed or missed their floor.**"
            if regressed
            else "**No regressions.**"
        )
        + " "
        + ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items())),
        "",
        "| check | value | % of peak | change [95% CI] | floor | baseline |",
        "|---|---|---|---|---|---|",
    ]

    def rank(r: Result) -> tuple[int, str]:
        if r.floor.verdict == "fail" and not r.floor.estimated:
            return (1, r.id)
        return (RANK.get(r.baseline.verdict, 4), r.id)

    ordered = sorted(record.results, key=rank)
    for r in ordered:
        b = r.baseline
        change = "" if b.ratio is None else f"{b.ratio - 1:+.1%}"
        if b.ci_low is not None and b.ci_high is not None:
            change += f" [{b.ci_low - 1:+.1%}, {b.ci_high - 1:+.1%}]"
        peak = "" if r.floor.fraction_of_peak is None else f"{r.floor.fraction_of_peak:.1%}"
        best = stats.best(r.samples, r.higher_is_better)
        lines.append(
            f"| {_cell(r.id.rsplit('::', 1)[-1])} | {best:.4g} {r.unit} | {peak} | {change} "
            f"| {r.floor.verdict} | {b.verdict} |"
        )
    if html is not None:
        lines += ["", f"HTML report: `{html}`"]
    return "\n".join(lines) + "\n"
