"""Judging: a measurement against the profile's figures and the profile's baseline.

The :class:`Judge` knows the family of comparisons a run makes, so it can say before a check
measures how many samples it needs to detect its tolerance (and take more, within the
policy's caps), and after it measured whether the comparison could see a change that size.
:func:`finalize` decides every verdict again over the whole family when the session ends.
"""

from __future__ import annotations

import datetime as dt
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from perfsuite import outcome, probe, stats, waivers
from perfsuite.baseline import Baseline, BaselineEntry, bare_reference_value
from perfsuite.hardware.profile import HardwareProfile
from perfsuite.measure import Measurement, Policy, Workload
from perfsuite.model import BaselineVerdict, FloorVerdict, Result
from perfsuite.settings import Settings
from perfsuite.sources import ChildSource
from perfsuite.tolerances import Tolerances

# Baseline verdicts that say a check moved (or may have): the ones whose notes explain why.
CHANGED = ("regressed", "improved", "noisy")


@dataclass(frozen=True)
class Plan:
    """How many samples a check takes, and what its comparison can detect with them."""

    rounds: int
    planned: int
    detectable: float | None  # at ``rounds``; None without a baseline
    needed: int | None  # samples that would detect the tolerance; None if no count can
    tolerance: float
    tolerance_from: str
    limited_by: str = ""  # where no count can: what in the baseline keeps it from it
    baseline_scatter: float | None = None  # the baseline's within-run sd (log), if any


class Judge:
    """Turns measurements into results, within one run's family of comparisons."""

    def __init__(
        self,
        settings: Settings,
        profile: HardwareProfile,
        baseline: Baseline,
        tolerances: Tolerances,
        waiver_list: list[waivers.Waiver],
        today: dt.date,
    ) -> None:
        """Bind to one run's profile, baseline, tolerances and waivers."""
        self.settings = settings
        self.profile = profile
        self.baseline = baseline
        self.tolerances = tolerances
        self.waivers = waiver_list
        self.today = today
        self.family = stats.SequentialFamily(1, settings.alpha, settings.correction)

    # -- the family -----------------------------------------------------------------------

    def set_family(self, node_ids: list[str]) -> int:
        """Size the family: the selected checks that have a baseline to compare with."""
        m = sum(1 for node_id in node_ids if self.baseline.get(node_id) is not None)
        self.family = stats.SequentialFamily(m, self.settings.alpha, self.settings.correction)
        return m

    @property
    def threshold(self) -> float:
        """The family's first threshold: what a lone change must reach."""
        return self.family.first_threshold

    # -- before measuring -----------------------------------------------------------------

    def _entry(self, node_id: str, unit: str) -> BaselineEntry | None:
        entry = self.baseline.get(node_id)
        # A changed unit is a different measurement: judged as new.
        return entry if entry is not None and entry.unit == unit else None

    def plan(self, node_id: str, workload: Workload, marker_tolerance: float | None) -> Plan:
        """The samples a check takes: more than the policy's when its baseline needs them."""
        policy: Policy = self.settings.policy
        tol, tol_from = self.tolerances.resolve(node_id, marker_tolerance, self.settings.tolerance)
        planned = policy.repetitions
        entry = self._entry(node_id, workload.unit)
        if entry is None:
            return Plan(planned, planned, None, None, tol, tol_from)
        lv = stats.levels(
            entry.judged_run_samples(),
            higher_is_better=entry.higher_is_better,
            prior=self.baseline.prior,
        )
        limit = policy.limit if self.settings.samples is None else planned
        needed = stats.samples_needed(lv, tol, self.threshold, planned, max(limit, 200))
        limited_by = "" if needed is not None else stats.baseline_limit(lv, tol)
        scatter = math.sqrt(lv.within_var)
        if isinstance(workload.source, ChildSource):
            # Child processes and ranks take the count they are given (--perf-samples).
            return Plan(planned, planned, None, needed, tol, tol_from, limited_by, scatter)
        rounds = planned
        if needed is not None and needed > planned:
            cap = limit
            seconds = [r.policy.get("sample_seconds") for r in entry.runs]
            known = [s for s in seconds if isinstance(s, int | float) and s > 0]
            # a sample lasts what the baseline's did, or at least what this run asks for
            longest = max([*known, policy.sample_seconds])
            if longest > 0 and policy.max_seconds > 0:
                cap = min(cap, max(planned, int(policy.max_seconds / longest)))
            rounds = min(needed, cap)
        return Plan(
            rounds,
            planned,
            stats.detectable(lv, rounds, self.threshold),
            needed,
            tol,
            tol_from,
            limited_by,
            scatter,
        )

    # -- judging ----------------------------------------------------------------------------

    def floor(self, workload: Workload, value: float, fraction: float | None) -> FloorVerdict:
        """Judge the best sample against the profile figure the workload names."""
        ref = workload.reference
        profile = self.profile
        if ref is None:
            reason = workload.floor_note or "the check has no reference figure"
            return stats.floor_verdict(value, None, 0.0, reason=reason)
        fraction = ref.fraction if fraction is None else fraction
        if profile.kind != ref.device_kind:
            reason = (
                f"profile {profile.name!r} describes a {profile.kind}; it has no "
                f"{ref.figure} for a {ref.device_kind} measurement"
            )
            return stats.floor_verdict(value, None, fraction, figure=ref.figure, reason=reason)
        peak: float | None
        if ref.measured is not None:  # measured in this session: not the profile's figure
            peak, estimated = ref.measured, ref.advisory
        else:
            values = [profile.figure(key) for key in ref.inputs]
            missing = [key for key, v in zip(ref.inputs, values, strict=True) if v is None]
            if missing:
                reason = f"profile {profile.name!r} has no {', '.join(missing)}"
                return stats.floor_verdict(value, None, fraction, figure=ref.figure, reason=reason)
            peak = ref.combine(*values) if ref.combine else values[0]
            estimated = ref.advisory or any(profile.is_estimated(key) for key in ref.inputs)
        return stats.floor_verdict(
            value,
            peak,
            fraction,
            higher_is_better=workload.higher_is_better,
            figure=ref.figure,
            estimated=estimated,
        )

    def judge(
        self,
        node_id: str,
        workload: Workload,
        measurement: Measurement,
        plan: Plan,
        *,
        floor_fraction: float | None = None,
        noise: dict[str, Any] | None = None,
        machine: dict[str, Any] | None = None,
    ) -> Result:
        """Turn a measurement into a result with its floor and baseline verdicts.

        ``machine`` is the machine probe's reading over the check (see :mod:`probe`).
        """
        noise = dict(noise or {})
        values = measurement.values
        best = stats.best(values, workload.higher_is_better)
        entry = self._entry(node_id, workload.unit)
        summary = stats.summarize(values)
        noise["cv"] = summary.cv
        context = dict(workload.context)
        if measurement.bare is not None:
            context["bare_reference"] = measurement.bare
        judged: Sequence[float] = values
        every_run = entry.run_samples if entry else None
        runs: Sequence[Sequence[float]] | None = every_run
        machines: list[Any] = entry.machines if entry else []
        compared = runs  # the baseline runs compared with, in the check's own unit
        bounded: dict[str, Any] = {}  # the bound a check unlike every baseline run is judged by
        guards = noise.get("flags", [])
        if machine is not None:
            host = probe.follows_host(workload.params) and not workload.ratio
            context["machine"] = {
                **machine,
                "component": probe.component_for(workload.unit) if host else None,
            }
            if entry is not None and probe.follows_link(workload.params):
                same, flag, way = probe.link_runs(
                    values,
                    entry.run_samples,
                    context["machine"],
                    machines,
                    params=workload.params,
                    higher_is_better=workload.higher_is_better,
                    tolerance=plan.tolerance,
                )
                if way:  # unlike any baseline run: judged against the runs that bound it
                    bounded = {"bound": way, "held": flag}
                elif flag:
                    guards = [*guards, flag]
                if same is not None:  # like with like, or the runs that bound it
                    runs = compared = [entry.run_samples[i] for i in same]
                    machines = [machines[i] for i in same]
                    extra = {"bound": way, "state": flag} if way else {}
                    context["link_state"] = {
                        "baseline_runs": len(same),
                        "of": len(entry.runs),
                        **extra,
                    }
            change = probe.machine_change(context["machine"], machines)
            if change is not None and entry is not None:
                context["machine_change"] = {
                    k: change[k] for k in ("component", "ratio", "baseline_runs")
                }
                raw = probe.raw_ratio(values, runs or [], workload.higher_is_better)
                judged = probe.adjust(values, change["now"], workload.higher_is_better)
                runs = probe.adjust_runs(runs or [], change["rates"], workload.higher_is_better)
                flag = probe.guard(change, plan.tolerance, raw)
                guards = [*guards, flag] if flag else guards
        baseline = stats.baseline_verdict(
            judged,
            runs,
            higher_is_better=workload.higher_is_better,
            tolerance=plan.tolerance,
            baseline_run_id=entry.run_id if entry else "",
            family=self.family,
            alpha=self.settings.alpha,
            guards=guards,
            prior=self.baseline.prior,
            # a link-state subset of a baseline that has enough runs is not a young one
            cautious=entry is None or len(entry.runs) < stats.MIN_RUNS,
            **bounded,
        )
        stored = self.baseline.get(node_id)
        if entry is None and stored is not None:  # a changed unit is another measurement
            baseline = replace(
                baseline,
                reason=f"unit mismatch: the baseline measured this check in {stored.unit!r}, "
                f"this run in {workload.unit!r}; judged as new (save a baseline to replace it)",
            )
        if entry is not None:
            baseline = replace(baseline, blind=blind_note(baseline, plan, len(values)))
            if runs is not every_run:  # the median is shown in the check's own unit
                medians = [statistics.median(r) for r in compared or entry.run_samples]
                baseline = replace(baseline, baseline_median=statistics.geometric_mean(medians))
        span = baseline_span(entry)
        if span is not None:
            context["baseline_span_s"] = span
        reference = bare_reference_value(context)
        if entry is not None and reference is not None and entry.references:
            # The same operation measured bare beside the check, now and in the baseline runs.
            context["reference_change"] = {
                "ratio": reference / statistics.geometric_mean(entry.references),
                "baseline_runs": len(entry.references),
            }
        unlike = measured_unlike(self.settings.policy.to_dict(), entry)
        if unlike is not None:
            context["measured_unlike_baseline"] = unlike
        waiver = waivers.find(self.waivers, node_id)
        waiver_info = None
        if waiver is not None:
            if waiver.expired(self.today):
                waiver_info = waiver.to_dict("expired")
            else:
                applied = baseline.verdict == "regressed"
                waiver_info = waiver.to_dict("applied" if applied else "stale")
        result = Result(
            id=node_id,
            check=workload.check,
            params=dict(workload.params),
            metric=workload.metric,
            unit=workload.unit,
            higher_is_better=workload.higher_is_better,
            samples=values,
            seconds=measurement.seconds,
            summary=summary,
            work=workload.work,
            floor=self.floor(workload, summary.median if workload.ratio else best, floor_fraction),
            baseline=baseline,
            context={
                **context,
                "timer": measurement.timer,
                "tolerance_from": plan.tolerance_from,
                "expectations": [asdict(e) for e in workload.expectations],
                "policy": {
                    **self.settings.policy.to_dict(),
                    "repetitions": len(values),
                    "planned": plan.planned,
                    "warmup_s": measurement.warmup_s,
                    "warmup_windows": list(measurement.warmup_windows),
                    "warmup_settled": measurement.warmup_settled,
                    "calls_per_sample": measurement.calls,
                    "launch": measurement.launch,
                    "call_seconds": measurement.call_seconds,
                    "work_per_sample": workload.work.amount * measurement.calls,
                    "overhead_fraction": measurement.overhead_fraction,
                },
            },
            noise=noise,
            waiver=waiver_info,
            source=measurement.source,
        )
        return result.with_outcome(outcome.of(result), explain(result, self.profile.name))


def blind_note(verdict: BaselineVerdict, plan: Plan, n: int) -> str:
    """Why a comparison cannot detect its tolerance, with what would help; or ""."""
    if verdict.detectable is None or verdict.detectable <= plan.tolerance:
        return ""
    family = verdict.family_size or 1
    text = (
        f"cannot detect a {plan.tolerance:.0%} change with {n} samples in a family of "
        f"{family} (smallest detectable: {verdict.detectable:.0%})"
    )
    if plan.needed is not None and plan.needed > n:
        return f"{text}; use --perf-samples {plan.needed}"
    if plan.needed is not None:  # the baseline said n would do
        own, then = verdict.within_run_sd, plan.baseline_scatter
        if own and then is not None and own > then:
            return (
                f"{text}; this run's samples scattered more than the baseline's (sd {own:.1%} "
                f"against {then:.1%}): rerun it, or take more samples (--perf-samples)"
            )
        return f"{text}; {n} samples left it just short: take more (--perf-samples)"
    return (
        f"{text}; more samples cannot help: the baseline's {verdict.baseline_runs} run(s) "
        f"limit it ({plan.limited_by or 'their spread'}); accept more baseline runs "
        "(--perf-baseline-runs) or raise the tolerance"
    )


def link_note(link: Mapping[str, Any]) -> str:
    """Which baseline runs a check that follows the CPUs' link was compared with."""
    runs = f"the {link['baseline_runs']} of {link['of']} baseline runs"
    if link.get("bound") not in ("slower", "faster"):
        return f"compared with {runs} measured with the CPUs' link in the state it was in now"
    way = "slowest" if link["bound"] == "slower" else "fastest"
    return (
        f"measured {link.get('state') or 'in another link state'}, so compared with {runs} "
        f"in the link state where this check runs {way}: the link cannot explain "
        f"a check {link['bound']} than those"
    )


def finalize(
    results: Sequence[Result],
    *,
    alpha: float = stats.ALPHA,
    correction: str = stats.DEFAULT_CORRECTION,
    profile: str = "",
) -> tuple[list[Result], list[str]]:
    """Every comparison's significance over the session's whole family, once it is all in.

    While the session runs, each check is judged when it ends, against the p-values seen so
    far (in its own process, under xdist); at the end, the family's correction is applied to
    all of them at once (a step-up correction with a fixed family size can only add to what
    was significant before).  A change that was beyond its tolerance and only lacked
    significance becomes regressed (or improved); everything else keeps its verdict.  Returns
    the results, final, and the ids whose outcome changed.
    """
    judged = [
        (i, r)
        for i, r in enumerate(results)
        if r.baseline.verdict != "new" and r.baseline.p_value is not None
    ]
    out = list(results)
    if not judged:
        return out, []
    # The family is the comparisons actually made: a check selected at collection that
    # skipped or failed before comparing (a missing device or framework) is not in it.  A
    # smaller family than the one each check was first judged in only lowers the bar, so
    # nothing significant is taken back.
    size = len(judged)
    final = stats.correct(
        [float(r.baseline.p_value or 1.0) for _, r in judged], alpha, size, correction
    )
    changed = []
    for (i, r), significant in zip(judged, final, strict=True):
        b = r.baseline
        if b.significant or not significant:
            out[i] = replace(
                r,
                baseline=replace(b, significant=bool(b.significant), final=True, family_size=size),
            )
            continue
        comparison = stats.comparison_of(b, len(r.samples))
        verdict, reason = stats.decide(
            comparison,
            tolerance=b.tolerance or 0.0,
            significant=True,
            guards=b.guards,
            alpha=alpha,
            bound=b.bound,
            held=b.held,
        )
        if verdict != b.verdict:
            reason += (
                f"; significant once the session's whole family of {size} was in "
                f"({stats.CORRECTION_NAMES[correction]}), after its test had ended"
            )
        new = replace(
            r,
            baseline=replace(
                b,
                verdict=verdict,
                reason=reason,
                significant=True,
                final=True,
                family_size=size,
            ),
            waiver=waivers.rejudged(r.waiver, verdict),
        )
        new = new.with_outcome(outcome.of(new), explain(new, profile))
        if new.outcome != r.outcome:
            changed.append(r.id)
        out[i] = new
    return out, changed


def explain(result: Result, profile: str = "") -> str:
    """One line on why a result has its outcome (empty for a plain pass)."""
    kind = outcome.of(result)
    floor, base = result.floor, result.baseline
    parts = []
    for e in result.context.get("expectations", ()):
        if isinstance(e, dict) and not e.get("passed", True):
            parts.append(f"{e.get('name')}: {e.get('detail')}")
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
        parts.append(
            f"floor: best {floor.value:.4g} {result.unit} is {relation} {floor.threshold:.4g} "
            f"{result.unit} ({floor.fraction:.0%} of {profile + ' ' if profile else ''}"
            f"{floor.figure} = {floor.peak:.4g}); "
            f"reached {(floor.fraction_of_peak or 0):.1%} of peak{est}"
        )
    if base.verdict == "regressed" and base.ratio is not None:
        parts.append(
            f"regression: median {result.summary.median:.4g} {result.unit} against baseline "
            f"{base.baseline_median:.4g} {result.unit} (ratio {base.ratio:.3f}, "
            f"{base.confidence:.0%} CI [{base.ci_low:.3f}, {base.ci_high:.3f}], "
            f"p={base.p_value:.2g}, tolerance {base.tolerance:.0%}, "
            f"{base.baseline_runs} baseline run(s))"
        )
    elif base.verdict == "noisy":
        parts.append(f"noisy: {base.reason}")
    change = result.context.get("machine_change")
    if isinstance(change, dict) and base.verdict in CHANGED:
        parts.append(
            f"judged per unit of machine speed (the framework-free {change['component']} "
            f"probe ran {_signed_percent(change['ratio'])} against the baseline runs)"
        )
    link = result.context.get("link_state")
    if isinstance(link, dict) and base.verdict in CHANGED:
        parts.append(link_note(link))
    reference_ratio = _reference_ratio(result)
    if reference_ratio is not None and base.ratio is not None:
        parts.append(reference_note(base.ratio, reference_ratio))
    unlike = mode_tag(result)
    if unlike:
        parts.append(
            f"{unlike}: a check whose speed depends on how long it ran before its samples reads "
            "differently in the two modes; rerun in the baseline's mode to confirm"
        )
    if base.blind:
        parts.append(base.blind)
    if kind == "waived":
        parts.append(f"waived: {(result.waiver or {}).get('reason', '')}")
    return "; ".join(parts)


def machine_note(results: Sequence[Result], quiet_within: float = 0.05) -> str:
    """How far the machine probe moved against the baseline runs over a run, or "".

    Empty while its median move stays within ``quiet_within`` for both components and no
    change was left noisy for it: a quiet machine needs no note.
    """
    moves: dict[str, list[float]] = {}
    for r in results:
        change = r.context.get("machine_change")
        if isinstance(change, dict):
            moves.setdefault(str(change["component"]), []).append(float(change["ratio"]))
    held = sum("the machine itself ran" in r.baseline.reason for r in results)
    medians = {k: statistics.median(moves[k]) for k in probe.COMPONENTS if k in moves}
    if not held and all(abs(m - 1) <= quiet_within for m in medians.values()):
        return ""
    parts = ", ".join(f"{_signed_percent(m)} ({k})" for k, m in medians.items())
    checks = sum(len(v) for v in moves.values())
    text = (
        f"machine: the framework-free probe ran {parts} against the baseline runs "
        f"(median over {checks} CPU checks, which are judged per unit of machine speed)"
    )
    if held:
        text += f"; {held} change(s) left noisy because the machine itself moved that far"
    return text


# Baseline runs closer together than this share the machine's state of those minutes.
BACK_TO_BACK_S = 30 * 60


def baseline_span(entry: BaselineEntry | None) -> float | None:
    """Seconds from a baseline entry's first accepted run to its last (None under two)."""
    if entry is None or len(entry.runs) < 2:
        return None
    times = []
    for run in entry.runs:
        try:
            times.append(dt.datetime.fromisoformat(run.created).timestamp())
        except ValueError:
            return None
    return max(times) - min(times)


def baseline_note(results: Sequence[Result]) -> str:
    """A warning when the baseline's runs were taken back to back, or ""."""
    spans = [
        float(r.context["baseline_span_s"])
        for r in results
        if isinstance(r.context.get("baseline_span_s"), int | float)
    ]
    span = statistics.median(spans) if spans else math.inf
    if span >= BACK_TO_BACK_S:
        return ""
    minutes = span / 60
    return (
        f"baseline: its runs were accepted within {minutes:.0f} min of each other (median over "
        f"{len(spans)} checks); runs taken back to back share the machine's state and "
        "understate the spread between runs hours apart, so expect false alarms on a shared "
        "machine: accept baseline runs from separate jobs, hours apart"
    )


def reference_note(check_ratio: float, reference_ratio: float) -> str:
    """Whether a check's bare reference moved with it since the baseline, in words.

    The reference runs the same operation in the same framework, outside the harness, seconds
    before the check.  If it moved at least half as far (on a log scale) in the same
    direction, the machine or the framework changed; if not, the change is in the check's
    own path.  A note for the reader: it never changes the outcome.
    """
    moved = _signed_percent(reference_ratio)
    if reference_moved(check_ratio, reference_ratio):
        return (
            f"its bare reference moved with it ({moved} since the baseline): the machine or "
            "the framework changed, not the harness; rerun to tell a slow spell from a change"
        )
    return (
        f"its bare reference did not move with it ({moved} since the baseline): the change "
        "is in the check's own path (harness, launch or data), not the machine"
    )


def reference_moved(check_ratio: float, reference_ratio: float) -> bool:
    """Whether the bare reference moved the check's way, at least half as far (log scale)."""
    same_way = (check_ratio < 1) == (reference_ratio < 1)
    return same_way and abs(math.log(reference_ratio)) >= 0.5 * abs(math.log(check_ratio))


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
    return f"bare reference {how} ({_signed_percent(reference_ratio)})"


def measured_unlike(
    policy: Mapping[str, Any], entry: BaselineEntry | None
) -> dict[str, Any] | None:
    """How this run's measurement differs from every baseline run's, or None.

    Mode and warm-up: quick mode warms each check up for a fifth of full mode's time.  A
    check that speeds up as it runs (clocks, caches, a library's autotuning) can then read
    differently in the two modes with nothing changed: on an H100, the fp16 GEMM
    7860x64x2560 read 206-209 TFLOP/s in quick runs and 250 in full runs, minutes apart,
    where the other shapes agreed.  Sample length (``--perf-sample-seconds``): within a
    quick run on an H100 the power-capped GEMMs' 0.1 s samples followed the controller's
    course (bf16 720, 621, 627, 674, 681 TFLOP/s), which longer samples may average out.
    """
    if entry is None:
        return None
    modes = {str(r.policy.get("mode")) for r in entry.runs if r.policy.get("mode")}
    warmups = {r.policy.get("warmup_seconds") for r in entry.runs}
    lengths = {r.policy.get("sample_target") for r in entry.runs}
    lengths = {x for x in lengths if isinstance(x, int | float)}
    mode, warmup = str(policy.get("mode", "")), policy.get("warmup_seconds")
    length = policy.get("sample_seconds")
    like_mode = not modes or (mode in modes and warmup in warmups)
    like_length = not lengths or length in lengths
    if like_mode and like_length:
        return None
    return {
        "mode": mode,
        "warmup_seconds": warmup,
        "baseline_modes": sorted(modes),
        "baseline_warmup_seconds": sorted(w for w in warmups if isinstance(w, int | float)),
        "sample_seconds": length,
        "baseline_sample_seconds": sorted(lengths),
    }


def _slashed(values: Sequence[float]) -> str:
    """Several settings of the baseline runs, as "0.1/0.5"."""
    return "/".join(f"{v:g}" for v in values)


def mode_tag(result: Result) -> str:
    """For a changed result measured unlike its baseline runs, a short note; else ""."""
    unlike = result.context.get("measured_unlike_baseline")
    if not isinstance(unlike, dict):
        return ""
    if result.baseline.verdict not in CHANGED:
        return ""
    now, then = unlike.get("warmup_seconds"), unlike.get("baseline_warmup_seconds", ())
    parts_now: list[str] = []
    parts_then: list[str] = []
    if isinstance(now, int | float) and then:
        parts_now.append(f"warm-up {now:g} s")
        parts_then.append(f"warm-up {_slashed(then)} s")
    length, lengths = unlike.get("sample_seconds"), unlike.get("baseline_sample_seconds") or []
    if isinstance(length, int | float) and lengths and length not in lengths:
        parts_now.append(f"{length:g} s samples")
        parts_then.append(f"{_slashed(lengths)} s samples")
    now_text = f" ({', '.join(parts_now)})" if parts_now else ""
    then_text = f" ({', '.join(parts_then)})" if parts_then else ""
    modes = "/".join(unlike["baseline_modes"]) or "unrecorded"
    return (
        f"measured in {unlike['mode']} mode{now_text} against baseline runs in "
        f"{modes} mode{then_text}"
    )


def _reference_ratio(result: Result) -> float | None:
    """A changed result's bare reference against the baseline runs' references, or None."""
    change = result.context.get("reference_change")
    if result.baseline.verdict not in CHANGED:
        return None
    return float(change["ratio"]) if isinstance(change, dict) else None


def _signed_percent(ratio: float) -> str:
    return f"{round((ratio - 1) * 100):+d}%"
