"""The self-contained HTML regression report.

jinja2 with autoescaping renders one file with inline CSS, inline SVG charts (matplotlib)
and a small inline script for sorting and filtering; nothing is fetched from the network.
Its first screen answers: did anything regress, by how much and how sure, and what changed
in the environment.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from perfsuite.judge import outcome, stats, trends
from perfsuite.judge.compare import environment_diff, flat_environment
from perfsuite.model import Result, RunRecord
from perfsuite.report import of_reference
from perfsuite.report.charts import ChartContext, render_all, sparkline
from perfsuite.report.explain import (
    cannot_detect_note,
    flag_words,
    floor_reason,
    load_tag,
    mode_tag,
    reference_tag,
)
from perfsuite.report.headline import floor_label, headline
from perfsuite.report.notes import (
    baseline_note,
    machine_note,
    verdict_advice,
    young_baseline_note,
)

VERDICT_ORDER = {"regressed": 0, "noisy": 1, "improved": 2, "new": 3, "ok": 4}
# Checks the banner names, worst first; the table has the rest.
BANNER_NAMED = 5


@functools.cache
def _environment() -> Any:
    """The template environment, made once per process: it caches the compiled templates."""
    from jinja2 import Environment, PackageLoader, select_autoescape

    env = Environment(
        loader=PackageLoader("perfsuite.report", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["floor_class"] = floor_class
    return env


# The CSS class of each floor label (headline.floor_label): a miss under load is a warning.
FLOOR_CLASSES = {
    "fail": "fail",
    "fail (under load)": "warning",
    "warning (est.)": "warning",
    "pass": "pass",
    "no-reference": "no-reference",
}


def floor_class(label: str) -> str:
    """The CSS class a floor label is shown with."""
    return FLOOR_CLASSES.get(label, "no-reference")


def _pct(x: float | None, signed: bool = False) -> str:
    if x is None:
        return ""
    return f"{x:+.1%}" if signed else f"{x:.1%}"


def _row(r: Result, history: Sequence[float]) -> dict[str, Any]:
    b, f = r.baseline, r.floor
    best = stats.best(r.samples, r.higher_is_better)
    change = "" if b.ratio is None else _pct(b.ratio - 1, signed=True)
    ci = (
        ""
        if b.ci_low is None or b.ci_high is None
        else f"[{_pct(b.ci_low - 1, True)}, {_pct(b.ci_high - 1, True)}]"
    )
    waiver = r.waiver.status if r.waiver else ""
    params = ", ".join(f"{k}={v}" for k, v in r.params.items())
    name = r.id.rsplit("::", 1)[-1]
    return {
        "id": r.id,
        "name": name,
        "check": r.check,
        "params": params,
        "value": f"{best:.4g}",
        "value_sort": best,
        "unit": r.unit,
        "peak": of_reference(f),
        "peak_sort": f.fraction_of_peak if f.fraction_of_peak is not None else -1,
        "baseline": "" if b.baseline_median is None else f"{b.baseline_median:.4g}",
        "change": change,
        "change_sort": b.ratio - 1 if b.ratio is not None else 0,
        "ci": ci,
        "p": "" if b.p_value is None else f"{b.p_value:.2g}",
        "verdict": b.verdict,
        "verdict_sort": VERDICT_ORDER.get(b.verdict, 9),
        "floor": floor_label(r),
        "floor_failed": outcome.floor_missed(r) and not outcome.tainted(r),
        "waiver": waiver,
        "outcome": outcome.of(r),
        "reason": "; ".join(
            x
            for x in (
                b.reason if b.verdict != "new" else "",
                load_tag(r),
                reference_tag(r),
                mode_tag(r),
                cannot_detect_note(b),
                floor_reason(f),
                *map(flag_words, r.noise_flags),
            )
            if x
        ),
        "spark": sparkline(history),
        "search": " ".join([r.id, params, b.verdict, f.verdict, waiver, outcome.of(r)]).lower(),
    }


def _flat_environment(
    env: Mapping[str, Any], base: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    changed = (
        {k: (old, new) for k, old, new in environment_diff(base, env)} if base is not None else {}
    )
    rows = []
    for key, value in flat_environment(env).items():
        rows.append(
            {
                "key": key,
                "value": value,
                "changed": key in changed,
                "old": changed.get(key, (None,))[0],
            }
        )
    for key, (old, new) in changed.items():
        if new is None:
            rows.append({"key": key, "value": None, "changed": True, "old": old})
    return sorted(rows, key=lambda r: (not r["changed"], r["key"]))


def render(
    record: RunRecord,
    *,
    baseline: RunRecord | None = None,
    baseline_environment: Mapping[str, Any] | None = None,
    history: Sequence[RunRecord] = (),
    title: str = "perfsuite regression report",
    compared_with: Sequence[str] = (),
    baseline_notice: str = "",
) -> str:
    """Render a run record (with its baseline run and history, where known) as HTML.

    ``compared_with``: the run ids an A/B judged it against (``perfsuite compare``), named in
    the header instead of the one baseline run.
    """
    started = time.perf_counter()
    earlier = [h for h in history if h.created <= record.created and h.run_id != record.run_id]
    series = {s.id: [p.median for p in s.points] for s in trends.series(earlier)}
    ordered = outcome.worst_first(record.results)
    rows = [_row(r, [*series.get(r.id, []), r.summary.median]) for r in ordered]
    by_id = {row["id"]: row for row in rows}
    verdicts = Counter(r.baseline.verdict for r in record.results)
    # An estimated peak's miss is a warning, never a "fail" (the one outcome rule's view).
    floors = Counter(floor_label(r) for r in record.results)
    outcomes = outcome.counts(record.results)
    base_env = baseline.environment if baseline is not None else baseline_environment
    env_rows = _flat_environment(record.environment, base_env)
    fail_on = record.settings.get("fail_on") or outcome.DEFAULT_FAIL_ON
    verdict = outcome.record_verdict(record, fail_on)
    charts = render_all(ChartContext(record, baseline))
    host = record.environment.get("host", {})
    html = (
        _environment()
        .get_template("report.html.j2")
        .render(
            title=title,
            record=record,
            profile=record.hardware_profile,
            host=host.get("hostname", "?") if isinstance(host, Mapping) else "?",
            rows=rows,
            verdict=verdict,
            headline=headline(verdict),
            advice=verdict_advice(verdict),
            baseline_notice=baseline_notice,
            failing=[by_id[r.id] for r in verdict.failing],
            noisy=[by_id[r.id] for r in verdict.noisy],
            tolerated=[by_id[r.id] for r in verdict.tolerated],
            fail_on=", ".join(sorted(fail_on)),
            banner_named=BANNER_NAMED,
            machine=machine_note(record.results),
            back_to_back=young_baseline_note(record.results) or baseline_note(record.results),
            verdicts=dict(verdicts),
            floors=dict(floors),
            outcomes=dict(outcomes),
            env_rows=env_rows,
            env_changes=[row for row in env_rows if row["changed"]],
            has_baseline_env=base_env is not None,
            baseline_run=(
                ", ".join(compared_with)
                if compared_with
                else baseline.run_id
                if baseline is not None
                else ""
            ),
            baseline_runs=len(compared_with) or (1 if baseline is not None else 0),
            charts=charts,
            render_seconds=None,
        )
    )
    seconds = f"{time.perf_counter() - started:.2f}"
    return with_script_hash(str(html).replace("__RENDER_SECONDS__", seconds))


def with_script_hash(page: str) -> str:
    """Allow exactly the page's own inline script in its CSP, by hash (no 'unsafe-inline')."""
    start = page.index("<script>") + len("<script>")
    body = page[start : page.index("</script>", start)]
    digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
    return page.replace("script-src __SCRIPT_HASH__", f"script-src 'sha256-{digest}'")
