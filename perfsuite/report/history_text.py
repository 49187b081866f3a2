"""``perfsuite history`` in words: the table, each change point and what changed, the summary.

The trends themselves (levels, change points, their significance and attribution) come
typed from :mod:`perfsuite.judge.trends`; every sentence about them is written here.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from perfsuite.judge import changepoints as cps
from perfsuite.judge.trends import NIGHTS_STEPS, Trend
from perfsuite.model import RunRecord
from perfsuite.report.terminal import format_table, printable, short_id

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
            out += [f"    {line}" for line in f.attribution.lines()]
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
