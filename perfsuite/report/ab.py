"""The A/B's reports: the terminal table, worst first, and the HTML page.

The page shows the forest plot of B/A with each check's confidence interval, each check's
per-round ratios (drift and outlier rounds are visible there), the environment diff, and the
rounds that failed with their output.
"""

from __future__ import annotations

import dataclasses
import html as html_mod
import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from perfsuite.ab import CheckVerdict, Outcome, paired, rounds, unfingerprinted
from perfsuite.judge import outcome
from perfsuite.model import FlagKind
from perfsuite.report.terminal import cores_span, format_table, short_id
from perfsuite.settings import duration_text
from perfsuite.store.files import write_text_atomic

# The environment diff shows at most this many rows on the terminal (all in the record).
DIFF_ROWS = 20


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _shown(value: Any) -> str:
    return "(unset)" if value is None else str(value)


def _pct(ratio: float | None) -> str:
    return "-" if ratio is None or not math.isfinite(ratio) else f"{ratio - 1:+.1%}"


def _ci(c: CheckVerdict) -> str:
    j = c.judged
    if j is None or not math.isfinite(j.pairs.low):
        return "-"
    return f"[{_pct(math.exp(j.pairs.low))}, {_pct(math.exp(j.pairs.high))}]"


# Why a pair of readings was left out (:func:`perfsuite.ab.rounds.unshared`), in words.
LEFT_OUT_WORDS = {
    rounds.LOAD_CHANGED: "the load changed between A's and B's readings",
    rounds.LOAD_UNKNOWN: "one side's load was not recorded",
    FlagKind.GPU_THROTTLED.value: "a GPU was throttled",
    FlagKind.LINK_CHANGED.value: "the CPUs' link changed state",
}


def left_out_words(why: str) -> str:
    """A left-out pair's reason, in words."""
    return LEFT_OUT_WORDS.get(why, f"measured under a flagged state ({why})")


def _reasons(whys: Sequence[str]) -> str:
    """Reasons with their counts, most frequent first: ``the load changed ... (2)``."""
    return "; ".join(f"{left_out_words(w)} ({n})" for w, n in Counter(whys).most_common())


def load_range(loads: Sequence[float]) -> str:
    """``0.93-0.98 cores``: the range of the shared loads above the guard's threshold."""
    return cores_span([x for x in loads if x > rounds.LOAD_MATCH_CORES])


def note(c: CheckVerdict) -> str:
    """Why a check is where it is: for an undecided one, what it rules out and needs."""
    parts = []
    if c.below_floor:
        parts.append("below its floor on both sides: a node verdict, not a software one")
    busy = load_range(c.loads)
    if busy:
        n = sum(1 for x in c.loads if x > rounds.LOAD_MATCH_CORES)
        parts.append(f"{n} of {len(c.loads)} rounds under a shared load ({busy})")
    if c.turns_split:
        parts.append(f"{c.turns_split} of {c.turns_seen} turn pairs split by a load change")
    if c.tainted:
        n = len(c.tainted)
        parts.append(f"{n} round{'s' if n > 1 else ''} left out: {_reasons(c.left_out)}")
    j = c.judged
    if c.verdict == "unknown":
        if j is None:
            parts.append("fewer than 2 rounds")
        else:
            if math.isfinite(j.ruled_out):
                parts.append(f"rules out changes beyond {j.ruled_out:.1%}")
            if j.rounds_needed is not None:
                more = max(1, j.rounds_needed - j.pairs.n)
                parts.append(f"about {more} more round{'s' if more > 1 else ''} at this change")
            else:
                parts.append("a change near the tolerance: more rounds may not decide it")
    return "; ".join(parts)


def table_lines(result: Outcome) -> list[str]:
    """Each check, worst first: rounds, B/A, its CI, p, verdict, note."""
    rows = [("check", "unit", "rounds", "B/A", "95% CI", "p", "tolerance", "verdict", "note")]
    for c in result.worst_first():
        j = c.judged
        rows.append(
            (
                short_id(c.id),
                c.unit + ("" if c.higher_is_better else " (lower is better)"),
                str(len(c.log_ratios)),
                _pct(c.ratio),
                _ci(c),
                f"{j.pairs.p:.2g}" if j else "-",
                f"{c.tolerance:.0%}",
                c.verdict,
                note(c),
            )
        )
    return format_table(rows)


def diff_lines(diff: Sequence[tuple[str, Any, Any]], silent: Sequence[str] = ()) -> list[str]:
    """What differs between A and B.

    ``silent``: the sides that gave no environment fingerprint.  "The same environment" is
    said only when both gave one and nothing differs.
    """
    lines = []
    if silent:
        lines.append(
            f"environment diff: {' and '.join(silent)} gave no environment fingerprint; "
            "the environments cannot be compared"
            + ("" if diff else " (the side variables and requirements are the same)")
        )
    if not diff:
        return lines or ["environment diff: A and B report the same environment"]
    lines.append(f"environment diff, A -> B ({len(diff)}):")
    for key, a, b in diff[:DIFF_ROWS]:
        lines.append(f"  {key}: {_shown(a)} -> {_shown(b)}")
    if len(diff) > DIFF_ROWS:
        lines.append(f"  ... {len(diff) - DIFF_ROWS} more in the record")
    return lines


def verdict_line(result: Outcome) -> str:
    """One line: the counts, why the rounds stopped, the exit status."""
    counts = result.counts()
    parts = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    s = result.session
    failed = sum(1 for r in s.runs if r.failed)
    failed_text = f", {failed} side runs failed" if failed else ""
    failed_word = "REGRESSED" if counts.get("regressed") else "FAILED"
    word = "ERROR"
    for status, text in (
        (outcome.EXIT_REGRESSED, failed_word),
        (outcome.EXIT_INTERRUPTED, "INTERRUPTED"),
        (outcome.EXIT_INCONCLUSIVE, "UNDECIDED"),
        (outcome.EXIT_OK, "NO REGRESSION"),
    ):
        if result.exit_status == status:
            word = "INTERRUPTED" if s.incomplete and status != outcome.EXIT_REGRESSED else text
            break
    return (
        f"perfsuite ab: {word} ({parts or 'nothing compared'}) after {len(s.order)} rounds in "
        f"{s.seconds:.0f} s, stopped: {s.stopped}{failed_text}"
    )


def short_budget_words(
    done: int, budget_s: float, left_s: float, held: int, enough_s: float, pace_s: float
) -> str:
    """The warning that a budget holds too few rounds to call a change (after round ``done``)."""
    so_far = f"after {done} rounds in {budget_s - left_s:.0f} s, " if done > 1 else ""
    return (
        f"{so_far}at {pace_s:.0f} s per round, --budget {duration_text(budget_s)} holds "
        f"{held} round{'s' if held != 1 else ''}, and a change is called from round "
        f"{paired.MIN_SIGN_ROUNDS} on: --budget {math.ceil(enough_s / 60)}m or more, or "
        "fewer checks (-k), let the rounds decide"
    )


def round_load_words(runs: Sequence[rounds.SideRun]) -> str:
    """A round's pairs under a shared load and those left out, for its progress line."""
    values = [v for _, _, v in rounds.round_pairs(runs)]
    whys = [v.left_out for v in values if v.left_out]
    busy = [v.load for v in values if not v.left_out]
    split = sum(v.split for v in values if not v.left_out)
    parts = []
    shared = load_range(busy)
    if shared:
        n = sum(1 for x in busy if x > rounds.LOAD_MATCH_CORES)
        parts.append(f"{_n(n, 'pair')} under a shared load ({shared}), kept")
    if split:
        parts.append(f"{_n(split, 'turn pair')} split by a load change, left out")
    if whys:
        parts.append(f"{len(whys)} left out: {_reasons(whys)}")
    return "".join(f"; {p}" for p in parts)


def load_line(checks: Sequence[CheckVerdict]) -> str:
    """Pairs judged under a load both readings shared, and pairs left out and why."""
    loads = [x for c in checks for x in c.loads]
    whys = [w for c in checks for w in c.left_out]
    parts = []
    busy = load_range(loads)
    if busy:
        n = sum(1 for x in loads if x > rounds.LOAD_MATCH_CORES)
        parts.append(
            f"{n} of {len(loads)} pairs judged under a foreign load both readings shared "
            f"({busy}; it cancels in B/A)"
        )
    split = sum(c.turns_split for c in checks)
    if split:
        seen = sum(c.turns_seen for c in checks)
        parts.append(
            f"{split} of {seen} turn pairs left out of the rounds judged by turn pairs, a load "
            "having started or stopped between their two turns"
        )
    if whys:
        parts.append(f"{len(whys)} left out: {_reasons(whys)}")
    return "load: " + "; ".join(parts) if parts else ""


def summary_lines(result: Outcome) -> list[str]:
    """Everything the terminal shows after the rounds."""
    lines = []
    if result.unhealthy:
        lines.append(
            "NODE BELOW ITS FLOORS on both sides for "
            f"{_n(len(result.unhealthy), 'check')}: the node "
            "is unhealthy; their A/B verdicts say nothing about the software: "
            + ", ".join(short_id(c) for c in result.unhealthy[:5])
        )
    if result.broken:
        lines.append(
            f"B FAILED on {_n(len(result.broken), 'check')} that A measured (it raised, "
            "crashed, hung or was killed there; the failed rounds say which): "
            + ", ".join(short_id(c) for c in result.broken[:5])
        )
    lines += table_lines(result)
    for side, checks in result.only_in.items():
        if checks:
            lines.append(
                f"only {side} measured {len(checks)}: " + ", ".join(map(short_id, checks[:5]))
            )
    for r in result.session.runs:
        if r.failed:
            lines.append(f"round {r.round} {r.side} failed: {r.failed} (output: {r.log})")
    if result.session.incomplete:
        lines.append(f"INCOMPLETE: {result.session.incomplete}; the record holds the rounds so far")
    load = load_line(result.checks)
    if load:
        lines.append(load)
    lines += list(result.notes)
    lines.append(f"record: {result.record}" + (f"; page: {result.html}" if result.html else ""))
    lines.append(verdict_line(result))
    return lines


def _forest_svg(result: Outcome) -> str:
    from perfsuite.report.charts import figure, svg

    checks = [c for c in result.worst_first() if c.judged is not None]
    if not checks:
        return (
            "<p>No check has two rounds judged yet (failed sides, or readings left out as "
            "measured under foreign load): nothing to plot. The table says why for each.</p>"
        )
    height = max(2.5, 0.32 * len(checks) + 1.2)
    fig = figure(11.0, height)
    ax, strip = fig.subplots(1, 2, sharey=True, width_ratios=[3, 2])
    last_round = max(1, len(result.session.order))
    dots = None
    colours = {
        "regressed": "#c0392b",
        "improved": "#2471a3",
        "same": "#27ae60",
        "unknown": "#7f8c8d",
    }
    for y, c in enumerate(checks):
        j = c.judged
        assert j is not None
        pct = 100 * (j.pairs.ratio - 1)
        lo = 100 * (math.exp(j.pairs.low) - 1) if math.isfinite(j.pairs.low) else pct
        hi = 100 * (math.exp(j.pairs.high) - 1) if math.isfinite(j.pairs.high) else pct
        colour = colours.get(c.verdict, "#7f8c8d")
        ax.plot([lo, hi], [y, y], color=colour, linewidth=2)
        ax.plot([pct], [y], "o", color=colour)
        rounds = [100 * (math.exp(v) - 1) for v in c.log_ratios]
        # Coloured by round, early to late: a trend over the session shows as a gradient.
        dots = strip.scatter(
            rounds, [y] * len(rounds), c=list(c.rounds), cmap="viridis", marker="|", s=120,
            vmin=1, vmax=last_round,
        )  # fmt: skip
    for a in (ax, strip):
        a.axvline(0, color="black", linewidth=0.8)
    tol = 100 * checks[0].tolerance
    ax.axvspan(-tol, tol, color="#27ae60", alpha=0.08)
    ax.set_yticks(range(len(checks)), [short_id(c.id) for c in checks])
    ax.invert_yaxis()
    ax.set_xlabel("B vs A, % (geometric mean, 95% CI); shaded: the tolerance")
    strip.set_xlabel("each round's B/A, %")
    if dots is not None:
        from matplotlib.ticker import MaxNLocator

        bar = fig.colorbar(dots, ax=strip, label="round", fraction=0.08)
        bar.ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    return svg(fig)


def page(result: Outcome) -> str:
    """The self-contained HTML page of an A/B."""
    esc = html_mod.escape
    rows = "".join(
        "<tr>" + "".join(f"<td>{esc(str(x))}</td>" for x in row) + "</tr>"
        for row in [
            (
                c.id,
                str(len(c.log_ratios)),
                _pct(c.ratio),
                _ci(c),
                f"{c.judged.pairs.p:.2g}" if c.judged else "-",
                c.verdict,
                note(c),
            )
            for c in result.worst_first()
        ]
    )
    diff = "".join(
        f"<tr><td>{esc(str(k))}</td><td>{esc(_shown(a))}</td><td>{esc(_shown(b))}</td></tr>"
        for k, a, b in result.diff
    ) or (
        "<tr><td colspan=3>"
        + esc(" ".join(diff_lines((), unfingerprinted(result.fingerprints))))
        + "</td></tr>"
    )
    failed = "".join(
        f"<h3>round {r.round}, {esc(r.side)}: {esc(r.failed)}</h3><pre>{esc(r.output_tail)}</pre>"
        for r in result.session.runs
        if r.failed
    )
    stacks = "".join(
        f"<li><b>{side}</b>: {esc(s.spec)} ({esc(s.python)})</li>"
        for side, s in result.stacks.items()
    )
    health = (
        f"<p class=bad><b>The node is below its floors on both sides</b> for "
        f"{len(result.unhealthy)} checks; their verdicts are about the node, not the software: "
        f"{esc(', '.join(result.unhealthy))}</p>"
        if result.unhealthy
        else ""
    )
    s = result.session
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>perfsuite ab {esc(result.run_id)}</title>
<style>
body{{font-family:system-ui,sans-serif;margin:2em;max-width:75em}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:.2em .5em;text-align:left}}
.bad{{color:#c0392b}}pre{{background:#f4f4f4;padding:.5em;overflow:auto}}
svg{{max-width:100%;height:auto}}
</style></head><body>
<h1>{"NODE BELOW ITS FLOORS. " if result.unhealthy else ""}{esc(verdict_line(result))}</h1>
<ul>{stacks}</ul>
{health}
<p>{len(s.order)} rounds ({esc(", ".join("".join(o) for o in s.order))}), {s.seconds:.0f} s;
stopped: {esc(s.stopped)}. {esc(s.incomplete)} Test: {esc(result.test)};
correction: {esc(result.plan.correction)} at {result.plan.alpha}.</p>
<h2>B against A, worst first</h2>
{_forest_svg(result)}
<table><tr><th>check</th><th>rounds</th><th>B/A</th><th>95% CI</th><th>p</th><th>verdict</th>
<th>note</th></tr>{rows}</table>
<h2>What differs between A and B</h2>
<table><tr><th>key</th><th>A</th><th>B</th></tr>{diff}</table>
{"<h2>Failed side runs</h2>" + failed if failed else ""}
</body></html>
"""


def write_html(result: Outcome, path: Path) -> Outcome:
    """Write the page; return the outcome that names it."""
    write_text_atomic(path, page(result))
    return dataclasses.replace(result, html=path)
