"""The end-of-session terminal summary: one line per check."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from perfsuite import stats
from perfsuite.hardware.profile import HardwareProfile
from perfsuite.model import Result


def format_table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligned columns, two spaces apart."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


def short_id(node_id: str) -> str:
    """The test name with its parameters, without the file path."""
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
    b = result.baseline
    if b.ratio is None:
        return "-"
    if b.ci_low is None or b.ci_high is None:
        return f"{b.ratio - 1:+.1%}"
    return f"{b.ratio - 1:+.1%} [{b.ci_low - 1:+.1%}, {b.ci_high - 1:+.1%}]"


def _baseline(result: Result) -> str:
    status = (result.waiver or {}).get("status")
    return f"{result.baseline.verdict} (waiver {status})" if status else result.baseline.verdict


def format_result_lines(profile: HardwareProfile, results: Iterable[Result]) -> list[str]:
    """Lines for the summary: check, metric, best value, % of peak, change, verdicts."""
    rows = [
        ("check", "metric", "best", "% of peak", "vs baseline [CI]", "floor", "baseline", "outcome")
    ]
    counts: dict[str, int] = {}
    notes: list[str] = []
    for r in results:
        waiver = r.waiver or {}
        if waiver.get("status") == "stale":
            notes.append(
                f"stale waiver: {short_id(r.id)} no longer regresses "
                f"(waiver {waiver['test']!r}: {waiver['reason']})"
            )
        elif waiver.get("status") == "expired":
            notes.append(
                f"expired waiver: {waiver['test']!r} expired on {waiver['expires']}; "
                f"{short_id(r.id)} was judged without it"
            )
        for flag in r.noise.get("flags", ()):
            notes.append(f"noise: {short_id(r.id)} measured {flag}")
        if r.baseline.verdict in ("regressed", "improved", "noisy"):
            notes.append(f"{r.baseline.verdict}: {short_id(r.id)}: {r.baseline.reason}")
        rows.append(
            (
                short_id(r.id),
                r.metric,
                _value(r),
                _peak(r),
                _change(r),
                r.floor.verdict
                + (" (est.)" if r.floor.estimated and r.floor.verdict == "fail" else ""),
                _baseline(r),
                r.outcome,
            )
        )
        for verdict in (r.floor.verdict, r.baseline.verdict):
            counts[verdict] = counts.get(verdict, 0) + 1
    estimated = f"; estimated: {', '.join(sorted(profile.estimated))}" if profile.estimated else ""
    lines = [f"profile {profile.name}: {profile.description}{estimated}"]
    lines += format_table(rows)
    lines.append("verdicts: " + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
    lines += notes
    if counts.get("no-reference"):
        lines.append(
            f"note: {counts['no-reference']} result(s) had no reference figure in profile "
            f"{profile.name!r}; their floors were not judged"
        )
    return lines
