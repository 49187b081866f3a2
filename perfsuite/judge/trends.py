"""Trends over a profile's run history: change points, what changed with them, and the exit.

Pairwise comparisons miss gradual drift and a level that moved a few nights ago: each run is
within tolerance of the last.  Over each check's series of per-run medians, the level shifts
are found by :mod:`perfsuite.judge.changepoints` (one bad night is an outlier, never two changes),
the p-values of every check of the profile form one family under the run verdict's
correction, and each change is tied to what changed in the recorded stack that night
(:mod:`perfsuite.judge.attribution`).  Run numbers count the profile's runs, oldest first, so a
check missing from the first runs keeps the night's number.

The runs are read by the caller (a folder of run records per profile, or the store):
judging reads no files.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from perfsuite.judge import changepoints as cps
from perfsuite.judge import stats
from perfsuite.judge.attribution import Attribution, attribute
from perfsuite.model import RunRecord

NIGHTS_STEPS = (0.05, 0.10, 0.20)  # the steps whose nights-to-detect each check shows
DEFAULT_MIN_EFFECT = 0.02


@dataclass(frozen=True)
class Point:
    """One run's summary of one check; ``run`` counts the profile's runs from 1."""

    run_id: str
    created: str
    median: float
    run: int = 0


@dataclass(frozen=True)
class Series:
    """One check across runs."""

    id: str
    unit: str
    higher_is_better: bool
    points: tuple[Point, ...]


@dataclass(frozen=True)
class ChangePoint:
    """A shift in level: ``index`` is the first point of the new level."""

    index: int
    ratio: float  # level after / level before, oriented so below 1 is worse


@dataclass(frozen=True)
class Settings:
    """What a history is judged with: the command's options."""

    min_effect: float = DEFAULT_MIN_EFFECT
    alpha: float = stats.ALPHA
    correction: str = stats.DEFAULT_CORRECTION
    checks: tuple[str, ...] = ()
    last: int | None = None
    since: dt.datetime | None = None
    fail_on: tuple[str, ...] = ("regressed",)

    def to_json(self) -> dict[str, Any]:
        """The settings as the ``--json`` document holds them."""
        return {
            "min_effect": self.min_effect,
            "alpha": self.alpha,
            "correction": self.correction,
            "checks": list(self.checks),
            "last": self.last,
            "since": self.since.isoformat() if self.since else None,
            "fail_on": list(self.fail_on),
        }


@dataclass(frozen=True)
class Found:
    """A change point of a check, placed among the profile's runs and attributed."""

    change: cps.Change
    run: int  # the profile's run number of the first run at the new level
    run_id: str
    created: str
    attribution: Attribution


@dataclass(frozen=True)
class Trend:
    """One check's history, judged."""

    series: Series
    changes: tuple[Found, ...]
    outliers: tuple[int, ...]  # run numbers set aside as one-off readings
    spread: float  # robust run-to-run sd of log values
    nights: tuple[int | None, ...]  # nights to find each of NIGHTS_STEPS, 95% of the time
    verdict: str  # regressed, improved, steady or unknown (too few runs to judge)


def numbered(runs: Sequence[RunRecord]) -> list[tuple[int, RunRecord]]:
    """Each run with its number among the profile's runs (1 = the oldest)."""
    return list(enumerate(runs, start=1))


def window(
    runs: Sequence[tuple[int, RunRecord]], *, last: int | None, since: dt.datetime | None
) -> list[tuple[int, RunRecord]]:
    """The runs ``--since`` and ``--last`` keep (both: the last N since the date)."""
    kept = list(runs)
    if since is not None:
        kept = [(i, r) for i, r in kept if _created(r) >= since]
    return kept[-last:] if last else kept


def _created(record: RunRecord) -> dt.datetime:
    value = dt.datetime.fromisoformat(record.created)
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def series(records: Sequence[RunRecord], numbers: Sequence[int] | None = None) -> list[Series]:
    """Each check's medians across runs, oldest first, with the runs' numbers."""
    numbers = list(numbers) if numbers is not None else list(range(1, len(records) + 1))
    points: dict[str, list[Point]] = {}
    meta: dict[str, tuple[str, bool]] = {}
    for number, record in zip(numbers, records, strict=True):
        for result in record.results:
            points.setdefault(result.id, []).append(
                Point(record.run_id, record.created, result.summary.median, number)
            )
            meta[result.id] = (result.unit, result.higher_is_better)
    return [Series(i, *meta[i], tuple(p)) for i, p in sorted(points.items())]


def change_points(
    values: Sequence[float], *, higher_is_better: bool, tolerance: float
) -> tuple[list[ChangePoint], float | None]:
    """Level shifts of one series (its own family), and the drift first to last level.

    The drift (None unless there are two changes or more, and it exceeds ``tolerance``)
    says something the single steps do not: where a series of small steps has taken it.
    """
    found = cps.detect(values, higher_is_better=higher_is_better, min_effect=tolerance)
    out = [ChangePoint(c.index, c.ratio) for c in found]
    drift = None
    if len(found) > 1:
        drift = math.prod(c.ratio for c in found)
        if abs(drift - 1) <= tolerance:
            drift = None
    return out, drift


def trends(runs: Sequence[tuple[int, RunRecord]], settings: Settings) -> list[Trend]:
    """Every check's trend over ``runs`` (numbered), judged as one family."""
    checks, min_effect, alpha = settings.checks, settings.min_effect, settings.alpha
    correction = settings.correction
    by_id = {r.run_id: r for _, r in runs}
    chosen = [
        s
        for s in series([r for _, r in runs], [i for i, _ in runs])
        if not checks or any(k in s.id for k in checks)
    ]
    scans = [
        cps.scan(
            [p.median for p in s.points],
            higher_is_better=s.higher_is_better,
            min_effect=min_effect,
            alpha=alpha,
        )
        for s in chosen
    ]
    family = max(1, sum(len(s.p_values) for s in scans))
    out = []
    for s, scan, found in zip(
        chosen, scans, cps.significant(scans, alpha=alpha, correction=correction), strict=True
    ):
        placed = tuple(_placed(s, c, scan.outliers, by_id) for c in found)
        nights = tuple(
            cps.nights_to_detect(
                scan.spread, step, before=len(s.points), min_effect=min_effect, alpha=alpha / family
            )
            for step in NIGHTS_STEPS
        )
        outliers = tuple(s.points[i].run for i in scan.outliers)
        out.append(Trend(s, placed, outliers, scan.spread, nights, _verdict(scan, placed)))
    return out


def _verdict(scan: cps.Scan, found: Sequence[Found]) -> str:
    if scan.n < cps.MIN_POINTS:
        return "unknown"
    directions = {f.change.direction for f in found}
    return (
        "regressed" if "regressed" in directions else directions.pop() if directions else "steady"
    )


def _placed(
    s: Series, change: cps.Change, outliers: Sequence[int], by_id: dict[str, RunRecord]
) -> Found:
    """A change among the profile's runs, attributed to the last steady run before it."""
    after = s.points[change.index]
    k = change.index - 1
    while k > 0 and k in outliers:
        k -= 1
    before = s.points[k]
    why = attribute(
        by_id[before.run_id], by_id[after.run_id], check=s.id, direction=change.direction
    )
    return Found(change, after.run, after.run_id, after.created, why)


def exit_verdicts(trends_: Sequence[Trend]) -> set[str]:
    """The verdicts the shown checks reached (what ``--fail-on`` is matched against)."""
    return {t.verdict for t in trends_}


def since_arg(text: str) -> dt.datetime:
    """``--since``: an ISO date (or date and time; UTC unless it says)."""
    try:
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an ISO date such as 2026-11-30 (or 2026-11-30T06:00), got {text[:40]!r}"
        ) from None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
