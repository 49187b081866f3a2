"""Charts for the HTML report: matplotlib figures rendered to inline SVG.

Each chart is registered with :func:`chart` and decides from the run record whether it has
anything to draw, so a new check adds its own chart here without touching the others, and a
report of a partial run (``-k``) shows only the charts that apply.
"""

from __future__ import annotations

import html
import io
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from perfsuite.judge import stats
from perfsuite.model import Result, RunRecord
from perfsuite.report import pop_chart


@dataclass(frozen=True)
class ChartContext:
    """What a chart may draw from: the run, and its baseline run where known."""

    record: RunRecord
    baseline: RunRecord | None = None


@dataclass(frozen=True)
class Chart:
    """A registered chart: its title, the question it answers, and how to draw it."""

    key: str
    title: str
    answers: str
    draw: Callable[[ChartContext], str | None]


CHARTS: list[Chart] = []


def chart(
    key: str, title: str, answers: str, first: bool = False
) -> Callable[[Callable[[ChartContext], str | None]], Callable[[ChartContext], str | None]]:
    """Register a chart drawing function (``first``: ahead of every other chart)."""

    def register(
        draw: Callable[[ChartContext], str | None],
    ) -> Callable[[ChartContext], str | None]:
        CHARTS.insert(0 if first else len(CHARTS), Chart(key, title, answers, draw))
        return draw

    return register


def render_all(ctx: ChartContext) -> list[dict[str, str]]:
    """Every chart that has something to draw for this run."""
    import matplotlib

    out = []
    # Labels are plain text: a "$" in a parameter or a check name is not math.
    # Labels are at least 11 px on the page: figures are drawn 11 in wide at 11 pt and
    # shown at the page's full width.
    with matplotlib.rc_context({"text.parse_math": False, "font.size": 11}):
        for c in CHARTS:
            try:
                with warnings.catch_warnings():  # matplotlib's advice is not the reader's
                    warnings.simplefilter("ignore")
                    drawn = c.draw(ctx)
            except (TypeError, KeyError, AttributeError, ValueError, IndexError) as exc:
                # A record read from disk whose derived section is not in the shape this
                # perfsuite writes (another version, a hand edit): the chart is left out and
                # says why; the verdicts, which never read derived sections, stand.
                reason = html.escape(f"{type(exc).__name__}: {exc}"[:200])
                drawn = (
                    '<p class="chart-error">Not drawn: the record\'s data for it is '
                    f"malformed ({reason}).</p>"
                )
            if drawn:
                out.append({"key": c.key, "title": c.title, "answers": c.answers, "svg": drawn})
    return out


def figure(width: float = 11.0, height: float = 4.0) -> Any:
    """A matplotlib figure for the report's pages (no pyplot state)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    return fig


def svg(fig: Any) -> str:
    """A figure as inline SVG, without a timestamp, so that a page is the same each time."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "perfsuite"}):
        # No metadata block: it carries a timestamp and is not needed inline.
        fig.savefig(
            buf,
            format="svg",
            metadata={"Date": None, "Creator": None, "Format": None, "Type": None},
        )
    text = buf.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog and DOCTYPE: inline SVG


def _plain_log(ax: Any, axis: str = "both") -> None:
    """Log-axis tick labels as plain numbers (the default ones are math text, off here)."""
    from matplotlib.ticker import FuncFormatter

    def plain(value: float, _: int) -> str:
        return f"{value:,.6g}"

    for which in ("x", "y") if axis == "both" else (axis,):
        target = ax.xaxis if which == "x" else ax.yaxis
        if target.get_scale() != "log":
            continue

        def minor(value: float, _: int, target: Any = target) -> str:
            # Where an axis spans under ~1.5 decades, label its 2s and 5s as well.
            lo, hi = sorted(target.get_view_interval())
            if lo <= 0 or hi / lo > 30 or value <= 0:
                return ""
            mantissa = round(value / 10 ** math.floor(math.log10(value)), 6)
            return plain(value, 0) if mantissa in (2.0, 5.0) else ""

        target.set_major_formatter(FuncFormatter(plain))
        target.set_minor_formatter(FuncFormatter(minor))


def _bytes_label(size: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size} B"


def _best(r: Result) -> float:
    return stats.best(r.samples, r.higher_is_better)


def _short(r: Result) -> str:
    return r.id.rsplit("::", 1)[-1]


@chart("roofline", "Roofline", "How close do GEMM and conv get to what this hardware allows?")
def roofline(ctx: ChartContext) -> str | None:
    """Compute ceilings, the bandwidth slope, measured points, and the baseline as ghosts."""
    section = ctx.record.derived.get("roofline") or {}
    points = section.get("points") or []
    if not points:
        return None
    ceilings = section.get("ceilings", {})
    compute = ceilings.get("compute_tflops", {})
    bandwidth, slope_note = _roofline_bandwidth(ctx.record, ceilings.get("bandwidth_gbs"))
    fig = figure(11.0, 5.0)
    ax = fig.add_subplot()
    ais = [p["ai"] for p in points]
    lo, hi = min(ais) / 4, max(ais) * 4
    if bandwidth and compute:  # keep the ridge point, where the slope meets the roof, in view
        lo = min(lo, max(compute.values()) * 1000 / bandwidth / 4)
    _roofs(ax, compute, set(ceilings.get("estimated", ())), hi / 1.15)
    if bandwidth:
        top = max(compute.values()) if compute else max(p["achieved_tflops"] for p in points)
        _slope(ax, bandwidth, slope_note, lo, top)
    ghost = None
    if ctx.baseline is not None:
        ghost = (ctx.baseline.derived.get("roofline") or {}).get("points") or []
    _roofline_points(ax, points, ghost)
    ax.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOP/B)", ylabel="TFLOP/s")
    ax.set_xlim(lo, hi)
    _plain_log(ax)
    ax.legend(fontsize=10, loc="lower right")
    return svg(fig)


def _roofline_bandwidth(record: RunRecord, datasheet: float | None) -> tuple[float | None, str]:
    """The slope's bandwidth and its note: the profile's, else the best this run measured."""
    if datasheet:
        return datasheet, ""
    # No datasheet figure (a CPU host): the bandwidth this run measured, if it did.
    measured = [
        _best(r)
        for r in record.results
        if r.check == "memory_bandwidth" and r.params.get("device") == "cpu"
    ]
    if not measured:
        return datasheet, ""
    return max(measured), " (measured in this run; the profile has none)"


def _roofs(ax: Any, compute: dict[str, float], estimated: set[str], right: float) -> None:
    """One line and one label per compute ceiling; precisions of one peak (fp16, bf16) share."""
    shared: dict[tuple[float, bool], list[str]] = {}
    for precision, peak in compute.items():
        shared.setdefault((peak, f"compute.{precision}_tflops" in estimated), []).append(precision)
    for (peak, est), precisions in shared.items():
        ax.axhline(peak, ls=":" if est else "-", lw=1, color="0.4")
        ax.annotate(
            f"{'/'.join(precisions)} {peak:.3g}{' (est.)' if est else ''}",
            (right, peak),
            ha="right",
            va="bottom",
            fontsize=10,
        )


def _slope(ax: Any, bandwidth: float, note: str, lo: float, top: float) -> None:
    """The bandwidth slope, from the left edge up to the highest roof."""
    xs = [lo, top * 1000 / bandwidth]
    ax.plot(xs, [x * bandwidth / 1000 for x in xs], color="0.4", lw=1)
    ax.annotate(
        f"{bandwidth:.4g} GB/s{note}", (lo * 1.15, lo * bandwidth / 1000), fontsize=10, va="bottom"
    )


def _roofline_points(ax: Any, points: list[Any], ghost: list[Any] | None) -> None:
    """The baseline's points as hollow grey ghosts (if any), then this run's by check."""
    if ghost is not None:
        ax.scatter(
            [p["ai"] for p in ghost],
            [p["achieved_tflops"] for p in ghost],
            s=18,
            facecolors="none",
            edgecolors="0.7",
            label="baseline",
        )
    styles = {"gemm": ("s", "C0"), "conv_roofline": ("o", "C1")}  # marker, colour
    for check, (marker, colour) in styles.items():
        # Filled: the working set is past the last-level cache, so the slope bounds it.
        # Hollow: it fits in that cache and runs from it; the memory slope does not bound it.
        for resident in (False, True):
            part = [
                p
                for p in points
                if p["check"] == check and bool(p.get("cache_resident")) == resident
            ]
            if not part:
                continue
            ax.scatter(
                [p["ai"] for p in part],
                [p["achieved_tflops"] for p in part],
                s=26 if resident else 18,
                marker=marker,
                facecolors="none" if resident else colour,
                edgecolors=colour,
                label=check.replace("_roofline", "")
                + (", fits in the cache (hollow)" if resident else ""),
                zorder=3,
            )


def _bars(
    labels: Sequence[str],
    values: Sequence[float],
    peaks: Sequence[float | None],
    unit: str,
    baselines: Sequence[float | None] = (),
) -> str:
    fig = figure(11.0, max(2.4, 0.34 * len(labels) + 1.2))
    ax = fig.add_subplot()
    y = range(len(labels))
    ax.barh(list(y), values, color="#4a78b5")
    for i, peak in enumerate(peaks):
        if peak:
            ax.plot([peak, peak], [i - 0.4, i + 0.4], color="#c0392b", lw=2)
    marked = [(i, b) for i, b in enumerate(baselines) if b]
    if marked:
        # No legend box: the axis label names the marks, and a box would cover bar ends.
        ax.plot([b for _, b in marked], [i for i, _ in marked], "D", color="0.15", ms=5)
    ax.set_yticks(list(y), labels, fontsize=10)
    ax.invert_yaxis()
    marks = ["bar: best"]
    marks += ["red tick: profile peak"] if any(peaks) else []
    marks += ["diamond: baseline median"] if marked else []
    ax.set_xlabel(f"{unit} ({'; '.join(marks)})")
    return svg(fig)


def _against_peak(ctx: ChartContext, check: str, unit: str) -> str | None:
    """Best value per result of one check, with the profile peak each was judged against."""
    rs = [r for r in ctx.record.results if r.check == check]
    if not rs:
        return None
    return _bars(
        [_short(r) for r in rs],
        [_best(r) for r in rs],
        [r.floor.peak for r in rs],
        unit,
        [r.baseline.baseline_median for r in rs],
    )


@chart("memory_bandwidth", "Memory bandwidth", "Does each device reach its datasheet bandwidth?")
def memory_bandwidth(ctx: ChartContext) -> str | None:
    """Best GB/s per kernel, backend and device, against the profile's peak."""
    return _against_peak(ctx, "memory_bandwidth", "GB/s")


@chart("gemm", "GEMM", "Does matmul reach the datasheet FLOP/s for each precision?")
def gemm(ctx: ChartContext) -> str | None:
    """Best TFLOP/s per case, against the profile's peak for the precision."""
    return _against_peak(ctx, "gemm", "TFLOP/s")


@chart("knobs", "XLA and mixed precision", "What do XLA and AMP buy on this stack?")
def knobs(ctx: ChartContext) -> str | None:
    """Each variant's speedup over the plain training step, per device."""
    speedups = ctx.record.derived.get("knob_speedups") or {}
    if not speedups:
        return None
    labels, values = [], []
    for device, by_variant in speedups.items():
        for variant, speedup in by_variant.items():
            labels.append(f"{device} {variant}")
            values.append(speedup)
    fig = figure(11.0, max(2.2, 0.34 * len(labels) + 1.2))
    ax = fig.add_subplot()
    ax.barh(range(len(labels)), values, color=["#2e8b57" if v >= 1 else "#c0392b" for v in values])
    ax.axvline(1.0, color="0.3", lw=1)
    ax.set_yticks(range(len(labels)), labels, fontsize=10)
    ax.invert_yaxis()
    ax.set_xlabel("speedup over the plain training step (x)")
    return svg(fig)


def sparkline(values: Sequence[float], width: int = 90, height: int = 18) -> str:
    """A tiny inline SVG line of a check's history (no axes: the trend at a glance)."""
    if len(values) < 2:
        return ""
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    step = width / (len(values) - 1)
    pts = " ".join(
        f"{i * step:.1f},{height - 2 - (v - lo) / span * (height - 4):.1f}"
        for i, v in enumerate(values)
    )
    return (
        f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img"><polyline fill="none" stroke="#4a78b5" stroke-width="1.5" '
        f'points="{pts}"/></svg>'
    )


@chart(
    "allreduce",
    "Allreduce",
    "How do allreduce latency and bus bandwidth scale with message size, against the baseline?",
)
def allreduce(ctx: ChartContext) -> str | None:
    """Latency and busbw against size, log-log, per backend and rank count; baseline dashed."""
    curves = (ctx.record.derived.get("allreduce") or {}).get("curves") or []
    curves = [c for c in curves if c.get("points")]
    if not curves:
        return None
    fig = figure(11.0, 4.8)
    lat_ax, bw_ax = fig.subplots(1, 2)
    for curve in curves:
        label = f"{curve['backend']} {curve['device']} x{curve['ranks']}"
        fusion = curve.get("fusion")
        if fusion:
            label += f" (fusing {fusion['tensors']}: {fusion['speedup']:.1f}x)"
        points = curve["points"]
        sizes = [p["size"] for p in points]
        (line,) = lat_ax.plot(sizes, [p["latency_us"] for p in points], "o-", label=label)
        binding = [
            (p["size"], p["binding_latency_us"]) for p in points if p.get("binding_latency_us")
        ]
        if binding:  # MPI: mpi4py's own calls, beside the C loop's collective
            bs, bl = zip(*binding, strict=True)
            lat_ax.plot(bs, bl, "x-.", color=line.get_color(), alpha=0.7, label=f"{label}, mpi4py")
        ghost = [(p["size"], p["baseline_latency_us"]) for p in points if p["baseline_latency_us"]]
        if ghost:
            gs, gl = zip(*ghost, strict=True)
            lat_ax.plot(gs, gl, "--", color=line.get_color(), alpha=0.6)
            factor = 2 * (curve["ranks"] - 1) / curve["ranks"]
            bw_ax.plot(
                gs, [s / (t * 1e-6) / 1e9 * factor for s, t in ghost], "--",
                color=line.get_color(), alpha=0.6,
            )  # fmt: skip
        bw_ax.plot(sizes, [p["busbw_gbs"] for p in points], "o-", color=line.get_color())
        if curve.get("alpha_us") is not None and curve.get("beta_ns_per_byte") is not None:
            n = curve["ranks"]
            model = [
                (2 * (n - 1) * curve["alpha_us"] + 2 * (n - 1) / n * s * curve["beta_ns_per_byte"]
                 * 1e-3)
                for s in sizes
            ]  # fmt: skip
            lat_ax.plot(sizes, model, ":", color=line.get_color(), alpha=0.8)
    all_sizes = sorted({p["size"] for c in curves for p in c["points"]})
    ticks = all_sizes if len(all_sizes) <= 8 else [s for s in all_sizes if s.bit_length() % 4 == 3]
    for ax, ylabel in ((lat_ax, "latency (µs, mean across ranks)"), (bw_ax, "busbw (GB/s)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes)", fontsize=11)
        ax.set_ylabel(ylabel, fontsize=11)
        ax.tick_params(labelsize=10)
        ax.grid(True, which="major", alpha=0.3)
        _plain_log(ax)
        ax.set_xticks(ticks, [_bytes_label(s) for s in ticks])
    fig.legend(fontsize=10, loc="outside lower center", ncols=min(3, len(curves)))
    lat_ax.set_title("latency (dotted: alpha-beta fit; dashed: baseline; x: binding)", fontsize=11)
    bw_ax.set_title("bus bandwidth = S/t x 2(n-1)/n", fontsize=11)
    return svg(fig)


@chart(
    "input_pipeline",
    "Input pipeline",
    "Can this node's tf.data pipeline feed the device at its compute limit, and which practice "
    "closes the gap?",
)
def input_pipeline(ctx: ChartContext) -> str | None:
    """Samples/s per configuration (log scale) against the compute limit; input-bound steps."""
    section = ctx.record.derived.get("input_pipeline") or {}
    configs = section.get("configs") or []
    if not configs:
        return None
    configs = sorted(configs, key=lambda c: c["samples_s"])
    fig = figure(11.0, max(3.0, 0.42 * len(configs) + 1.4))
    ax = fig.add_subplot()
    labels = [c["config"] for c in configs]
    values = [c["samples_s"] for c in configs]
    limit = configs[0].get("compute_limit_samples_s")
    colors = ["#2e8b57" if limit and v >= limit else "#c0392b" for v in values]
    ax.barh(range(len(labels)), values, color=colors if limit else "#4a78b5")
    for i, v in enumerate(values):
        ax.text(v, i, f" {v:,.0f}", va="center", fontsize=10)
    if limit:
        ax.axvline(limit, color="0.2", ls="--", lw=1.5)
        ax.set_title(
            f"dashed: compute limit {limit:,.0f} samples/s "
            f"({configs[0].get('compute_limit_source') or 'profile peak / model FLOPs'})",
            fontsize=10, loc="left",
        )  # fmt: skip
    ax.set_xscale("log")
    _plain_log(ax, "x")
    ax.set_yticks(range(len(labels)), labels, fontsize=11)
    ax.set_xlabel("samples/s after the first batch (log scale)", fontsize=11)
    ax.tick_params(axis="x", labelsize=10)
    ax.margins(x=0.15)
    return svg(fig)


FOREST_RIGHT = 100.0  # % : the forest plot's axis ends here (a ratio of 2)
OUTCOME_COLOURS = {
    "regressed": "#c0392b",
    "fail": "#c0392b",
    "noisy": "#b8860b",
    "waived": "#7f8c8d",
}


@chart(
    "changes",
    "What changed",
    "Which checks moved since the baseline, by how much, and how sure is each verdict?",
    first=True,
)
def changes(ctx: ChartContext) -> str | None:
    """A forest plot: each check's change against its baseline with its CI, worst first."""
    rows = [
        r
        for r in ctx.record.results
        if r.baseline.ratio is not None and r.baseline.ci_low is not None
    ]
    if not rows:
        return None
    rows.sort(key=lambda r: r.baseline.ratio or 1.0)
    height = max(2.4, 0.3 * len(rows) + 1.3)
    fig = figure(11.0, height)
    ax = fig.add_subplot()
    tolerance = max((r.baseline.tolerance or 0.0) for r in rows)
    if tolerance:
        ax.axvspan(-100 * tolerance, 100 * tolerance, color="#e9f6ee", zorder=0)
    ax.axvline(0, color="0.4", lw=1)
    # One very wide interval must not squeeze the rest: the axis stops at +100%, and an
    # interval that runs past it ends in an arrow.
    right = min(
        FOREST_RIGHT, max(100 * (r.baseline.ci_high - 1) for r in rows if r.baseline.ci_high)
    )
    right = max(right, 100 * tolerance, 5.0)
    for i, r in enumerate(rows):
        b = r.baseline
        assert b.ratio is not None and b.ci_low is not None and b.ci_high is not None
        colour = OUTCOME_COLOURS.get(r.outcome, "#1b7f3b" if b.verdict == "improved" else "#4a78b5")
        low, mid, high = (100 * (v - 1) for v in (b.ci_low, b.ratio, b.ci_high))
        ax.plot([low, min(high, right)], [i, i], color=colour, lw=2)
        if high > right:
            ax.plot([right], [i], ">", color=colour, ms=6)
        ax.plot([min(mid, right)], [i], "o", color=colour, ms=5)
    ax.set_yticks(range(len(rows)), [_short(r) for r in rows], fontsize=11)
    # Half a row above the first and below the last: the default 5% margin is six empty rows
    # in a plot of 126 checks.  Top to bottom, worst first.
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel(
        "change against the baseline, % (negative is worse; largest slowdown on top)\n"
        f"bar: 95% CI (arrow: runs past +{right:.0f}%); "
        f"green band: tolerance ±{100 * tolerance:g}%",
        fontsize=11,
    )
    ax.set_xlim(right=right * 1.05)
    ax.tick_params(axis="x", labelsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    return svg(fig)


@chart(
    "fidelity",
    "Fidelity",
    "Check over a bare reference in the same run: is each number the machine's or the harness's?",
)
def fidelity(ctx: ChartContext) -> str | None:
    """Each check's fidelity to its bare reference; 1.0 means the harness costs nothing."""
    rows = list((ctx.record.derived.get("fidelity") or {}).get("checks", []))
    if not rows:
        return None
    fig = figure(11.0, max(2.4, 0.27 * len(rows) + 1.2))
    ax = fig.add_subplot()
    # A check whose reference could not be built keeps its row, marked no-reference.
    values = [c["fidelity"] or 0.0 for c in rows]
    ax.barh(
        range(len(rows)),
        values,
        color=["#2e8b57" if 0.9 <= v <= 1.1 else "#c0392b" for v in values],
    )
    for i, v in enumerate(values):
        ax.text(v, i, f" {v:.2f}" if v else " no-reference", va="center", fontsize=10)
    ax.axvline(1.0, color="0.2", lw=1)
    ax.axvline(0.9, color="0.5", lw=1, ls="--")
    ax.set_yticks(range(len(rows)), [c["id"].rsplit("::", 1)[-1] for c in rows], fontsize=10)
    ax.invert_yaxis()
    ax.set_xlabel("check ÷ bare reference (green: within 0.9-1.1)", fontsize=11)
    ax.margins(x=0.12)
    return svg(fig)


@chart(
    "scaling",
    "POP scaling efficiency",
    "How do the efficiencies of a data-parallel training step hold up from 1 to N ranks, and "
    "which branch of POP's tree (load balance, communication, input, computation) loses them?",
)
def scaling(ctx: ChartContext) -> str | None:
    """Per scaling series: POP's table (the tree, rows indented) and its efficiencies by ranks."""
    section = ctx.record.derived.get("scaling") or {}
    series = [s for s in section.get("series") or [] if s.get("rows")]
    if not series:
        return None
    look = float(section.get("worth_a_look_below", 0.8))
    fig = figure(11.0, 3.6 * len(series) + 0.8)
    axes = fig.subplots(len(series), 2, squeeze=False, width_ratios=(1.25, 1))
    for (table_ax, line_ax), s in zip(axes, series, strict=True):
        title = f"{s['backend']} {s['device']}, {s['mode']} scaling"
        pop_chart.table(table_ax, s["rows"], look, title)
        pop_chart.efficiencies(line_ax, s["rows"], look)
    axes[0][1].legend(fontsize=9, loc="lower left")
    fig.suptitle(
        "Global = parallel x computation scalability; parallel = load balance x communication "
        "efficiency; input efficiency (1 - the step's share waiting for input) is a factor of\n"
        "communication efficiency.  Medians over timed steps; the hatched 1-rank column is the "
        "reference run.",
        fontsize=9, x=0.01, ha="left",
    )  # fmt: skip
    return svg(fig)
