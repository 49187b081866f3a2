"""The fleet's reports: the terminal list of slow nodes, the drain list, the HTML page.

Every sentence about a fleet verdict is written here, from the typed results of
:mod:`perfsuite.fleet.assess`.  At 10,000 nodes the page stays readable: the heat map
shows the worst nodes, the tables name the flagged ones, and the rest are one line.

Nodes whose slow-looking readings their own runs flagged (foreign load, a throttled GPU) are
never drained: they are listed to rerun, in the terminal, on the page and in the drain
list's ``rerun`` entries.
"""

from __future__ import annotations

import datetime as dt
import html as html_mod
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfsuite import noise
from perfsuite.fleet import judge as fj
from perfsuite.fleet.aggregate import Taint
from perfsuite.fleet.assess import Fleet, ProfileFleet
from perfsuite.model import BASELINE_VERDICTS, FLOOR_VERDICTS
from perfsuite.report.terminal import format_table, short_id

DRAIN_VERSION = 1
# Slow nodes the terminal names, worst first (all of them are in the drain list).
TERMINAL_ROWS = 40
# Rows and columns of the heat map; strip plots drawn; table rows on the page.
HEAT_ROWS = 50
HEAT_COLUMNS = 60
STRIPS = 12
PAGE_ROWS = 500
_FAIL = FLOOR_VERDICTS.index("fail")
_REGRESSED = BASELINE_VERDICTS.index("regressed")
# How the drain list names each kind of taint.
TAINT_NAMES = {
    Taint.FOREIGN_LOAD: "foreign-load",
    Taint.GPU_THROTTLED: "gpu-throttled",
    Taint.OTHER: "other",
}


@dataclass(frozen=True)
class NodeHealth:
    """A unit's own verdicts: the checks below their floors, and the baseline regressions."""

    name: str
    below_floor: tuple[str, ...]
    regressed: tuple[str, ...]


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _times(ratio: float) -> str:
    return f"{ratio:.2f}x"


def _finite(x: float) -> float | None:
    """A number for JSON: None for NaN."""
    return float(x) if math.isfinite(x) else None


def _throttle_reasons(mask: int) -> list[str]:
    return [name for bit, name in noise.THROTTLE_BITS.items() if mask & bit]


def taint_text(p: ProfileFleet, unit: int, col: int) -> str:
    """Why the unit's own run flagged its reading of a check, in words."""
    m = p.matrix
    taint = Taint(int(m.taint[unit, col]))
    words = []
    if Taint.FOREIGN_LOAD in taint:
        cores = float(m.foreign_cores[unit, col])
        amount = f" ({cores:.2f} cores of other work or steal)" if math.isfinite(cores) else ""
        words.append(f"under foreign load{amount}")
    if Taint.GPU_THROTTLED in taint:
        reasons = _throttle_reasons(int(m.throttle[unit, col]))
        words.append("a GPU throttled" + (f" ({', '.join(reasons)})" if reasons else ""))
    if Taint.OTHER in taint:
        words.append("another noise flag of its run (see its record)")
    return "; ".join(words)


def _rerun_cell(p: ProfileFleet, unit: int, col: int) -> str:
    ratio = float(p.judgement.ratio[unit, col])
    where = (
        _times(ratio)
        if math.isfinite(ratio)
        else f"not judged without it (fewer than {fj.MIN_UNITS} untainted)"
    )
    return f"{short_id(p.matrix.checks[col].id)} {where}"


def _rerun_flags(p: ProfileFleet, r: fj.RerunUnit) -> str:
    """Each distinct reason its run flagged the readings to rerun, once."""
    return "; ".join(dict.fromkeys(taint_text(p, r.unit, c) for c in r.checks))


def rule_line(fleet: Fleet) -> str:
    """How the fleet is judged, with the false-alarm guarantee."""
    r = fleet.rule
    return (
        f"rule: a node is slow at a check when its robust z (log figure minus the fleet "
        f"median, over 1.4826 x MAD, floored at {r.min_spread:.0%}) is significant under "
        f"Holm's correction over every node x check of its profile at alpha {r.alpha:g} "
        f"(one-sided Student-t tails, of the degrees of freedom the MAD is worth: a healthy "
        f"fleet of any size raises a false alarm in about {r.alpha:.0%} of reports), and it "
        f"misses the fleet median by more than "
        f"{r.tolerance:.0%}; a reading its own run flagged (foreign load, a throttled GPU) "
        f"is left out of the median, the MAD and the family, is never flagged, and asks "
        f"for a rerun when it misses the median by more than {r.tolerance:.0%} or its "
        f"check cannot be judged without it"
    )


def profile_line(p: ProfileFleet) -> str:
    """One profile's size and the threshold a lone slow cell must pass."""
    m, j = p.matrix, p.judgement
    head = (
        f"profile {m.profile}: {_n(m.nodes, 'node')}"
        + (f" ({_n(len(m.units), 'unit')}: nodes and GPUs)" if len(m.units) != m.nodes else "")
        + f" x {_n(len(m.checks), 'check')}"
    )
    if not p.judged:
        return f"{head}: too few to judge (needs {fj.MIN_UNITS})"
    z1 = fj.first_threshold(j.family, j.rule.alpha, int(j.count.max(initial=0)))
    tainted = int(j.tainted.sum())
    left_out = (
        f"; {_n(tainted, 'reading')} flagged by {'its' if tainted == 1 else 'their'} own runs "
        f"left out, {_n(len(p.rerun), 'unit')} to rerun"
        if tainted
        else ""
    )
    return (
        f"{head}; {j.family} cells judged; a lone slow cell needs z <= {z1:.2f} and a figure "
        f"below {1 - j.rule.tolerance:.2f}x the fleet median; {_n(len(p.slow), 'unit')} flagged"
        + left_out
    )


def _cell(p: ProfileFleet, unit: int, col: int) -> str:
    j = p.judgement
    return (
        f"{short_id(p.matrix.checks[col].id)} {_times(float(j.ratio[unit, col]))} "
        f"(z {float(j.z[unit, col]):.1f})"
    )


def slow_rows(fleet: Fleet) -> list[tuple[ProfileFleet, fj.SlowUnit]]:
    """Every flagged unit of every profile, worst first."""
    rows = [(p, s) for p in fleet.profiles for s in p.slow]
    return sorted(rows, key=lambda ps: (ps[1].worst_ratio, ps[1].worst_z))


def rerun_rows(fleet: Fleet) -> list[tuple[ProfileFleet, fj.RerunUnit]]:
    """Every unit to rerun of every profile, worst first (unjudged ones last)."""
    rows = [(p, r) for p in fleet.profiles for r in p.rerun]
    return sorted(rows, key=lambda pr: (math.isnan(pr[1].worst_ratio), pr[1].worst_ratio))


def _worst(ratio: float) -> str:
    return f"{ratio - 1:+.0%}" if math.isfinite(ratio) else "-"


def health(p: ProfileFleet, limit: int | None = None) -> list[NodeHealth]:
    """The units below a floor or regressed against their baseline, most such checks first."""
    m = p.matrix
    bad = (m.floors == _FAIL).sum(axis=1) + (m.baselines == _REGRESSED).sum(axis=1)
    order = [int(u) for u in np.argsort(-bad, kind="stable") if bad[u] > 0][:limit]
    out = []
    for u in order:
        out.append(
            NodeHealth(
                m.units[u].name,
                tuple(short_id(m.checks[c].id) for c in np.flatnonzero(m.floors[u] == _FAIL)),
                tuple(
                    short_id(m.checks[c].id) for c in np.flatnonzero(m.baselines[u] == _REGRESSED)
                ),
            )
        )
    return out


def _health_counts(p: ProfileFleet) -> tuple[int, int]:
    m = p.matrix
    return int((m.floors == _FAIL).any(axis=1).sum()), int(
        (m.baselines == _REGRESSED).any(axis=1).sum()
    )


def verdict_line(fleet: Fleet) -> str:
    """The last line: how many slow, failed and to rerun, and the exit status."""
    parts = [f"{_n(fleet.flagged, 'node')} slow"] if fleet.flagged else []
    if fleet.failed:
        parts.append(f"{len(fleet.failed)} failed")
    if parts:
        word = "NODES TO DRAIN"
    elif fleet.rerun:
        word = "INCONCLUSIVE"
        parts.append("no node flagged")
    else:
        word = "FLEET OK"
    if fleet.rerun:
        parts.append(f"{fleet.rerun} to rerun, slow only at readings their runs flagged")
    return (
        f"perfsuite fleet: {word} ({', '.join(parts) or 'no node flagged'}) of "
        f"{_n(fleet.nodes + len(fleet.failed), 'node')} (exit {fleet.exit_status})"
    )


def terminal_lines(fleet: Fleet, drain: str = "", page: str = "") -> list[str]:
    """Everything the terminal shows."""
    lines = [f"fleet {fleet.directory}: {_n(fleet.nodes, 'node')} with records, "
             f"{_n(len(fleet.profiles), 'profile')} (each judged apart)"]  # fmt: skip
    lines += [rule_line(fleet)]
    lines += [profile_line(p) for p in fleet.profiles]
    rows = slow_rows(fleet)
    if rows:
        lines.append("SLOW, worst first:")
        table = [("node", "profile", "worst", "slow at (figure / fleet median, z)")]
        for p, s in rows[:TERMINAL_ROWS]:
            cells = [_cell(p, s.unit, c) for c in s.checks[:3]]
            more = f"; {len(s.checks) - 3} more" if len(s.checks) > 3 else ""
            table.append(
                (
                    p.matrix.units[s.unit].name,
                    p.matrix.profile,
                    f"{s.worst_ratio - 1:+.0%}",
                    "; ".join(cells) + more,
                )
            )
        lines += ["  " + line for line in format_table(table)]
        if len(rows) > TERMINAL_ROWS:
            lines.append(f"  ... {len(rows) - TERMINAL_ROWS} more slow in the drain list")
    reruns = rerun_rows(fleet)
    if reruns:
        lines.append("RERUN, not drained: their own runs flagged the readings they look slow at:")
        header = ("node", "profile", "worst", "measured", "at (figure / fleet median)")
        again: list[tuple[str, ...]] = [header]
        for p, r in reruns[:TERMINAL_ROWS]:
            cells = [_rerun_cell(p, r.unit, c) for c in r.checks[:3]]
            more = f"; {len(r.checks) - 3} more" if len(r.checks) > 3 else ""
            again.append(
                (p.matrix.units[r.unit].name, p.matrix.profile, _worst(r.worst_ratio),
                 _rerun_flags(p, r), "; ".join(cells) + more)
            )  # fmt: skip
        lines += ["  " + line for line in format_table(again)]
        if len(reruns) > TERMINAL_ROWS:
            lines.append(
                f"  ... {len(reruns) - TERMINAL_ROWS} more to rerun in the drain list's rerun"
            )
    for p in fleet.profiles:
        floors, regressed = _health_counts(p)
        for h in health(p, limit=5):
            what = []
            if h.below_floor:
                what.append(f"below its floor at {', '.join(h.below_floor[:3])}")
            if h.regressed:
                what.append(f"regressed against its baseline at {', '.join(h.regressed[:3])}")
            lines.append(f"{h.name}: {'; '.join(what)}")
        if floors > 5 or regressed > 5:
            lines.append(
                f"{p.matrix.profile}: {floors} units below a floor, {regressed} regressed in all "
                "(the page lists them)"
            )
    for f in fleet.failed:
        lines.append(
            f"FAILED: task {f.task} ({f.label or '?'} on {f.host or '?'}): {f.failed}"
            + (f"; output: {f.log}" if f.log else "")
        )
    if drain:
        lines.append(f"drain list: {drain}")
    if page:
        lines.append(f"page: {page}")
    lines.append(verdict_line(fleet))
    return lines


def _rerun_entry(p: ProfileFleet, r: fj.RerunUnit) -> dict[str, Any]:
    m, j = p.matrix, p.judgement
    unit = m.units[r.unit]
    checks = []
    for c in r.checks:
        taint = Taint(int(m.taint[r.unit, c]))
        checks.append(
            {
                "check": m.checks[c].id,
                "unit": m.checks[c].unit,
                "higher_is_better": m.checks[c].higher_is_better,
                "value": float(m.values[r.unit, c]),
                "fleet_median": _finite(float(j.median[c])),
                "ratio": _finite(round(float(j.ratio[r.unit, c]), 4)),
                "taint": [name for kind, name in TAINT_NAMES.items() if kind in taint],
                "foreign_cores": _finite(float(m.foreign_cores[r.unit, c])),
                "throttle_reasons": _throttle_reasons(int(m.throttle[r.unit, c])),
            }
        )
    first = r.checks[0]
    worst = (
        f"{short_id(m.checks[first].id)} at {j.ratio[r.unit, first]:.2f}x the fleet median"
        if math.isfinite(r.worst_ratio)
        else f"{short_id(m.checks[first].id)} cannot be judged without it"
    )
    return {
        "node": unit.label,
        "host": unit.host,
        "gpu_index": unit.gpu_index,
        "gpu_serial": unit.gpu_serial,
        "profile": m.profile,
        "reason": (
            f"rerun: {worst}, measured {taint_text(p, r.unit, first)}"
            + (f"; and {len(checks) - 1} more checks" if len(checks) > 1 else "")
        ),
        "checks": checks,
        "record": unit.record,
    }


def drain_list(fleet: Fleet) -> dict[str, Any]:
    """What schedulers act on: each node to drain, with the reason (as NHC gives them).

    ``rerun`` lists the nodes to measure again instead: they look slow only at readings
    their own runs flagged, which drain nothing.
    """
    entries: list[dict[str, Any]] = []
    for p, s in slow_rows(fleet):
        m, j = p.matrix, p.judgement
        unit = m.units[s.unit]
        checks = [
            {
                "check": m.checks[c].id,
                "unit": m.checks[c].unit,
                "higher_is_better": m.checks[c].higher_is_better,
                "value": float(m.values[s.unit, c]),
                "fleet_median": float(j.median[c]),
                "ratio": round(float(j.ratio[s.unit, c]), 4),
                "z": round(float(j.z[s.unit, c]), 2),
            }
            for c in s.checks
        ]
        worst = checks[0]
        worst_id = m.checks[s.checks[0]].id
        entries.append(
            {
                "node": unit.label,
                "host": unit.host,
                "gpu_index": unit.gpu_index,
                "gpu_serial": unit.gpu_serial,
                "profile": m.profile,
                "reason": (
                    f"slow: {short_id(worst_id)} at {worst['ratio']:.2f}x the fleet "
                    f"median (z {worst['z']:.1f})"
                    + (f" and {len(checks) - 1} more checks" if len(checks) > 1 else "")
                ),
                "checks": checks,
                "record": unit.record,
            }
        )
    for f in fleet.failed:
        entries.append(
            {
                "node": f.label,
                "host": f.host,
                "gpu_index": None,
                "gpu_serial": "",
                "profile": "",
                "reason": f"failed: {f.failed}",
                "checks": [],
                "record": f.record,
                "task": f.task,
                "log": f.log,
            }
        )
    return {
        "schema_version": DRAIN_VERSION,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "directory": str(fleet.directory),
        "rule": {
            "alpha": fleet.rule.alpha,
            "tolerance": fleet.rule.tolerance,
            "min_spread": fleet.rule.min_spread,
            "correction": "holm",
        },
        "drain": entries,
        "rerun": [_rerun_entry(p, r) for p, r in rerun_rows(fleet)],
    }


# The page.


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

    from perfsuite.report.charts import _figure, _svg

    m, j = p.matrix, p.judgement
    rows, cols = _heat_order(p)
    data = j.ratio[np.ix_(rows, cols)]
    finite = data[np.isfinite(data)]
    low = min(0.5, float(finite.min())) if finite.size else 0.5
    high = max(1.5, float(finite.max())) if finite.size else 1.5
    labels = [short_id(m.checks[c].id)[:40] for c in cols]
    height = max(2.5, 0.22 * len(rows) + 1.2 + 0.08 * max((len(t) for t in labels), default=0))
    width = min(16.0, max(7.0, 0.28 * len(cols) + 4.0))
    fig = _figure(width, height)
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
    return _svg(fig)


def strip_svg(p: ProfileFleet, col: int) -> str:
    """Every unit's figure over the fleet median at one check; flagged ones in red."""
    from perfsuite.report.charts import _figure, _svg

    m, j = p.matrix, p.judgement
    ratio = j.ratio[:, col]
    have = np.flatnonzero(np.isfinite(ratio))
    rng = np.random.default_rng(col)
    jitter = rng.uniform(-0.3, 0.3, have.size)
    flagged = j.flagged[have, col]
    tainted = j.tainted[have, col]
    plain = ~flagged & ~tainted
    fig = _figure(11.0, 1.9)
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
    return _svg(fig)


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
        f"The other {_n(int(rest.size), 'unit')} (not drawn): {named}; their figures lie "
        f"{_times(lo)} to {_times(hi)} of the fleet median, 90% of them within "
        f"{_times(float(inner[0]))} to {_times(float(inner[1]))}."
    )


def _profile_section(p: ProfileFleet) -> str:
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
                    "; ".join(_cell(p, s.unit, c) for c in s.checks[:5]),
                )
                for s in p.slow[:PAGE_ROWS]
            ]
            parts.append("<h3>Slow, worst first</h3>")
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
                    _worst(r.worst_ratio),
                    _rerun_flags(p, r),
                    "; ".join(_rerun_cell(p, r.unit, c) for c in r.checks[:5]),
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


def page(fleet: Fleet) -> str:
    """The self-contained HTML page."""
    esc = html_mod.escape
    failed = "".join(
        f"<h3>task {f.task} ({esc(f.label)} on {esc(f.host)}): {esc(f.failed)}</h3>"
        f"<p>output: {esc(f.log)}</p><pre>{esc(f.output_tail)}</pre>"
        for f in fleet.failed
    )
    sections = "".join(_profile_section(p) for p in fleet.profiles)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>perfsuite fleet {esc(str(fleet.directory))}
</title>
<style>
body{{font-family:system-ui,sans-serif;margin:2em;max-width:80em}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:.2em .5em;text-align:left}}
pre{{background:#f4f4f4;padding:.5em;overflow:auto}}svg{{max-width:100%;height:auto}}
</style></head><body>
<h1>{esc(verdict_line(fleet))}</h1>
<p>{esc(str(fleet.directory))}: {_n(fleet.nodes, "node")} with run records,
{_n(len(fleet.profiles), "hardware profile")}, each judged against itself only.</p>
<p>{esc(rule_line(fleet))}.</p>
{sections}
{"<h2>Failed nodes</h2>" + failed if failed else ""}
</body></html>
"""
