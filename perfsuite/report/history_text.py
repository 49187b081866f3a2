"""``perfsuite history`` in words: the table, each change point and what changed, the summary.

The trends themselves (levels, change points, their significance and attribution) come
typed from :mod:`perfsuite.judge.trends`; every sentence about them is written here.
"""

from __future__ import annotations

import itertools
import shlex
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from perfsuite.judge import changepoints as cps
from perfsuite.judge.attribution import Attribution, PackageMove
from perfsuite.judge.trends import NIGHTS_STEPS, Found, Settings, Trend
from perfsuite.model import RunRecord
from perfsuite.report.terminal import format_table, printable, short_id

JSON_SCHEMA_VERSION = 1  # of ``perfsuite history --json`` (docs/history.md)

NOTHING_CHANGED = "nothing in the recorded environment changed"
SPARKS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float]) -> str:
    """A one-line chart of a series."""
    lo, hi = min(values), max(values)
    if hi == lo:
        return SPARKS[3] * len(values)
    return "".join(SPARKS[round((v - lo) / (hi - lo) * (len(SPARKS) - 1))] for v in values)


def spark_of(values: Sequence[float], width: int = 60) -> str:
    """:func:`sparkline` of every value, each character the median of its share of runs."""
    if len(values) <= width:
        return sparkline(values)
    edges = [round(i * len(values) / width) for i in range(width + 1)]
    return sparkline([float(np.median(values[a:b])) for a, b in itertools.pairwise(edges)])


def _nights_text(nights: Sequence[int | None]) -> str:
    return "/".join("-" if n is None else str(n) for n in nights)


def table(trends_: Sequence[Trend], short: Any) -> list[tuple[str, ...]]:
    """The terminal table: one row per check, over the runs shown."""
    steps = "/".join(f"{s:.0%}" for s in NIGHTS_STEPS)
    rows: list[tuple[str, ...]] = [
        ("check", "runs", "first", "last", "trend", f"nights {steps}", "change points")
    ]
    for t in trends_:
        s = t.series
        values = [p.median for p in s.points]
        notes = [f"run {f.run}: {f.change.ratio - 1:+.1%} {f.change.direction}" for f in t.changes]
        if t.verdict == "unknown":
            notes = [f"too few runs to judge (fewer than {cps.MIN_POINTS})"]
        rows.append(
            (
                short(s.id),
                str(len(values)),
                f"{values[0]:.4g} {s.unit}",
                f"{values[-1]:.4g} {s.unit}",
                spark_of(values),
                _nights_text(t.nights),
                "; ".join(notes) or "-",
            )
        )
    return rows


def details(trends_: Sequence[Trend], short: Any) -> list[str]:
    """Each change point: size, interval, p, the run it starts at, and what changed."""
    out = []
    for t in trends_:
        for f in t.changes:
            c = f.change
            out.append(
                f"{c.direction}: {short(t.series.id)} at run {f.run} ({f.run_id}, {f.created}): "
                f"{c.ratio - 1:+.1%} (95% CI {c.low - 1:+.1%} to {c.high - 1:+.1%}, "
                f"p {c.p_value:.2g}), {c.before:.4g} -> {c.after:.4g} {t.series.unit}"
            )
            out += [f"    {line}" for line in attribution_lines(f.attribution)]
        if t.outliers:
            runs = ", ".join(str(r) for r in t.outliers[:8])
            more = f" and {len(t.outliers) - 8} more" if len(t.outliers) > 8 else ""
            out.append(f"outliers: {short(t.series.id)}: run(s) {runs}{more} set aside")
    return out


def text(
    profile: str,
    shown: Sequence[tuple[int, RunRecord]],
    total_runs: int,
    trends_: Sequence[Trend],
    failed: Sequence[str],
    code: int,
) -> list[str]:
    """The terminal output: the range, the table, each change point, the summary."""
    (first, a), (last, b) = shown[0], shown[-1]
    out = [
        f"profile {profile}: {len(shown)} runs (runs {first}-{last} of {total_runs}), "
        f"{a.created} .. {b.created}"
    ]
    out += format_table(table(trends_, short_id))
    out += [printable(line) for line in details(trends_, short_id)]
    counts = Counter(t.verdict for t in trends_)
    summary = ", ".join(
        f"{counts[k]} {k}" for k in ("regressed", "improved", "unknown", "steady") if counts[k]
    )
    fails = f"; fails on {', '.join(failed)}" if failed else ""
    return [*out, f"\nhistory: {summary or 'no check'}{fails} (exit {code})"]


def history_json(
    profile: str,
    runs: Sequence[tuple[int, RunRecord]],
    trends_: Sequence[Trend],
    settings: Settings,
    verdict: str,
    exit_status: int,
    problems: Sequence[str],
) -> dict[str, Any]:
    """The ``--json`` document (its schema is in docs/history.md)."""
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "profile": profile,
        "runs": len(runs),
        "first_run": runs[0][0] if runs else None,
        "last_run": runs[-1][0] if runs else None,
        "from": runs[0][1].created if runs else None,
        "to": runs[-1][1].created if runs else None,
        "settings": settings.to_json(),
        "verdict": verdict,
        "exit_status": exit_status,
        "skipped_records": list(problems),
        "checks": [_trend_json(t) for t in trends_],
    }


def _trend_json(t: Trend) -> dict[str, Any]:
    s = t.series
    outliers = set(t.outliers)
    return {
        "id": s.id,
        "unit": s.unit,
        "higher_is_better": s.higher_is_better,
        "verdict": t.verdict,
        "spread": t.spread,
        "nights_to_detect": {
            f"{step:g}": n for step, n in zip(NIGHTS_STEPS, t.nights, strict=True)
        },
        "points": [
            {
                "run": p.run,
                "run_id": p.run_id,
                "created": p.created,
                "value": p.median,
                "outlier": p.run in outliers,
            }
            for p in s.points
        ],
        "changes": [_found_json(f) for f in t.changes],
    }


def _found_json(f: Found) -> dict[str, Any]:
    c, a = f.change, f.attribution
    return {
        "run": f.run,
        "run_id": f.run_id,
        "created": f.created,
        "direction": c.direction,
        "before": c.before,
        "after": c.after,
        "ratio": c.ratio,
        "interval": [c.low, c.high],
        "p_value": c.p_value,
        "attribution": {
            "before_run_id": a.before_run,
            "after_run_id": a.after_run,
            "nothing_changed": not a.changes,
            "changes": [{"key": e.key, "old": e.old, "new": e.new} for e in a.changes],
            "bisect": bisect_commands(a),
            "notes": attribution_notes(a),
        },
    }


def attribution_lines(a: Attribution) -> list[str]:
    """What changed at a change point as short lines, for the terminal and the page."""
    if not a.changes:
        return [f"{NOTHING_CHANGED} ({a.before_run} -> {a.after_run})"]
    out = [f"{c.key}: {c.old!r} -> {c.new!r}" for c in a.changes]
    return out + [f"next: {cmd}" for cmd in bisect_commands(a)] + attribution_notes(a)


def bisect_commands(a: Attribution) -> list[str]:
    """The ``perfsuite bisect`` command for each package that moved up at a regression."""
    return [bisect_command(m, a.check) for m in a.bisect]


def bisect_command(move: PackageMove, check: str) -> str:
    """The command that finds the first release of ``move.package`` that slowed ``check``."""
    return (
        f"perfsuite bisect --package {shlex.quote(move.package)} "
        f"--good {shlex.quote(str(move.old))} --bad {shlex.quote(str(move.new))} "
        f"-- {shlex.quote(check)}"
    )


def attribution_notes(a: Attribution) -> list[str]:
    """Why a package that moved at a regression has no bisect command."""
    return [
        f"{m.package} went from {m.old} to {m.new}: bisect searches an upgrade for a "
        "slowdown; run perfsuite ab on the two stacks instead"
        for m in a.not_bisected
    ]
