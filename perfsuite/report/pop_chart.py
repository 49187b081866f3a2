"""POP's efficiency tree on a scaling chart's axes: the table of efficiencies, and its lines.

The ``scaling`` chart (:mod:`perfsuite.report.charts`) gives each scaling series two axes:
the table, POP's tree as indented rows by rank count, each cell coloured by POP's rule of
thumb; and the same efficiencies as lines against the rank count.
"""

from __future__ import annotations

import math
from typing import Any

# POP's tree, top to bottom: (metric, label, depth).  Scaling efficiency sits outside it.
# Input efficiency (1 - the input-wait share) is a factor of communication efficiency.
POP_TREE = (
    ("global_efficiency", "Global efficiency", 0),
    ("parallel_efficiency", "Parallel efficiency", 1),
    ("load_balance", "Load balance", 2),
    ("communication_efficiency", "Communication efficiency", 2),
    ("input_efficiency", "Input efficiency", 3),
    ("computation_scalability", "Computation scalability", 1),
    ("scaling_efficiency", "Scaling efficiency (samples/s per rank)", 0),
)


def table(ax: Any, rows: list[dict[str, Any]], look: float, title: str) -> None:
    """POP's table: a column per rank count, a row per metric (the tree, rows indented).

    ``look``: POP's rule of thumb, below which an efficiency is worth a look.
    """
    ranks = [int(r["ranks"]) for r in rows]
    cell = {"ha": "center", "va": "center", "fontsize": 9}
    for y, (metric, _, _) in enumerate(POP_TREE):
        for x, row in enumerate(rows):
            value = row.get(metric)
            if value is None:
                continue
            ax.add_patch(
                _rectangle((x, y), _pop_colour(float(value), look), bool(row.get("reference")))
            )
            ax.text(x + 0.5, y + 0.5, _pop_cell(metric, float(value)), **cell)
    ax.set_xlim(-0.02, len(rows) + 0.02)
    ax.set_ylim(len(POP_TREE), 0)
    ax.set_xticks([x + 0.5 for x in range(len(rows))], [f"{n} rank(s)" for n in ranks])
    ax.xaxis.tick_top()
    # The tree as indented row labels, left-aligned (no-break spaces: SVG collapses others)
    ax.set_yticks(
        [y + 0.5 for y in range(len(POP_TREE))],
        [("\u00a0" * 5 * depth + "└ " if depth else "") + label for _, label, depth in POP_TREE],
    )
    longest = max(len(label) + 6 * depth for _, label, depth in POP_TREE)
    ax.tick_params(axis="y", length=0, pad=6.2 * longest)
    for tick in ax.get_yticklabels():
        tick.set_horizontalalignment("left")
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_title(title, fontsize=11, loc="left")


def efficiencies(ax: Any, rows: list[dict[str, Any]], look: float) -> None:
    """Each metric of the tree against the rank count, deeper metrics thinner; ``look`` marked."""
    ranks = [int(r["ranks"]) for r in rows]
    for metric, label, depth in POP_TREE:
        values = [math.nan if r.get(metric) is None else r[metric] for r in rows]
        style = ("-", "--", ":", ":")[depth]
        ax.plot(ranks, values, "o" + style, label=label.split(" (")[0], lw=2.4 - 0.6 * depth)
    ax.axhline(look, color="0.3", lw=1, ls="-.")
    ax.set_xticks(ranks, [str(n) for n in ranks])
    ax.set_xlabel("ranks", fontsize=11)
    ax.set_ylabel("efficiency (1 is ideal)", fontsize=11)
    ax.set_ylim(0, max(1.1, *(float(r.get(m) or 0) for r in rows for m, _, _ in POP_TREE)))
    ax.grid(True, alpha=0.3)
    ax.set_title(f"dash-dot: {look:g} (POP: below it, worth a look)", fontsize=10)


def _pop_colour(value: float, worth_a_look: float) -> str:
    """POP's traffic light: green from the rule of thumb up, amber below it, red far below."""
    if value >= worth_a_look:
        return "#9bd39b"
    return "#f3d27a" if value >= worth_a_look - 0.2 else "#ef9a8f"


def _pop_cell(metric: str, value: float) -> str:
    """A cell's text; input efficiency also shows its input-wait share (1 - the efficiency)."""
    if metric == "input_efficiency":
        return f"{value:.2f}\n({1 - value:.0%} wait)"
    return f"{value:.2f}"


def _rectangle(xy: tuple[float, float], colour: str, reference: bool) -> Any:
    from matplotlib.patches import Rectangle

    return Rectangle(
        xy, 1, 1, facecolor=colour, edgecolor="white", lw=2, hatch="//" if reference else None
    )
