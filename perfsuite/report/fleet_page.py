"""The fleet's HTML page: a heat map of the worst nodes, strip plots, and the flagged tables.

Self-contained (inline SVG, no script) and readable at 10,000 nodes: the heat map shows the
worst :data:`HEAT_ROWS` units, the tables name the flagged ones up to :data:`PAGE_ROWS`, and
the rest are one line.  The words come from :mod:`perfsuite.report.fleet`.
"""

from __future__ import annotations

import html as html_mod
import math
from collections.abc import Sequence

import numpy as np

from perfsuite.fleet import judge as fj
from perfsuite.fleet.assess import Fleet, ProfileFleet
from perfsuite.fleet.rerun import lead_check, lead_first, rechecked_rows, rerun_commands
from perfsuite.report.fleet import (
    cell_words,
    confirm_line,
    counted,
    health,
    judged_by,
    pair_words,
    profile_line,
    rerun_advice,
    rerun_cell,
    rerun_flags,
    rule_line,
    times,
    verdict_line,
    with_records,
    worst_words,
)
from perfsuite.report.terminal import short_id

# Rows and columns of the heat map; strip plots drawn; table rows on the page.
HEAT_ROWS = 50
HEAT_COLUMNS = 60
STRIPS = 12
PAGE_ROWS = 500


def _heat_order(p: ProfileFleet) -> tuple[np.ndarray, np.ndarray]:
    """The rows (worst units) and columns (most flagged, then lowest) the heat map shows."""
    j = p.judgement
    rows = fj.worst_first(j)[:HEAT_ROWS]
    sub = j.ratio[rows]
    flags = j.flagged[rows].sum(axis=0) + j.rerun[rows].sum(axis=0)
    with np.errstate(all="ignore"):
        lowest = np.where(np.isnan(sub), np.inf, sub).min(axis=0, initial=np.inf)
    cols = np.lexsort((lowest, -flags))[:HEAT_COLUMNS]
    return rows, cols


def heat_map_svg(p: ProfileFleet) -> str:
    """Units (worst first) x checks, each cell the figure over the fleet median.

    Flagged cells are crossed; tainted ones (left out of the fleet) greyed and hatched, and
    ringed when they ask for a rerun.
    """
    from matplotlib.colors import TwoSlopeNorm
    from matplotlib.patches import Rectangle

    from perfsuite.report.charts import figure, svg

    m, j = p.matrix, p.judgement
    rows, cols = _heat_order(p)
    data = j.ratio[np.ix_(rows, cols)]
    finite = data[np.isfinite(data)]
    low = min(0.5, float(finite.min())) if finite.size else 0.5
    high = max(1.5, float(finite.max())) if finite.size else 1.5
    labels = [short_id(m.checks[c].id)[:40] for c in cols]
    height = max(2.5, 0.22 * len(rows) + 1.2 + 0.08 * max((len(t) for t in labels), default=0))
    width = min(16.0, max(7.0, 0.28 * len(cols) + 4.0))
    fig = figure(width, height)
    ax = fig.subplots()
    image = ax.imshow(
        np.ma.masked_invalid(data),
        cmap="RdBu",
        norm=TwoSlopeNorm(vmin=low, vcenter=1.0, vmax=high),
        aspect="auto",
        interpolation="nearest",
    )
    flagged = j.flagged[np.ix_(rows, cols)]
    ys, xs = np.nonzero(flagged)
    ax.scatter(xs, ys, marker="x", color="black", s=18, linewidths=1)
    for y, x in zip(*np.nonzero(j.tainted[np.ix_(rows, cols)]), strict=True):
        ax.add_patch(
            Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=(0.6, 0.6, 0.6, 0.6), hatch="////",
                      edgecolor="#333333", linewidth=0)
        )  # fmt: skip
    ys, xs = np.nonzero(j.rerun[np.ix_(rows, cols)])
    ax.scatter(xs, ys, marker="o", facecolors="none", edgecolors="black", s=30, linewidths=1)
    ax.set_yticks(range(len(rows)), [m.units[u].name for u in rows], fontsize=8)
    ax.set_xticks(range(len(cols)), labels, rotation=90, fontsize=7)
    fig.colorbar(image, ax=ax, label="figure / fleet median (below 1: slower)", fraction=0.05)
    ax.set_title(
        f"{m.profile}: the {len(rows)} worst units; x: flagged\n"
        "grey, hatched: flagged by its own run, left out; o: to rerun",
        fontsize=10,
    )
    return svg(fig)


def strip_svg(p: ProfileFleet, col: int) -> str:
    """Every unit's figure over the fleet median at one check; flagged ones in red."""
    from perfsuite.report.charts import figure, svg

    m, j = p.matrix, p.judgement
    ratio = j.ratio[:, col]
    have = np.flatnonzero(np.isfinite(ratio))
    rng = np.random.default_rng(col)
    jitter = rng.uniform(-0.3, 0.3, have.size)
    flagged = j.flagged[have, col]
    tainted = j.tainted[have, col]
    plain = ~flagged & ~tainted
    fig = figure(11.0, 1.9)
    ax = fig.subplots()
    many = have.size > 2000
    ax.scatter(ratio[have][plain], jitter[plain], s=6 if many else 14, color="#7f8c8d",
               alpha=0.5, rasterized=many)  # fmt: skip
    ax.scatter(ratio[have][tainted], jitter[tainted], s=22, facecolors="none",
               edgecolors="#e67e22")  # fmt: skip
    ax.scatter(ratio[have][flagged], jitter[flagged], s=22, color="#c0392b")
    for u in have[flagged][:8]:
        ax.annotate(m.units[u].name, (float(ratio[u]), 0.32), fontsize=8, rotation=30)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.axvline(1 - j.rule.tolerance, color="#c0392b", linewidth=0.8, linestyle="--")
    ax.set_yticks([])
    ax.set_ylim(-0.5, 0.9)
    ax.set_xlabel(
        f"{short_id(m.checks[col].id)}: figure / fleet median "
        f"({j.median[col]:.4g} {m.checks[col].unit}); dashed: the tolerance; hollow: flagged "
        "by its own run, left out"
    )
    return svg(fig)


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    esc = html_mod.escape
    return (
        "<table><tr>"
        + "".join(f"<th>{esc(h)}</th>" for h in head)
        + "</tr>"
        + "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
        + "</table>"
    )


def _rest_line(p: ProfileFleet) -> str:
    j = p.judgement
    shown, _ = _heat_order(p)
    rest = np.setdiff1d(np.arange(len(p.matrix.units)), shown)
    if not rest.size:
        return ""
    sub = j.ratio[rest]
    finite = sub[np.isfinite(sub)]
    lo, hi = (float(np.min(finite)), float(np.max(finite))) if finite.size else (math.nan,) * 2
    inner = np.nanpercentile(finite, [5, 95]) if finite.size else [math.nan, math.nan]
    flagged = int(j.flagged[rest].any(axis=1).sum())
    rerun = int(np.isin(rest, j.units_rerun).sum())
    named = f"{flagged} of them flagged (in the table)" if flagged else "none flagged"
    named += f", {rerun} to rerun (in the table)" if rerun else ""
    return (
        f"The other {counted(int(rest.size), 'unit')} (not drawn): {named}; their figures lie "
        f"{times(lo)} to {times(hi)} of the fleet median, 90% of them within "
        f"{times(float(inner[0]))} to {times(float(inner[1]))}."
    )


def _profile_section(p: ProfileFleet, confirmed: bool = False) -> str:
    import matplotlib

    esc = html_mod.escape
    m, j = p.matrix, p.judgement
    parts = [f"<h2>{esc(m.profile)}</h2><p>{esc(profile_line(p))}</p>"]
    if not p.judged or not m.checks:
        return "".join(parts)
    with matplotlib.rc_context({"text.parse_math": False, "font.size": 10}):
        parts.append(heat_map_svg(p))
        parts.append(f"<p>{esc(_rest_line(p))}</p>")
        if p.slow:
            rows = [
                (
                    m.units[s.unit].name,
                    m.units[s.unit].gpu_serial or "-",
                    f"{s.worst_ratio - 1:+.0%}",
                    str(len(s.checks)),
                    "; ".join(cell_words(p, s.unit, c) for c in s.checks[:5]),
                )
                for s in p.slow[:PAGE_ROWS]
            ]
            parts.append(
                "<h3>Flagged by the first run, worst first (their reruns: below)</h3>"
                if confirmed
                else "<h3>Slow, worst first (unconfirmed: one run's flags)</h3>"
            )
            parts.append(_table(("node", "GPU", "worst", "checks", "slow at"), rows))
            if len(p.slow) > PAGE_ROWS:
                parts.append(f"<p>... {len(p.slow) - PAGE_ROWS} more in the drain list.</p>")
            flagged_cols = np.flatnonzero(j.flagged.any(axis=0))
            order = flagged_cols[np.argsort(-j.flagged[:, flagged_cols].sum(axis=0))]
            parts.append("<h3>Each flagged check across the fleet</h3>")
            parts += [strip_svg(p, int(c)) for c in order[:STRIPS]]
            if order.size > STRIPS:
                parts.append(f"<p>{order.size - STRIPS} more flagged checks not drawn.</p>")
        if p.rerun:
            rows = [
                (
                    m.units[r.unit].name,
                    m.units[r.unit].gpu_serial or "-",
                    worst_words(r.worst_ratio),
                    rerun_flags(p, r),
                    "; ".join(rerun_cell(p, r.unit, c) for c in r.checks[:5]),
                )
                for r in p.rerun[:PAGE_ROWS]
            ]
            parts.append("<h3>Rerun, not drained: slow only at readings their runs flagged</h3>")
            parts.append(_table(("node", "GPU", "worst", "measured", "at"), rows))
            if len(p.rerun) > PAGE_ROWS:
                parts.append(f"<p>... {len(p.rerun) - PAGE_ROWS} more in the drain list.</p>")
    hl = health(p, limit=PAGE_ROWS)
    if hl:
        parts.append("<h3>Nodes below their floors, or regressed against their baselines</h3>")
        parts.append(
            _table(
                ("node", "below floor", "regressed"),
                [
                    (h.name, ", ".join(h.below_floor) or "-", ", ".join(h.regressed) or "-")
                    for h in hl
                ],
            )
        )
    else:
        parts.append(
            "<p>Every unit meets the floors it was judged against; no baseline regressed.</p>"
        )
    return "".join(parts)


def _confirm_section(fleet: Fleet) -> str:
    """The candidates after their reruns, and the commands that (re)run them."""
    esc = html_mod.escape
    parts = []
    if fleet.confirmed:
        parts.append(f"<h2>Confirmation by rerun</h2><p>{esc(confirm_line(fleet))}.</p>")
        for verdicts, title in (
            ((fj.Verdict.CONFIRMED,), "Slow, confirmed by the rerun: drained"),
            ((fj.Verdict.CLEARED,), "Not confirmed: not drained"),
            (
                (fj.Verdict.RERUN, fj.Verdict.MISSING, fj.Verdict.UNJUDGED),
                "Rerun again: the rerun settled nothing",
            ),
        ):
            by = len(fleet.confirm) > 1
            rows = [
                (
                    p.matrix.units[r.unit].name,
                    p.matrix.profile,
                    worst_words(r.worst_ratio),
                    *((judged_by(r),) if by else ()),
                    "; ".join(
                        pair_words(p, r.unit, k) for k in lead_first(r, lead_check(p, r))[:5]
                    ),
                )
                for p, r in rechecked_rows(fleet, *verdicts)[:PAGE_ROWS]
            ]
            if rows:
                parts.append(f"<h3>{esc(title)}</h3>")
                head = ("node", "profile", "rerun", *(("by",) if by else ()),
                        "first run, then rerun (figure / median)")  # fmt: skip
                parts.append(_table(head, rows))
    commands = rerun_commands(fleet)
    if commands:
        parts.append(f"<p>{esc(rerun_advice(fleet))}</p><pre>{esc(chr(10).join(commands))}</pre>")
    return "".join(parts)


def page(fleet: Fleet) -> str:
    """The self-contained HTML page."""
    esc = html_mod.escape
    failed = "".join(
        f"<h3>task {f.task} ({esc(f.label)} on {esc(f.host)}): {esc(f.failed)}</h3>"
        f"<p>output: {esc(f.log)}</p><pre>{esc(f.output_tail)}</pre>"
        for f in fleet.failures
    )
    sections = "".join(_profile_section(p, fleet.confirmed) for p in fleet.profiles)
    sections += _confirm_section(fleet)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>perfsuite fleet {esc(str(fleet.directory))}
</title>
<style>
body{{font-family:system-ui,sans-serif;margin:2em;max-width:80em}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:.2em .5em;text-align:left}}
pre{{background:#f4f4f4;padding:.5em;overflow:auto}}svg{{max-width:100%;height:auto}}
</style></head><body>
<h1>{esc(verdict_line(fleet))}</h1>
<p>{esc(str(fleet.directory))}: {esc(with_records(fleet))},
{counted(len(fleet.profiles), "hardware profile")}, each judged against itself only.</p>
<p>{esc(rule_line(fleet))}.</p>
{sections}
{"<h2>Failed nodes</h2>" + failed if failed else ""}
</body></html>
"""
