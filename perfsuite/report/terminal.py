"""The end-of-session terminal summary: one line per check."""

from __future__ import annotations

from collections.abc import Iterable

from perfsuite import stats
from perfsuite.hardware.profile import HardwareProfile
from perfsuite.model import Result


def _short_id(node_id: str) -> str:
    return node_id.rsplit("::", 1)[-1]


def _value(result: Result) -> str:
    best = stats.best(result.samples, result.higher_is_better)
    return f"{best:.4g} {result.unit}"


def _peak(result: Result) -> str:
    floor = result.floor
    if floor.fraction_of_peak is None:
        return "-"
    return f"{floor.fraction_of_peak:.1%}" + (" (est.)" if floor.estimated else "")


def _change(result: Result) -> str:
    ratio = result.baseline.ratio
    return "-" if ratio is None else f"{ratio - 1:+.1%}"


def format_result_lines(profile: HardwareProfile, results: Iterable[Result]) -> list[str]:
    """Lines for the summary: check, metric, best value, % of peak, change, verdicts."""
    rows = [("check", "metric", "best", "% of peak", "vs baseline", "floor", "baseline", "outcome")]
    counts: dict[str, int] = {}
    for r in results:
        rows.append(
            (
                _short_id(r.id),
                r.metric,
                _value(r),
                _peak(r),
                _change(r),
                r.floor.verdict,
                r.baseline.verdict,
                r.outcome,
            )
        )
        for verdict in (r.floor.verdict, r.baseline.verdict):
            counts[verdict] = counts.get(verdict, 0) + 1
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    estimated = f"; estimated: {', '.join(sorted(profile.estimated))}" if profile.estimated else ""
    lines = [f"profile {profile.name}: {profile.description}{estimated}"]
    lines += [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    lines.append("verdicts: " + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
    if counts.get("no-reference"):
        lines.append(
            f"note: {counts['no-reference']} result(s) had no reference figure in profile "
            f"{profile.name!r}; their floors were not judged"
        )
    return lines
