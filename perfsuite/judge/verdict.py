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
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from perfsuite.judge import against, family, outcome, speed, stats, waivers
from perfsuite.judge import tolerances as tolerance_rules
from perfsuite.measure import readings
from perfsuite.measure.loop import Measurement, Policy, Reference, Workload
from perfsuite.measure.sources import ChildSource
from perfsuite.model import (
    BareReference,
    BaselineLimit,
    BaselineVerdict,
    Because,
    FloorBecause,
    FloorVerdict,
    MachineReading,
    MeasuringPolicy,
    NoiseReading,
    Result,
    Undetectable,
    Why,
)
from perfsuite.model.baseline import Baseline, BaselineEntry, paired_ratios, same_direction
from perfsuite.model.rules import Tolerances, Waiver, WaiverState

if TYPE_CHECKING:  # types only: the judge is handed both, and reads no file
    from perfsuite.hardware.profile import HardwareProfile
    from perfsuite.settings import Settings

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
    limited_by: BaselineLimit | None = None  # where no count can: what in the baseline
    baseline_scatter: float | None = None  # the baseline's within-run sd (log), if any


class Judge:
    """Turns measurements into results, within one run's family of comparisons."""

    def __init__(
        self,
        settings: Settings,
        profile: HardwareProfile,
        baseline: Baseline,
        tolerances: Tolerances,
        waiver_list: list[Waiver],
        today: dt.date,
    ) -> None:
        """Bind to one run's profile, baseline, tolerances and waivers."""
        self.settings = settings
        self.profile = profile
        self.baseline = baseline
        self.tolerances = tolerances
        self.waivers = waiver_list
        self.today = today
        self.family = family.SequentialFamily(1, settings.alpha, settings.correction)

    @cached_property
    def prior(self) -> stats.Prior:
        """The run-to-run variance this run's baseline shares across its checks."""
        return speed.baseline_prior(self.baseline)

    # -- the family -----------------------------------------------------------------------

    def set_family(self, node_ids: list[str]) -> int:
        """Size the family: the selected checks that have a baseline to compare with."""
        m = sum(1 for node_id in node_ids if self.baseline.get(node_id) is not None)
        self.family = family.SequentialFamily(m, self.settings.alpha, self.settings.correction)
        return m

    @property
    def threshold(self) -> float:
        """The family's first threshold: what a lone change must reach."""
        return self.family.first_threshold

    # -- before measuring -----------------------------------------------------------------

    def _entry(self, node_id: str, workload: Workload) -> BaselineEntry | None:
        entry = self.baseline.get(node_id)
        # A changed unit is a different measurement: judged as new.
        if entry is None or entry.unit != workload.unit:
            return None
        # The same unit the other way round: either reading would turn a loss into a gain.
        same_direction(
            node_id,
            ("the check", workload),
            ("its stored baseline", entry),
            "remove the entry from the baseline, or accept a new run for it",
        )
        return entry

    def _sessions(self, entry: BaselineEntry) -> int:
        """The sessions a baseline entry's runs come from (``--perf-baseline-window``)."""
        return stats.sessions_of([r.created for r in entry.runs], self.settings.baseline_window_s)

    def plan(
        self,
        node_id: str,
        workload: Workload,
        marker_tolerance: float | None,
        policy: Policy | None = None,
    ) -> Plan:
        """The samples a check takes: more than the policy's when its baseline needs them.

        ``policy``: the one the check measures under (a plugin's ``pytest_perfsuite_policy``
        may have changed the session's); the session's by default.
        """
        policy = policy or self.settings.policy
        tol, tol_from = tolerance_rules.resolve(
            self.tolerances, node_id, marker_tolerance, self.settings.tolerance
        )
        planned = policy.repetitions
        entry = self._entry(node_id, workload)
        if entry is None:
            return Plan(planned, planned, None, None, tol, tol_from)
        lv = stats.levels(
            speed.judged_run_samples(entry),
            higher_is_better=entry.higher_is_better,
            prior=self.prior,
            sessions=self._sessions(entry),
        )
        limit = policy.limit if self.settings.samples is None else planned
        needed = stats.samples_needed(lv, tol, self.threshold, planned, max(limit, 200))
        limited_by = None if needed is not None else stats.baseline_limit(lv, tol)
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
            none = stats.floor_verdict(value, None, 0.0)
            none = replace(none, because=FloorBecause.NO_REFERENCE, note=workload.floor_note)
            return self._above_ceiling(none, workload, value)
        fraction = ref.fraction if fraction is None else fraction
        unjudged = stats.floor_verdict(value, None, fraction, figure=ref.figure)
        if profile.kind != ref.device_kind:
            return replace(
                unjudged,
                because=FloorBecause.OTHER_DEVICE,
                profile=profile.name,
                profile_kind=profile.kind,
                device_kind=ref.device_kind,
            )
        peak: float | None
        if ref.measured is not None:  # measured in this session: not the profile's figure
            peak, estimated = ref.measured, False
        else:
            peak, estimated, missing = self._profile_peak(ref)
            if missing:
                return replace(
                    unjudged,
                    because=FloorBecause.PROFILE_LACKS_FIGURE,
                    profile=profile.name,
                    missing=missing,
                )
        return stats.floor_verdict(
            value,
            peak,
            fraction,
            higher_is_better=workload.higher_is_better,
            figure=ref.figure,
            estimated=estimated,
            advisory=ref.advisory,
        )

    def _profile_peak(self, ref: Reference) -> tuple[float | None, bool, tuple[str, ...]]:
        """A reference's value from the profile: (value, any figure estimated, missing).

        The value is None when the profile lacks one of the reference's figures.
        """
        values = [self.profile.figure(key) for key in ref.inputs]
        missing = tuple(key for key, v in zip(ref.inputs, values, strict=True) if v is None)
        estimated = any(self.profile.is_estimated(key) for key in ref.inputs)
        if missing:
            return None, estimated, missing
        peak = ref.combine(*values) if ref.combine else values[0]
        return peak, estimated, ()

    def _above_ceiling(self, none: FloorVerdict, workload: Workload, value: float) -> FloorVerdict:
        """A check without a floor that read above its estimated ceiling keeps the figures.

        It is still no-reference (nothing judged it), but the reading above the estimate is
        a finding about the estimate (a TensorFlow conv above the CPU's estimated FLOP/s).
        """
        ceiling = workload.ceiling
        if (
            ceiling is None
            or self.profile.kind != ceiling.device_kind
            or not workload.higher_is_better
        ):
            return none
        peak, estimated, missing = self._profile_peak(ceiling)
        if missing or not estimated or peak is None or peak <= 0 or value <= peak:
            return none
        return replace(
            none, peak=peak, fraction_of_peak=value / peak, figure=ceiling.figure, estimated=True
        )

    def _baseline(
        self,
        node_id: str,
        workload: Workload,
        entry: BaselineEntry | None,
        compared: against.Against,
        plan: Plan,
        n: int,
    ) -> BaselineVerdict:
        """The baseline verdict of a check's samples against the runs it is compared with."""
        # the sessions of the runs compared, where a load narrowed them
        sessions = self._sessions(compared.used or entry) if entry is not None else None
        baseline = family.baseline_verdict(
            compared.judged,
            compared.runs,
            higher_is_better=workload.higher_is_better,
            tolerance=plan.tolerance,
            baseline_run_id=entry.run_id if entry else "",
            family=self.family,
            alpha=self.settings.alpha,
            noise_flags=compared.noise_flags,
            prior=self.prior,
            # a link-state subset of a baseline that has enough runs is not a young one
            cautious=sessions is None or sessions < stats.MIN_RUNS,
            sessions=sessions,
            judged_against_bound=compared.bound,
            bound_because=compared.bound_because,
        )
        stored = self.baseline.get(node_id)
        if entry is None and stored is not None:  # a changed unit is another measurement
            return replace(baseline, why=Why(Because.UNIT_CHANGED, baseline_unit=stored.unit))
        if entry is None:
            return baseline
        if compared.load is not None and compared.runs:  # what the ratios, not samples, allow
            plan = self._ratio_plan(plan, compared.runs, compared.used or entry, n)
        baseline = replace(baseline, cannot_detect=undetectable(baseline, plan, n))
        if compared.runs is not compared.every_run:  # the median in the check's own unit
            medians = [statistics.median(r) for r in compared.compared or entry.run_samples]
            baseline = replace(baseline, baseline_median=statistics.geometric_mean(medians))
        return baseline

    def _ratio_plan(
        self, plan: Plan, runs: Sequence[Sequence[float]], used: BaselineEntry, n: int
    ) -> Plan:
        """The plan's detection figures, from the baseline's ratios to the bare reference.

        A check judged through a load is compared by its pairs' ratios, whose spread is not
        the raw samples' the plan was made from: what more samples would detect, or what in
        the baseline keeps any count from it, is the ratios' to say.
        """
        lv = stats.levels(
            runs,
            higher_is_better=used.higher_is_better,
            prior=self.prior,
            sessions=self._sessions(used),
        )
        needed = stats.samples_needed(lv, plan.tolerance, self.threshold, n, max(n, 200))
        limited_by = None if needed is not None else stats.baseline_limit(lv, plan.tolerance)
        return replace(
            plan, needed=needed, limited_by=limited_by, baseline_scatter=math.sqrt(lv.within_var)
        )

    def _waiver(self, node_id: str, baseline: BaselineVerdict) -> WaiverState | None:
        """The waiver that covers a check, with how it applies: applied, stale or expired."""
        waiver = waivers.find(self.waivers, node_id)
        if waiver is None:
            return None
        if waiver.expired(self.today):
            return waiver.applied("expired")
        return waiver.applied("applied" if baseline.verdict == "regressed" else "stale")

    def judge(
        self,
        node_id: str,
        workload: Workload,
        measurement: Measurement,
        plan: Plan,
        *,
        floor_fraction: float | None = None,
        noise: Mapping[str, Any] | None = None,
        machine: MachineReading | Mapping[str, Any] | None = None,
        policy: Policy | None = None,
        framework_warnings: Sequence[str] = (),
    ) -> Result:
        """Turn a measurement into a result with its floor and baseline verdicts.

        ``noise``: the noise guard's mapping over the check (its ``flags`` and figures,
        :func:`perfsuite.measure.noise.assess`), read into the result's typed fields.
        ``machine`` is the machine probe's reading over the check (see :mod:`probe`; a
        probe's mapping is read into a :class:`MachineReading`).
        ``policy``: the one the check was measured under, which its record keeps; the
        session's by default.
        """
        policy = policy or self.settings.policy
        guard = dict(noise or {})
        values = measurement.values
        best = stats.best(values, workload.higher_is_better)
        entry = self._entry(node_id, workload)
        summary = stats.summarize(values)
        bare = BareReference.read(measurement.bare)
        # The guard's flags become the result's typed ``noise_flags``; its figures a reading.
        measured_flags = tuple(guard.pop("flags", ()))
        reading = replace(NoiseReading.read(guard), cv=summary.cv)
        unlike = against.timer_unlike(measurement.timer, entry)  # judged, not saved, as unlike
        recorded_machine = None
        machine = MachineReading.read(machine)
        if machine is not None:
            host = readings.follows_host(workload.params) and not workload.ratio
            recorded_machine = replace(
                machine, component=readings.component_for(workload.unit) if host else None
            )
        compared = against.against(
            workload,
            values,
            entry,
            recorded_machine,
            plan.tolerance,
            [*measured_flags, *([unlike] if unlike else [])],
            paired_ratios(bare, len(values)),
        )
        baseline = self._baseline(node_id, workload, entry, compared, plan, len(values))
        result = Result(
            id=node_id,
            check=workload.check,
            params=dict(workload.params),
            metric=workload.metric,
            unit=workload.unit,
            higher_is_better=workload.higher_is_better,
            samples=tuple(float(v) for v in values),  # as a record reads them back
            seconds=tuple(float(s) for s in measurement.seconds),
            summary=summary,
            work=workload.work,
            floor=self.floor(workload, summary.median if workload.ratio else best, floor_fraction),
            baseline=baseline,
            context=dict(workload.context),
            noise=reading,
            waiver=self._waiver(node_id, baseline),
            source=measurement.source,
            facts=against.facts(entry, compared, bare, policy),
            noise_flags=measured_flags,
            timer=measurement.timer,
            tolerance_from=plan.tolerance_from,
            expectations=tuple(workload.expectations),
            policy=recorded_policy(policy, measurement, workload, plan),
            bare_reference=bare,
            machine=recorded_machine,
            framework_warnings=tuple(framework_warnings),
        )
        return result.with_outcome(outcome.of(result))


def recorded_policy(
    policy: Policy, measurement: Measurement, workload: Workload, plan: Plan
) -> MeasuringPolicy:
    """How a check was measured, as its result keeps it."""
    return MeasuringPolicy(
        **{**policy.to_dict(), "repetitions": len(measurement.values)},
        planned=plan.planned,
        warmup_s=measurement.warmup_s,
        warmup_windows=tuple(measurement.warmup_windows),
        warmup_settled=measurement.warmup_settled,
        calls_per_sample=measurement.calls,
        launch=measurement.launch,
        call_seconds=measurement.call_seconds,
        work_per_sample=workload.work.amount * measurement.calls,
        overhead_fraction=measurement.overhead_fraction,
    )


def undetectable(verdict: BaselineVerdict, plan: Plan, n: int) -> Undetectable | None:
    """Why a comparison of ``n`` samples cannot detect its tolerance; None when it can."""
    if verdict.detectable is None or verdict.detectable <= plan.tolerance:
        return None
    return Undetectable(
        tolerance=plan.tolerance,
        samples=n,
        family=verdict.family_size or 1,
        detectable=verdict.detectable,
        needed=plan.needed,
        run_scatter_sd=verdict.within_run_sd,
        baseline_scatter_sd=plan.baseline_scatter,
        limited_by=plan.limited_by,
    )


def finalize(
    results: Sequence[Result],
    *,
    alpha: float = stats.ALPHA,
    correction: str = stats.DEFAULT_CORRECTION,
) -> tuple[list[Result], list[str]]:
    """Every comparison's significance over the session's whole family, once it is all in.

    While the session runs, each check is judged when it ends, against the p-values seen so
    far (in its own process, under xdist); at the end, the family's correction is applied to
    all of them at once (with a fixed family size, Holm's step-down and Benjamini-Hochberg's
    step-up alike can only add to what was significant before).  A change that was beyond
    its tolerance and only lacked significance becomes regressed (or improved); everything
    else keeps its verdict.  Returns the results, final, and the ids whose outcome changed.
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
    members = [
        family.Member(
            stats.comparison_of(r.baseline, len(r.samples)),
            tolerance=r.baseline.tolerance or 0.0,
            noise_flags=r.baseline.noise_flags,
            judged_against_bound=r.baseline.judged_against_bound,
        )
        for _, r in judged
    ]
    decided = family.decide_family(members, alpha=alpha, correction=correction, size=size)
    changed = []
    for (i, r), (decision, significant) in zip(judged, decided, strict=True):
        b = r.baseline
        if b.significant or not significant:
            out[i] = replace(
                r,
                baseline=replace(b, significant=bool(b.significant), final=True, family_size=size),
            )
            continue
        why = decision.why
        if decision.verdict != b.verdict:
            why = replace(why, late=True)
        new = replace(
            r,
            baseline=replace(
                b,
                verdict=decision.verdict,
                why=why,
                reason="",  # explain words it again
                significant=True,
                final=True,
                family_size=size,
                correction=correction,
            ),
            waiver=waivers.rejudged(r.waiver, decision.verdict),
        )
        new = new.with_outcome(outcome.of(new))
        if new.outcome != r.outcome:
            changed.append(r.id)
        out[i] = new
    return out, changed


def reference_moved(check_ratio: float, reference_ratio: float) -> bool:
    """Whether the bare reference moved the check's way, at least half as far (log scale)."""
    same_way = (check_ratio < 1) == (reference_ratio < 1)
    return same_way and abs(math.log(reference_ratio)) >= 0.5 * abs(math.log(check_ratio))
