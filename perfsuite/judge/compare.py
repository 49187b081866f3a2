"""Comparing two run records (pre-upgrade A/B): per-check verdicts and the environment diff."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from perfsuite.errors import PerfsuiteError, StorageError
from perfsuite.judge import against, family, outcome, speed, stats, waivers
from perfsuite.measure import readings
from perfsuite.measure.redaction import redact
from perfsuite.model import (
    BaselineVerdict,
    Because,
    FlagKind,
    LoadCancelled,
    MachineReading,
    NoiseFlag,
    PassesKept,
    Result,
    RunRecord,
    Why,
)
from perfsuite.model.baseline import (
    BaselineRun,
    load_cores,
    paired_ratios,
    same_direction,
)

# B's samples, A's runs and the machine's move they were adjusted by (None: unadjusted).
Judged = tuple[Sequence[float], list[Sequence[float]], speed.SpeedChange | None]

# Readings that change from run to run by nature; they are noise facts, not configuration.
VOLATILE = (
    "host.load_average",
    "host.cpu_mhz",
    "gpus.*.sm_clock_mhz",
    "gpus.*.mem_clock_mhz",
    "gpus.*.temperature_c",
    "gpus.*.throttle_reasons",
    "gpus.*.pcie_generation",  # the link trains down when idle; the max is the configuration
)


@dataclass(frozen=True)
class Row:
    """One check compared across the two runs."""

    id: str
    unit: str
    a_median: float
    b_median: float
    comparison: stats.Comparison
    decision: family.Decision
    machine: speed.SpeedChange | None = None  # the probe's move, when judged per machine speed
    significant: bool = False  # after the correction over every compared check
    noise_flags: tuple[NoiseFlag, ...] = ()  # noise flags that keep a change "noisy"
    judged_against_bound: str = ""  # "slower"/"faster": see family.decide
    # With judged_against_bound: the link state B was measured in.
    bound_because: NoiseFlag | None = None
    load: LoadCancelled | None = None  # judged by the ratios to the paired bare reference

    @property
    def verdict(self) -> str:
        """The A/B verdict: ok, regressed, improved or noisy."""
        return self.decision.verdict


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


def flat_environment(env: Mapping[str, Any]) -> dict[str, Any]:
    """A fingerprint as dotted keys; variables that look like secrets are redacted.

    Records written before capture redacted secrets are cleaned here too, so no report or
    diff ever shows one.
    """
    out = {}
    for key, value in flatten(env):
        if key.startswith("variables.") and isinstance(value, str):
            value = redact(key.split(".", 1)[1], value)
        out[key] = value
    return out


def environment_diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """What changed between two fingerprints, as (key, old, new).

    Left out: run-to-run readings, and whether a library was imported (which depends on the
    checks that ran, not on the stack), with the facts only an imported library can tell
    unless both runs imported it.  Its version is always compared.
    """
    old, new = flat_environment(a), flat_environment(b)
    keys = sorted(set(old) | set(new))
    return [
        (k, old.get(k), new.get(k))
        for k in keys
        if old.get(k) != new.get(k) and not _volatile(k) and _stack_fact(k, old, new)
    ]


def _stack_fact(key: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether a key describes the stack in both runs alike (see :func:`environment_diff`)."""
    parts = key.split(".")
    if len(parts) != 3 or parts[0] != "software" or parts[2] == "version":
        return True
    if parts[2] == "loaded":
        return False
    loaded = f"software.{parts[1]}.loaded"
    return old.get(loaded) is not False and new.get(loaded) is not False


def fastest_passes(passes: Sequence[RunRecord]) -> RunRecord:
    """One session measured in several passes, as one record: each check's fastest pass.

    On a machine that slows down for spells longer than a check, a run's slow results form a
    long tail; the fastest of passes minutes apart steps over a spell unless it catches them
    all (see ``lab/best_of_passes.py``).  Judge a session kept this way only against
    baselines kept the same way.  Each kept result says which pass it came from and every
    pass's median (``facts.passes``).  A check missing from a pass, or measured there in
    another unit, is left out of the session (compare then lists it as only on one side).
    The passes must share the profile and the environment (the stack under test); the
    merged record has the first pass's metadata and no derived sections.
    """
    if not passes:
        raise PerfsuiteError("a session needs at least one pass")
    ids = [p.run_id for p in passes]
    if len(set(ids)) != len(ids):
        raise PerfsuiteError(f"a run record is given twice in one session: {', '.join(ids)}")
    names = {p.hardware_profile.get("name") for p in passes}
    if len(names) != 1:
        raise PerfsuiteError(
            f"the passes of one session ran on different hardware profiles: "
            f"{', '.join(sorted(map(str, names)))} ({', '.join(ids)})"
        )
    for p in passes[1:]:
        diff = environment_diff(passes[0].environment, p.environment)
        if diff:
            key, old, new = diff[0]
            raise PerfsuiteError(
                f"{passes[0].run_id} and {p.run_id} are not passes of one session: their "
                f"environments differ ({key}: {old!r} -> {new!r}{', ...' if len(diff) > 1 else ''})"
                "; give each session's records together, before's first"
            )
    for p in passes[1:]:
        same_directions(passes[0], p)
    results = []
    for first in passes[0].results:
        found = [r for p in passes for r in p.results if r.id == first.id]
        if len(found) != len(passes) or any(r.unit != first.unit or not r.samples for r in found):
            continue  # not measured alike in every pass: not compared
        k, best = max(enumerate(found), key=lambda kr: _speed(kr[1]))
        medians = tuple((ids[j], statistics.median(r.samples)) for j, r in enumerate(found))
        results.append(replace(best, facts=replace(best.facts, passes=PassesKept(ids[k], medians))))
    durations = [p.duration_s for p in passes]
    crashed = {c.id: c for p in passes for c in p.crashed}  # a crash in any pass counts
    return replace(
        passes[0],
        run_id="+".join(ids),
        incomplete="; ".join(f"{p.run_id}: {p.incomplete}" for p in passes if p.incomplete),
        crashed=tuple(crashed.values()),
        results=tuple(results),
        duration_s=None if None in durations else sum(d or 0.0 for d in durations),
        derived={},  # roofline, knob speedups: each pass's own; a merged session has none
    )


def _speed(result: Result) -> float:
    """A result's median, oriented so that higher is faster."""
    median = statistics.median(result.samples)
    return median if result.higher_is_better else -median


def sessions(records: Sequence[RunRecord], passes: int) -> list[RunRecord]:
    """Records in order, every ``passes`` consecutive ones one session, each kept fastest."""
    if passes < 1:
        raise PerfsuiteError(f"passes must be 1 or more, not {passes}")
    if passes == 1:
        return list(records)
    if len(records) % passes or len(records) < 2 * passes:
        raise PerfsuiteError(
            f"{len(records)} run records do not make whole sessions of {passes} passes, at "
            f"least one before and one after: give a multiple of {passes}, {2 * passes} or more"
        )
    return [fastest_passes(records[i : i + passes]) for i in range(0, len(records), passes)]


def compare_runs(
    a: RunRecord | Sequence[RunRecord],
    b: RunRecord,
    *,
    tolerance: float | None = None,
    alpha: float = stats.ALPHA,
    correction: str = stats.DEFAULT_CORRECTION,
    window_s: float = stats.BACK_TO_BACK_S,
) -> tuple[list[Row], list[str], list[str]]:
    """Compare B against the run(s) A check by check, corrected over all compared checks.

    Several A runs act as a multi-run baseline: their run-to-run spread is then known, once
    they come from :data:`perfsuite.judge.stats.MIN_RUNS` sessions (runs created within
    ``window_s`` of a session's first share it; 0: each run its own, see ``stats.sessions``).
    ``tolerance`` overrides the tolerance each result of B was judged with.
    """
    before = [a] if isinstance(a, RunRecord) else list(a)
    if not before:
        raise PerfsuiteError("compare needs at least one run before the change")
    comparable(before, b)
    b_results: dict[str, Result] = {r.id: r for r in b.results}
    runs, created = _runs_before(before, b_results)
    common = [i for i in b_results if i in runs]
    # Under foreign load (B's, or some of A's runs'), as the plugin judges a stored baseline:
    # against the runs the plan names, by the pairs' ratios where it says so.
    plans = {i: p for i in common if (p := _load_plan(b_results[i], runs[i])) is not None}
    for i, plan in plans.items():
        runs[i] = [runs[i][k] for k in plan.runs]
        created[i] = [created[i][k] for k in plan.runs]
    judged = {i: _judged_samples(b_results[i], runs[i]) for i in common}
    by_ratio = {i: plan.load for i, plan in plans.items() if plan.load is not None}
    for i in by_ratio:
        judged[i] = (_ratios(b_results[i]), [_ratios(r) for r in runs[i]], None)
    # Each run of A's reading, kept as a baseline run would keep it (see baseline.py).
    kept = {
        i: [
            readings.stored(r.machine, link=readings.follows_link(b_results[i].params))
            for r in runs[i]
        ]
        for i in common
    }
    # The prior over every run of A, as the plugin fits it over a baseline's runs.
    pairs = [
        pair
        for i in common
        for pair in speed.run_variances(judged[i][1], kept[i], b_results[i].higher_is_better)
    ]
    prior = stats.fit_prior([v for v, _ in pairs], [d for _, d in pairs])
    # A check's A side is young when A has runs of it from too few sessions (before any
    # link-state subset).
    states = {i: stats.sessions_of(created[i], window_s) for i in common}
    unpaired = [i for i in common if i not in by_ratio]
    link_flags, bounds = _like_links(unpaired, b_results, runs, judged, kept, tolerance)
    members = []
    for i in common:
        rb = b_results[i]
        comparison = stats.compare(
            judged[i][0],
            judged[i][1],
            higher_is_better=rb.higher_is_better,
            prior=prior,
            cautious=states[i] < stats.MIN_RUNS,
            sessions=states[i],
        )
        tol = _tolerance(rb, tolerance)
        flags = _flags(rb, runs[i], judged[i][2], tol, link_flags.get(i), plans.get(i))
        members.append(family.Member(comparison, tol, flags, bounds.get(i, ("", None))[0]))
    decided = family.decide_family(members, alpha=alpha, correction=correction)
    bound_flags = {i: bound[1] for i, bound in bounds.items()}
    rows = _rows(common, b_results, runs, judged, members, decided, bound_flags)
    rows = [replace(row, load=by_ratio[row.id]) if row.id in by_ratio else row for row in rows]
    a_ids = {r.id for record in before for r in record.results}
    only_a = sorted(a_ids - set(common))
    only_b = sorted(set(b_results) - set(common))
    return rows, only_a, only_b


def _rows(
    common: Sequence[str],
    b_results: Mapping[str, Result],
    runs: Mapping[str, list[Result]],
    judged: Mapping[str, Judged],
    members: Sequence[family.Member],
    decided: Sequence[tuple[family.Decision, bool]],
    bound_flags: Mapping[str, NoiseFlag | None],
) -> list[Row]:
    """Each compared check's row: its medians, comparison, decision and flags."""
    return [
        Row(
            node_id,
            b_results[node_id].unit,
            float(math.exp(statistics.fmean(math.log(r.summary.median) for r in runs[node_id]))),
            b_results[node_id].summary.median,
            member.comparison,
            decision,
            judged[node_id][2],
            bool(sig),
            tuple(member.noise_flags),
            member.judged_against_bound,
            bound_flags.get(node_id),
        )
        for node_id, member, (decision, sig) in zip(common, members, decided, strict=True)
    ]


def _runs_before(
    before: Sequence[RunRecord], b_results: Mapping[str, Result]
) -> tuple[dict[str, list[Result]], dict[str, list[str]]]:
    """Each check's results in the runs before, in B's unit, and when each run was made."""
    runs: dict[str, list[Result]] = {}
    created: dict[str, list[str]] = {}
    for record in before:
        for r in record.results:
            rb = b_results.get(r.id)
            if rb is not None and r.unit == rb.unit:
                runs.setdefault(r.id, []).append(r)
                created.setdefault(r.id, []).append(record.created)
    return runs, created


def _like_links(
    common: Sequence[str],
    b_results: Mapping[str, Result],
    runs: dict[str, list[Result]],
    judged: dict[str, Judged],
    kept: Mapping[str, list[MachineReading | None]],
    tolerance: float | None,
) -> tuple[dict[str, NoiseFlag], dict[str, tuple[str, NoiseFlag | None]]]:
    """Checks that follow the CPUs' link, compared like with like as the plugin does.

    Or with the runs that bound them: ``runs`` and ``judged`` are narrowed in place; returns
    the link flags and the bounds.
    """
    link_flags: dict[str, NoiseFlag] = {}
    bounds: dict[str, tuple[str, NoiseFlag | None]] = {}
    for i in common:
        rb = b_results[i]
        if not readings.follows_link(rb.params):
            continue
        same, flag, way = speed.link_runs(
            rb.samples,
            [r.samples for r in runs[i]],
            rb.machine,
            kept[i],
            params=rb.params,
            higher_is_better=rb.higher_is_better,
            tolerance=_tolerance(rb, tolerance),
        )
        if way:
            bounds[i] = (way, flag)
        elif flag:
            link_flags[i] = flag
        if same is not None:
            runs[i] = [runs[i][k] for k in same]
            judged[i] = _judged_samples(rb, runs[i])
    return link_flags, bounds


def comparable(before: Sequence[RunRecord], b: RunRecord) -> None:
    """Refuse to judge ``b`` against ``before`` across hardware profiles or directions.

    They must have run on one hardware profile, and agree on every shared check's direction
    (see :func:`same_directions`).
    """
    names = {r.hardware_profile.get("name") for r in before}
    pb = b.hardware_profile.get("name")
    if names != {pb}:
        raise StorageError(
            f"refusing to compare runs of different hardware profiles: "
            f"{', '.join(sorted(map(str, names)))} against {pb!r} ({b.run_id})"
        )
    for record in before:
        same_directions(record, b)


def same_directions(a: RunRecord, b: RunRecord) -> None:
    """Refuse two records that measure a check in one unit but disagree on its direction.

    See :func:`perfsuite.store.baseline.same_direction`; a check measured in another unit is not
    compared at all.
    """
    theirs = {r.id: r for r in b.results}
    for r in a.results:
        other = theirs.get(r.id)
        if other is not None:
            same_direction(
                r.id, (f"run {a.run_id}", r), (f"run {b.run_id}", other), "refusing to compare"
            )


def _tolerance(b: Result, tolerance: float | None) -> float:
    """The tolerance a comparison applies to B's result: the one given, or B's own."""
    return tolerance if tolerance is not None else b.baseline.tolerance or 0.05


def _judged_samples(b: Result, a_runs: Sequence[Result]) -> Judged:
    """B's samples and A's runs, per unit of machine speed when every run has a probe."""
    change = speed.machine_change(b.machine, [r.machine for r in a_runs])
    runs: list[Sequence[float]] = [r.samples for r in a_runs]
    if change is None:
        return b.samples, runs, None
    return (
        speed.adjust(b.samples, change.now, b.higher_is_better),
        list(speed.adjust_runs(runs, change.rates, b.higher_is_better)),
        change,
    )


def _ratios(result: Result) -> tuple[float, ...]:
    return paired_ratios(result.bare_reference, len(result.samples))


def _flags(
    b: Result,
    a_runs: Sequence[Result],
    change: speed.SpeedChange | None,
    tolerance: float,
    link_flag: NoiseFlag | None,
    plan: against.LoadPlan | None,
) -> tuple[NoiseFlag, ...]:
    """What B's comparison with A's runs had to allow for, as the plugin's judge flags it.

    B's own flags, a link state unlike A's, a machine that moved beyond the tolerance
    (``change``: :func:`perfsuite.judge.speed.machine_change`'s, or None) and a load the
    pairs did not cancel; judged by the pairs' ratios, the load is no flag against them.
    """
    if plan is not None and plan.load is not None:
        return tuple(f for f in b.noise_flags if f.kind is not FlagKind.FOREIGN_LOAD)
    raw = speed.raw_ratio(b.samples, [r.samples for r in a_runs], b.higher_is_better)
    guard = speed.guard(change, tolerance, raw)
    extra = (link_flag, guard, plan.flag if plan is not None else None)
    return (*b.noise_flags, *(f for f in extra if f is not None))


def _load_plan(b: Result, a_runs: Sequence[Result]) -> against.LoadPlan | None:
    """How B is compared with A's runs when a load touched either (:func:`load_plan`)."""
    runs = [
        BaselineRun(r.id, "", tuple(r.samples), pair_ratios=_ratios(r), load_cores=load_cores(r))
        for r in a_runs
    ]
    return against.load_plan(runs, b.noise_flags, bool(_ratios(b)))


def compared_record(
    b: RunRecord, rows: list[Row], tolerance: float | None = None, correction: str = ""
) -> RunRecord:
    """Run B with each compared result's baseline verdict replaced by the A/B verdict.

    ``tolerance`` is the one the comparison applied, when given (else B's own, as there);
    ``correction`` the one it corrected with.  The report words them
    (:func:`perfsuite.report.explain.explained_record`).
    """
    by_id = {row.id: row for row in rows}
    results = []
    for r in b.results:
        row = by_id.get(r.id)
        if row is None:
            fresh = replace(r, baseline=BaselineVerdict("new", why=Why(Because.NOT_IN_RUN_A)))
            results.append(fresh.with_outcome(outcome.of(fresh)))
            continue
        c = row.comparison
        verdict = family.verdict_of(
            c,
            row.decision,
            tolerance=_tolerance(r, tolerance),
            baseline_median=row.a_median,
            significant=row.significant,
            family_size=len(rows),
            correction=correction,
            noise_flags=row.noise_flags,
            final=True,
            judged_against_bound=row.judged_against_bound,
            bound_because=row.bound_because,
        )
        judged = replace(
            r,
            baseline=verdict,
            waiver=waivers.rejudged(r.waiver, row.verdict),
            facts=replace(r.facts, load_cancelled=row.load),
        )
        results.append(judged.with_outcome(outcome.of(judged)))
    return replace(b, results=tuple(results))
