"""Comparing two run records (pre-upgrade A/B): per-check verdicts and the environment diff."""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from perfsuite import stats
from perfsuite.errors import PerfsuiteError
from perfsuite.model import BaselineVerdict, Result, RunRecord

# Readings that change from run to run by nature; they are noise facts, not configuration.
VOLATILE = (
    "host.load_average",
    "host.cpu_mhz",
    "gpus.*.sm_clock_mhz",
    "gpus.*.mem_clock_mhz",
    "gpus.*.temperature_c",
    "gpus.*.throttle_reasons",
)


@dataclass(frozen=True)
class Row:
    """One check compared across the two runs."""

    id: str
    unit: str
    a_median: float
    b_median: float
    comparison: stats.Comparison
    verdict: str
    reason: str


def flatten(data: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Nested dicts (and lists of dicts) as dotted keys and leaf values."""
    if isinstance(data, Mapping):
        for key, value in data.items():
            yield from flatten(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(data, list) and data and all(isinstance(v, Mapping) for v in data):
        for index, value in enumerate(data):
            yield from flatten(value, f"{prefix}.{index}")
    else:
        yield prefix, data


def _volatile(key: str) -> bool:
    parts = key.split(".")
    for pattern in VOLATILE:
        pat = pattern.split(".")
        if len(pat) == len(parts) and all(p in ("*", k) for p, k in zip(pat, parts, strict=True)):
            return True
    return False


def environment_diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """What changed between two fingerprints, as (key, old, new); run-to-run readings left out."""
    old, new = dict(flatten(a)), dict(flatten(b))
    keys = sorted(set(old) | set(new))
    return [
        (k, old.get(k), new.get(k)) for k in keys if old.get(k) != new.get(k) and not _volatile(k)
    ]


def compare_runs(
    a: RunRecord, b: RunRecord, *, tolerance: float | None = None, alpha: float = stats.ALPHA
) -> tuple[list[Row], list[str], list[str]]:
    """Compare B against A check by check, with Holm over all compared checks.

    ``tolerance`` overrides the tolerance each result of B was judged with.
    """
    pa, pb = a.hardware_profile.get("name"), b.hardware_profile.get("name")
    if pa != pb:
        raise PerfsuiteError(
            f"refusing to compare runs of different hardware profiles: {a.run_id} ran on "
            f"{pa!r}, {b.run_id} on {pb!r}"
        )
    a_results: dict[str, Result] = {r.id: r for r in a.results}
    b_results: dict[str, Result] = {r.id: r for r in b.results}
    common = [i for i in b_results if i in a_results and a_results[i].unit == b_results[i].unit]
    comparisons = [
        stats.compare(
            b_results[i].samples,
            a_results[i].samples,
            higher_is_better=b_results[i].higher_is_better,
            seed=zlib.crc32(i.encode()),
        )
        for i in common
    ]
    significant = stats.holm([c.p_value for c in comparisons], alpha)
    rows = []
    for node_id, comparison, sig in zip(common, comparisons, significant, strict=True):
        rb = b_results[node_id]
        tol = tolerance if tolerance is not None else rb.baseline.tolerance or 0.05
        verdict, reason = stats.decide(
            comparison, tolerance=tol, significant=sig, guards=rb.noise.get("flags", ())
        )
        rows.append(
            Row(
                node_id,
                rb.unit,
                a_results[node_id].summary.median,
                rb.summary.median,
                comparison,
                verdict,
                reason,
            )
        )
    only_a = sorted(set(a_results) - set(common))
    only_b = sorted(set(b_results) - set(common))
    return rows, only_a, only_b


def compared_record(b: RunRecord, rows: list[Row]) -> RunRecord:
    """Run B with each compared result's baseline verdict replaced by the A/B verdict."""
    by_id = {row.id: row for row in rows}
    results = []
    for r in b.results:
        row = by_id.get(r.id)
        if row is None:
            results.append(replace(r, baseline=BaselineVerdict("new", reason="not in run A")))
            continue
        c = row.comparison
        verdict = BaselineVerdict(
            row.verdict,
            ratio=c.ratio,
            tolerance=r.baseline.tolerance,
            baseline_median=row.a_median,
            reason=row.reason,
            ci_low=c.ci_low,
            ci_high=c.ci_high,
            p_value=c.p_value,
            n_baseline=c.n_baseline,
            few_samples=c.few_samples,
        )
        results.append(replace(r, baseline=verdict))
    return replace(b, results=tuple(results))
