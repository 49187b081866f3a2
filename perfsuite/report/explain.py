"""The sentences that explain a verdict: for pytest's failure text, the terminal and the HTML.

Judging (:mod:`perfsuite.judge.verdict`) decides and records typed facts; this module turns a
result's facts into words, and never changes an outcome.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from perfsuite.judge import outcome, stats
from perfsuite.judge.verdict import CHANGED, reference_moved
from perfsuite.model import (
    BareReference,
    BaselineLimit,
    BaselineVerdict,
    Because,
    FlagKind,
    FloorBecause,
    FloorVerdict,
    Limit,
    LinkSubset,
    LoadCancelled,
    NoiseFlag,
    Result,
    RunRecord,
)

CORRECTION_NAMES = {"fdr": "Benjamini-Hochberg", "holm": "Holm"}


def explained(result: Result, profile: str = "") -> Result:
    """The result with its verdict's reason and the line that explains its outcome.

    A verdict read from a record that predates ``why`` keeps the reason it was stored with.
    """
    base = result.baseline
    if base.why is not None:
        base = replace(base, reason=verdict_reason(base, result.unit))
        result = replace(result, baseline=base)
    return result.with_outcome(result.outcome, explain(result, profile))


def explained_record(record: RunRecord) -> RunRecord:
    """The record with every result :func:`explained` (a comparison's verdicts, in words)."""
    return replace(record, results=tuple(explained(r) for r in record.results))


def verdict_reason(verdict: BaselineVerdict, unit: str = "") -> str:
    """Why a baseline verdict is what it is, in words (from its typed ``why``).

    ``unit``: the unit this run measured the check in (for a unit the baseline did not use).
    """
    why, b = verdict.why, verdict
    if why is None:
        return b.reason
    if why.because is Because.NO_BASELINE:
        return "no baseline for this check"
    if why.because is Because.NOT_IN_RUN_A:
        return "not in run A"
    if why.because is Because.UNIT_CHANGED:
        return (
            f"unit mismatch: the baseline measured this check in {why.baseline_unit!r}, "
            f"this run in {unit!r}; judged as new (save a baseline to replace it)"
        )
    ratio, tolerance = b.ratio or 1.0, b.tolerance or 0.0
    stat = (
        f"ratio {ratio:.3f} [{_figure(b.ci_low, ratio):.3f}, {_figure(b.ci_high, ratio):.3f}], "
        f"p={_figure(b.p_value, 1.0):.2g}"
    )
    few = f"; only {why.fewest_samples} samples" if why.fewest_samples is not None else ""
    runs = (
        f"; {b.baseline_runs} baseline run(s), between-run spread unknown"
        if b.between_run_sd is None
        else f"; {_runs_words(b.baseline_runs, b.baseline_sessions)}, judged with a cautious "
        f"run-to-run spread (sd {stats.CAUTIOUS_BETWEEN_SD:.0%}) until the baseline has "
        f"{_wanted(b.baseline_runs, b.baseline_sessions)}"
        if b.between_source == "cautious"
        else f"; {b.baseline_runs} baseline run(s)"
    )
    wide = (
        f"; CI width {why.ci_width:.0%} is too wide to rule out a {tolerance:.0%} change"
        if why.ci_width is not None
        else ""
    )
    late = (
        f"; significant once the session's whole family of {b.family_size} was in "
        f"({CORRECTION_NAMES.get(b.correction, b.correction)}), after its test had ended"
        if why.late
        else ""
    )
    moved = "slower" if ratio < 1 else "faster"
    beyond = f"{moved} beyond {tolerance:.0%}"
    if b.judged_against_bound:
        if why.because is Because.BEYOND_TOLERANCE:
            return f"{beyond} ({stat}){runs}; against the baseline runs that bound it{late}"
        flags = (*b.noise_flags, *((b.bound_because,) if b.bound_because else ()))
        measured = flags_words(flags) or "in another link state"
        because = {
            Because.NOT_SIGNIFICANT: "not significant",
            Because.WITHIN_SPREAD: "within their run-to-run spread",
            Because.NOISE_FLAGS: f"{beyond}, but not measured cleanly",
        }.get(why.because, f"not {b.judged_against_bound} beyond {tolerance:.0%}")
        return (
            f"{moved} ({stat}) but measured {measured}; against the baseline runs that bound "
            f"it: {because}{few}{runs}{late}"
        )
    if why.because is Because.NOISE_FLAGS:
        return f"{moved} ({stat}) but measured {flags_words(b.noise_flags)}{late}"
    if why.because is Because.NOT_SIGNIFICANT:
        return f"{beyond} but not significant ({stat}){few}{runs}{late}"
    if why.because is Because.BEYOND_TOLERANCE:
        return f"{beyond} ({stat}){runs}{late}"
    if why.because is Because.WITHIN_SPREAD:
        spread = b.run_spread or 0.0
        return (
            f"{beyond} but within the baseline's own run-to-run spread (+-{spread:.1%}) "
            f"({stat}){runs}{wide}{late}"
        )
    if why.because is Because.WITHIN_NOISE:
        return (
            f"{beyond} but within the run-to-run noise the baseline shows "
            f"(p={why.noise_p or 0.0:.2g} > {why.alpha or 0.0:g} for this check alone, with the "
            f"baseline's variances) ({stat}){runs}{wide}{late}"
        )
    return f"within {tolerance:.0%} ({stat}){few}{runs}{wide}{late}"


# Why a result is refused as a baseline, for a flag of each kind: one reason a kind, so a
# refusal is counted by its reason, not by its figure (the figures are in the record).
FLAG_REFUSALS = {
    FlagKind.FOREIGN_LOAD: "measured under foreign load",
    FlagKind.GPU_THROTTLED: "measured while a GPU was throttled",
    FlagKind.LINK_CHANGED: "measured while the CPUs' link changed state",
}


def flag_words(flag: NoiseFlag) -> str:
    """What a noise flag says the check was measured under, as a phrase ("under ...")."""
    if flag.kind is FlagKind.FOREIGN_LOAD:
        return f"under foreign load ({flag.cores or 0.0:.2f} cores of other work or steal)"
    if flag.kind is FlagKind.GPU_THROTTLED:
        return f"while gpu:{flag.gpu} was throttled ({', '.join(flag.throttled)})"
    if flag.kind is FlagKind.LINK_CHANGED:
        return (
            f"while the CPUs' link changed state during the measurement "
            f"({flag.link_before or 0.0:.3g} to {flag.link or 0.0:.3g} M handoffs/s)"
        )
    if flag.kind is FlagKind.LINK_UNLIKE_BASELINE:
        return (
            f"while the CPUs' link ran at {flag.link or 0.0:.3g} M handoffs/s, another state "
            f"than in every baseline run ({flag.baseline_low or 0.0:.3g}-"
            f"{flag.baseline_high or 0.0:.3g})"
        )
    if flag.kind is FlagKind.TIMER_UNLIKE_BASELINE:
        return (
            f"with another timer than every baseline run ({flag.timer}; the baseline's: "
            f"{', '.join(flag.baseline_timers)}): save a new baseline to compare like with like"
        )
    if flag.kind is FlagKind.MACHINE_MOVED:
        return (
            f"while the machine itself ran {signed_percent(flag.ratio or 1.0)} against its "
            f"baseline runs (framework-free {flag.component} probe)"
        )
    return flag.text


def flags_words(flags: Sequence[NoiseFlag]) -> str:
    """Several noise flags as one phrase, "; " between them."""
    return "; ".join(x for x in map(flag_words, flags) if x)


def machine_moved(flag: NoiseFlag) -> bool:
    """Whether a flag is the machine probe's (an earlier record's by its words)."""
    if flag.kind is FlagKind.OTHER:
        return "the machine itself ran" in flag.text
    return flag.kind is FlagKind.MACHINE_MOVED


def floor_reason(floor: FloorVerdict) -> str:
    """Why a check has no floor verdict, in words ("" when it has one)."""
    if floor.because is FloorBecause.NO_REFERENCE:
        return floor.note or "the check has no reference figure"
    if floor.because is FloorBecause.OTHER_DEVICE:
        return (
            f"profile {floor.profile!r} describes a {floor.profile_kind}; it has no "
            f"{floor.figure} for a {floor.device_kind} measurement"
        )
    if floor.because is FloorBecause.PROFILE_LACKS_FIGURE:
        return f"profile {floor.profile!r} has no {', '.join(floor.missing)}"
    return floor.note


def cannot_detect_note(verdict: BaselineVerdict) -> str:
    """Why a comparison cannot detect its tolerance, with what would help; or ""."""
    blind = verdict.cannot_detect
    if blind is None:
        return ""
    n = blind.samples
    text = (
        f"cannot detect a {blind.tolerance:.0%} change with {n} samples in a family of "
        f"{blind.family} (smallest detectable: {blind.detectable:.0%})"
    )
    if blind.needed is not None and blind.needed > n:
        return f"{text}; use --perf-samples {blind.needed}"
    if blind.needed is not None:  # the baseline said n would do
        own, then = blind.run_scatter_sd, blind.baseline_scatter_sd
        if own and then is not None and own > then:
            return (
                f"{text}; this run's samples scattered more than the baseline's (sd {own:.1%} "
                f"against {then:.1%}): rerun it, or take more samples (--perf-samples)"
            )
        return f"{text}; {n} samples left it just short: take more (--perf-samples)"
    limit = blind.limited_by
    runs = limit.runs if limit is not None else verdict.baseline_runs
    remedy = (
        "accept baseline runs from separate sessions, hours apart"
        if limit is not None and back_to_back(limit.runs, limit.sessions)
        else "accept more baseline runs (--perf-baseline-runs)"
    )
    return (
        f"{text}; more samples cannot help: the baseline's {runs} run(s) "
        f"limit it ({limit_words(limit) if limit else 'their spread'}); {remedy} or raise "
        "the tolerance"
    )


def limit_words(limit: BaselineLimit) -> str:
    """What in a baseline keeps any sample count from detecting a tolerance, as a phrase."""
    value = limit.value or 0.0
    if limit.kind is Limit.SPREAD:
        return (
            f"a run's median lies up to +-{value:.1%} from their centre, and no change "
            "within that counts"
        )
    if limit.kind is Limit.WITHIN_RUN_SCATTER:
        return (
            f"the scatter within their runs, sd {value:.1%}; longer samples "
            "(--perf-sample-seconds) may steady it"
        )
    if limit.kind is Limit.UNKNOWN_SPREAD:
        return "their run-to-run spread, unknown with one run"
    if limit.kind is Limit.CAUTIOUS_SPREAD:
        return (
            f"{_runs_words(limit.runs, limit.sessions)} cannot show their run-to-run spread, "
            f"taken as sd {value:.0%} until the baseline has {_wanted(limit.runs, limit.sessions)}"
        )
    borrowed = (
        " (borrowed from the other checks)" if limit.kind is Limit.BORROWED_RUN_TO_RUN else ""
    )
    return f"their run-to-run spread, sd {value:.1%}{borrowed}"


def back_to_back(runs: int | None, sessions: int | None) -> bool:
    """Whether a baseline's runs are fewer sessions than runs (some taken back to back)."""
    return sessions is not None and runs is not None and sessions < runs


def _runs_words(runs: int | None, sessions: int | None) -> str:
    if back_to_back(runs, sessions):
        return f"{runs} baseline runs from {sessions} session(s)"
    return f"{runs} baseline run(s)"


def _wanted(runs: int | None, sessions: int | None) -> str:
    """What a young baseline still needs: runs, or runs from separate sessions."""
    if back_to_back(runs, sessions):
        return f"runs from {stats.MIN_RUNS} sessions"
    return str(stats.MIN_RUNS)


def _figure(value: float | None, default: float) -> float:
    return default if value is None else value


def link_note(link: LinkSubset) -> str:
    """Which baseline runs a check that follows the CPUs' link was compared with."""
    runs = f"the {link.baseline_runs} of {link.of} baseline runs"
    if link.bound not in ("slower", "faster"):
        return f"compared with {runs} measured with the CPUs' link in the state it was in now"
    way = "slowest" if link.bound == "slower" else "fastest"
    return (
        f"measured {(link.state and flag_words(link.state)) or 'in another link state'}, "
        f"so compared with {runs} "
        f"in the link state where this check runs {way}: the link cannot explain "
        f"a check {link.bound} than those"
    )


def explain(result: Result, profile: str = "") -> str:
    """One line on why a result has its outcome (empty for a plain pass)."""
    kind = outcome.of(result)
    base = result.baseline
    parts = []
    for e in result.expectations:
        if not e.passed:
            parts.append(f"{e.name}: {e.detail}")
    parts.extend(_floor_parts(result, profile))
    if base.verdict == "regressed" and base.ratio is not None:
        parts.append(
            f"regression: median {result.summary.median:.4g} {result.unit} against baseline "
            f"{base.baseline_median:.4g} {result.unit} (ratio {base.ratio:.3f}, "
            f"{base.confidence:.0%} CI [{base.ci_low:.3f}, {base.ci_high:.3f}], "
            f"p={base.p_value:.2g}, tolerance {base.tolerance:.0%}, "
            f"{base.baseline_runs} baseline run(s))"
        )
    elif base.verdict == "noisy":
        parts.append(f"noisy: {verdict_reason(base, result.unit)}")
    change = result.facts.machine_change
    if change is not None and base.verdict in CHANGED:
        parts.append(
            f"judged per unit of machine speed (the framework-free {change.component} "
            f"probe ran {signed_percent(change.ratio)} against the baseline runs)"
        )
    link = result.facts.link_state
    if link is not None and base.verdict in CHANGED:
        parts.append(link_note(link))
    load = result.facts.load_cancelled
    if load is not None:
        parts.append(load_note(load, result.bare_reference))
    reference_ratio = _reference_ratio(result)
    if reference_ratio is not None and base.ratio is not None:
        parts.append(reference_note(base.ratio, reference_ratio))
    unlike = mode_tag(result)
    if unlike:
        parts.append(
            f"{unlike}: a check whose speed depends on how long it ran before its samples reads "
            "differently in the two modes; rerun in the baseline's mode to confirm"
        )
    blind = cannot_detect_note(base)
    if blind:
        parts.append(blind)
    if kind == "waived":
        parts.append(f"waived: {result.waiver.reason if result.waiver else ''}")
    return "; ".join(parts)


def _floor_parts(result: Result, profile: str) -> list[str]:
    """What the floor says: a miss, or a best value above the estimated peak it was judged by.

    A check may word its own miss (``floor_fail_text`` in its context); a plain pass says
    nothing.
    """
    floor = result.floor
    parts: list[str] = []
    framing = result.context.get("floor_fail_text")
    if (
        floor.verdict == "fail"
        and floor.threshold is not None
        and floor.value
        and isinstance(framing, str)
    ):
        # The check's own words for a miss (e.g. "input-bound: ... cores needed").
        times = floor.threshold / floor.value
        facts = {k: v for k, v in result.context.items() if isinstance(v, int | float)}
        cores = float(facts.get("cpus", 1)) * times  # the same pipeline, scaled by cores
        parts.append(
            framing.format(
                **facts,
                value=floor.value,
                threshold=floor.threshold,
                times=times,
                cores_needed=cores,
            )
        )
    elif floor.verdict == "fail" and floor.threshold is not None and floor.value is not None:
        relation = "below" if result.higher_is_better else "above"
        est = " (estimated peak: a warning, not a failure)" if floor.estimated else ""
        if floor.advisory:
            est = " (a rule of thumb: a warning, not a failure)"
        parts.append(
            f"floor: best {floor.value:.4g} {result.unit} is {relation} {floor.threshold:.4g} "
            f"{result.unit} ({floor.fraction:.0%} of {profile + ' ' if profile else ''}"
            f"{floor.figure} = {floor.peak:.4g}); "
            f"reached {(floor.fraction_of_peak or 0):.1%} of peak{est}"
        )
    if outcome.above_estimate(result):
        parts.append(
            f"above the estimated peak: best {floor.value:.4g} {result.unit} is "
            f"{(floor.fraction_of_peak or 0):.0%} of {floor.figure} = {floor.peak:.4g} (est.); "
            + (
                "the measured copy it is judged against read low (other work while it was "
                "measured, or a slower hour of the host: a copy is kept for up to 6 h) or "
                "this kernel's traffic is counted higher than the copy's"
                if floor.figure.startswith("memory.")
                else "the estimate is low (a turbo clock, more FMA units) or the kernel does "
                "less work than counted (a Winograd convolution)"
            )
        )
    return parts


def reference_note(check_ratio: float, reference_ratio: float) -> str:
    """Whether a check's bare reference moved with it since the baseline, in words.

    The reference runs the same operation in the same framework, outside the harness, seconds
    before the check.  If it moved at least half as far (on a log scale) in the same
    direction, the machine or the framework changed; if not, the change is in the check's
    own path.  A note for the reader: it never changes the outcome.
    """
    moved = signed_percent(reference_ratio)
    if reference_moved(check_ratio, reference_ratio):
        return (
            f"its bare reference moved with it ({moved} since the baseline): the machine or "
            "the framework changed, not the harness; rerun to tell a slow spell from a change"
        )
    return (
        f"its bare reference did not move with it ({moved} since the baseline): the change "
        "is in the check's own path (harness, launch or data), not the machine"
    )


def reference_tag(result: Result) -> str:
    """A short note on the check's bare reference (terminal, report), or an empty string."""
    reference_ratio = _reference_ratio(result)
    if reference_ratio is None or result.baseline.ratio is None:
        return ""
    how = (
        "moved too"
        if reference_moved(result.baseline.ratio, reference_ratio)
        else "did not move with it"
    )
    return f"bare reference {how} ({signed_percent(reference_ratio)})"


def load_tag(result: Result) -> str:
    """For a check judged by its ratio to its paired bare reference, a short note; else ""."""
    load = result.facts.load_cancelled
    if load is None or result.baseline.verdict == "new":
        return ""
    return f"judged by its ratio to the bare reference: {load.cores:.2f} cores of load cancelled"


def _slashed(values: Sequence[float]) -> str:
    """Several settings of the baseline runs, as "0.1/0.5"."""
    return "/".join(f"{v:g}" for v in values)


def mode_tag(result: Result) -> str:
    """For a changed result measured unlike its baseline runs, a short note; else ""."""
    unlike = result.facts.measured_unlike_baseline
    if unlike is None or result.baseline.verdict not in CHANGED:
        return ""
    now, then = unlike.warmup_seconds, unlike.baseline_warmup_seconds
    parts_now: list[str] = []
    parts_then: list[str] = []
    if now is not None and then:
        parts_now.append(f"warm-up {now:g} s")
        parts_then.append(f"warm-up {_slashed(then)} s")
    length, lengths = unlike.sample_seconds, unlike.baseline_sample_seconds
    if length is not None and lengths and length not in lengths:
        parts_now.append(f"{length:g} s samples")
        parts_then.append(f"{_slashed(lengths)} s samples")
    now_text = f" ({', '.join(parts_now)})" if parts_now else ""
    then_text = f" ({', '.join(parts_then)})" if parts_then else ""
    modes = "/".join(unlike.baseline_modes) or "unrecorded"
    return (
        f"measured in {unlike.mode} mode{now_text} against baseline runs in {modes} mode{then_text}"
    )


def load_note(load: LoadCancelled, bare: BareReference | None) -> str:
    """Which measure a check under foreign load was judged by, and why it holds."""
    what = f" ({bare.what})" if bare is not None and bare.what else ""
    return (
        f"judged by its ratio to the bare reference{what} taken with each sample: other work "
        f"beside it (up to {load.cores:.2f} cores) slowed both sides of a pair alike and "
        f"cancels in the ratio, as would a change the reference shares "
        f"({load.baseline_runs} of {load.of} baseline runs paired)"
    )


def _reference_ratio(result: Result) -> float | None:
    """A changed result's bare reference against the baseline runs' references, or None."""
    change = result.facts.reference_change
    # Judged by its ratio to the reference, the reference's own move is already divided out.
    if change is None or result.baseline.verdict not in CHANGED or result.facts.load_cancelled:
        return None
    return change.ratio


def signed_percent(ratio: float) -> str:
    return f"{round((ratio - 1) * 100):+d}%"
