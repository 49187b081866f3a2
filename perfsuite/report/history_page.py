"""``perfsuite history --html DIR``: a static site, one self-contained page per profile.

Each page holds a trend chart per check (inline SVG, drawn by matplotlib), with the level
of each segment, the outliers set aside, and each change point marked with its size; under
it, a table of the change points with their interval, p-value and attribution.  No script and
no external asset: the page opens from a file, an artifact store or a mail.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Sequence
from html import escape
from pathlib import Path
from typing import Any

from perfsuite import __version__
from perfsuite.judge import trends as hist
from perfsuite.model import RunRecord
from perfsuite.report.charts import figure, svg
from perfsuite.report.history_text import attribution_lines
from perfsuite.report.html import _environment
from perfsuite.store import records
from perfsuite.store.files import write_text_atomic

REGRESSED, IMPROVED, LEVEL = "#b3261e", "#1b7f3b", "#4a78b5"


def chart(t: hist.Trend) -> str:
    """A check's readings by run number: levels, outliers and change points marked."""
    pts = t.series.points
    runs = [p.run for p in pts]
    values = [p.median for p in pts]
    fig = figure(11.0, 2.6)
    ax = fig.add_subplot()
    outliers = set(t.outliers)
    ax.plot(runs, values, ".-", color="0.55", lw=0.8, ms=3, zorder=2)
    odd = [(p.run, p.median) for p in pts if p.run in outliers]
    if odd:
        ax.plot(*zip(*odd, strict=True), "x", color="#8a6d00", ms=6, zorder=3, label="outlier")
    bounds = [runs[0], *(f.run for f in t.changes), runs[-1] + 1]
    levels = [f.change.before for f in t.changes] + [
        t.changes[-1].change.after if t.changes else sorted(values)[len(values) // 2]
    ]
    for (a, b), level in zip(itertools.pairwise(bounds), levels, strict=True):
        ax.hlines(level, a, b - 1, color=LEVEL, lw=2, zorder=4)
    for f in t.changes:
        colour = REGRESSED if f.change.direction == "regressed" else IMPROVED
        ax.axvline(f.run - 0.5, color=colour, lw=1.2, ls="--", zorder=1)
        ax.annotate(
            f"run {f.run}: {f.change.ratio - 1:+.1%}",
            (f.run - 0.5, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(3, -12),
            textcoords="offset points",
            color=colour,
            fontsize=9,
        )
    ax.set_xlabel("run (of the profile)")
    ax.set_ylabel(t.series.unit)
    ax.grid(alpha=0.3)
    return svg(fig)


def _change_rows(t: hist.Trend) -> list[dict[str, Any]]:
    rows = []
    for f in t.changes:
        c = f.change
        rows.append(
            {
                "run": f.run,
                "created": f.created,
                "direction": c.direction,
                "size": f"{c.ratio - 1:+.1%}",
                "interval": f"{c.low - 1:+.1%} to {c.high - 1:+.1%}",
                "p": f"{c.p_value:.2g}",
                "level": f"{c.before:.4g} -> {c.after:.4g} {t.series.unit}",
                "why": attribution_lines(f.attribution),
            }
        )
    return rows


def _nights(t: hist.Trend) -> str:
    return ", ".join(
        f"{step:.0%}: {'more nights than recorded' if n is None else f'{n} nights'}"
        for step, n in zip(hist.NIGHTS_STEPS, t.nights, strict=True)
    )


def page(
    profile: str,
    shown: Sequence[tuple[int, RunRecord]],
    total_runs: int,
    trends: Sequence[hist.Trend],
    settings: hist.Settings,
    profiles: Sequence[str] = (),
) -> str:
    """One profile's history page."""
    order = {"regressed": 0, "improved": 1, "unknown": 2, "steady": 3}
    ranked = sorted(trends, key=lambda t: (order[t.verdict], t.series.id))
    counts = Counter(t.verdict for t in trends)
    return str(
        _environment()
        .get_template("history.html.j2")
        .render(
            profile=profile,
            profiles=profiles,
            first_run=shown[0][0],
            last_run=shown[-1][0],
            total_runs=total_runs,
            first_created=shown[0][1].created,
            last_created=shown[-1][1].created,
            min_effect=settings.min_effect,
            alpha=settings.alpha,
            correction=settings.correction,
            counts=[(k, counts[k]) for k in order if counts[k]],
            trends=[
                {
                    "id": t.series.id,
                    "verdict": t.verdict,
                    "chart": chart(t),
                    "spread": t.spread,
                    "nights": _nights(t),
                    "outliers": ", ".join(str(r) for r in t.outliers),
                    "changes": _change_rows(t),
                }
                for t in ranked
            ],
            version=__version__,
        )
    )


def write_site(
    out: Path,
    report_dir: Path,
    current: tuple[str, Sequence[tuple[int, RunRecord]], int, Sequence[hist.Trend]],
    settings: hist.Settings,
    load: Callable[[str], Sequence[RunRecord]] | None = None,
    names: Sequence[str] | None = None,
) -> list[Path]:
    """Every profile's page under ``out`` (the current one already judged), and an index.

    ``load`` reads a profile's runs and ``names`` lists the profiles (a results store's);
    by default, the folders of run records under ``report_dir``.
    """
    out.mkdir(parents=True, exist_ok=True)
    names = list(names) if names is not None else records.profiles(report_dir)
    written = []
    for name in names:
        if name == current[0]:
            _, shown, total, trends = current
        else:
            runs = (
                list(load(name))
                if load is not None
                else records.history(report_dir, name, skip_unreadable=True, problems=[])
            )
            shown = hist.window(hist.numbered(runs), last=settings.last, since=settings.since)
            if not shown:
                continue
            total = len(runs)
            trends = hist.trends(shown, settings)
        path = out / f"{name}.html"
        write_text_atomic(path, page(name, shown, total, trends, settings, names))
        written.append(path)
    index = "".join(f'<li><a href="{escape(p.name)}">{escape(p.stem)}</a></li>' for p in written)
    write_text_atomic(
        out / "index.html",
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>perfsuite '
        f"history</title></head><body><h1>perfsuite history</h1><ul>{index}</ul></body></html>",
    )
    return written
