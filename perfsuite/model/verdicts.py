"""The typed parts of a result.

Its work and summary, the floor and baseline verdicts, the noise flags, and the facts a
baseline verdict rests on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from typing import Any

# The words a stored verdict may hold (the loaders refuse anything else).
FLOOR_VERDICTS = ("pass", "fail", "no-reference")
BASELINE_VERDICTS = ("ok", "regressed", "improved", "noisy", "new")
# A result's outcomes, worst first (the rule that decides one is :mod:`perfsuite.judge.outcome`).
ORDER = ("fail", "regressed", "noisy", "floor-warning", "waived", "no-reference", "pass")
# What --perf-fail-on may name (a waived regression is never a failure).
CHOOSABLE = ("fail", "regressed", "noisy", "floor-warning", "no-reference")


def _known(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of ``data`` that ``cls`` has (records may carry fields added later)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def flag_fields(flags: list[Any]) -> list[Any]:
    """Stored noise flags in this version's form: a sentence (before version 3) is OTHER."""
    return [{"kind": FlagKind.OTHER.value, "text": f} if isinstance(f, str) else f for f in flags]


def _plain(value: Any) -> Any:
    """``asdict`` output as JSON's types: a word for an enum, a list for a tuple."""
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True)
class Work:
    """The work one repetition does, counted by the check's documented convention."""

    amount: float
    unit: str  # "B", "FLOP", "samples", ...
    convention: str = ""


@dataclass(frozen=True)
class Summary:
    """Summary statistics of a result's samples (in the metric's unit)."""

    median: float
    min: float
    max: float
    mean: float
    n: int
    cv: float | None  # sample standard deviation / mean; None with fewer than 2 samples


class FloorBecause(StrEnum):
    """Why a check has no floor verdict (decided by ``judge.floor``, worded by ``explain``)."""

    NO_REFERENCE = "no-reference"  # the check names no profile figure (``note``: its words)
    OTHER_DEVICE = "other-device"  # the profile describes another kind of device
    PROFILE_LACKS_FIGURE = "profile-lacks-figure"  # the profile lacks figures (``missing``)
    OTHER = "other"  # a record from before the ground was typed: ``note`` holds its words


@dataclass(frozen=True)
class FloorVerdict:
    """The result against the hardware profile's peak."""

    verdict: str
    value: float | None = None  # the best sample
    peak: float | None = None
    fraction: float | None = None  # the floor fraction of peak
    threshold: float | None = None  # peak * fraction
    fraction_of_peak: float | None = None
    figure: str = ""  # the profile figure used, e.g. memory.bandwidth_gbs
    estimated: bool = False
    # A rule of thumb rather than a figure (POP's 0.8 for an efficiency): a miss is a warning.
    advisory: bool = False
    because: FloorBecause | None = None  # why there is no reference; None when there is one
    profile: str = ""  # OTHER_DEVICE, PROFILE_LACKS_FIGURE: the profile's name
    profile_kind: str = ""  # OTHER_DEVICE: the kind of device the profile describes
    device_kind: str = ""  # OTHER_DEVICE: the kind of device the check measured
    missing: tuple[str, ...] = ()  # PROFILE_LACKS_FIGURE: the figures the profile lacks
    # NO_REFERENCE: the check's own words for why it has no floor ("" for none); OTHER: the
    # words an earlier record held.
    note: str = ""


class FlagKind(StrEnum):
    """What a noise flag says the check was measured under (worded by ``explain``)."""

    FOREIGN_LOAD = "foreign-load"  # other work or steal beside it (``cores``)
    GPU_THROTTLED = "gpu-throttled"  # a GPU's clocks held down (``gpu``, ``throttled``)
    LINK_CHANGED = "link-changed"  # the CPUs' link changed state (``link_before``, ``link``)
    LINK_UNLIKE_BASELINE = "link-unlike-baseline"  # ``link``, unlike every baseline run's
    MACHINE_MOVED = "machine-moved"  # the machine probe moved (``ratio``, ``component``)
    # timed another way than every baseline run (``timer``; theirs: ``baseline_timers``)
    TIMER_UNLIKE_BASELINE = "timer-unlike-baseline"
    OTHER = "other"  # a flag of an earlier record, or a hook's: ``text`` holds its words


@dataclass(frozen=True)
class NoiseFlag:
    """One reason a measurement is suspect, with the figures behind it."""

    kind: FlagKind
    cores: float | None = None  # FOREIGN_LOAD: cores of other work or steal
    gpu: int | None = None  # GPU_THROTTLED: the GPU's index
    throttled: tuple[str, ...] = ()  # GPU_THROTTLED: the throttle reasons seen
    # LINK_CHANGED: the link's rate after the measurement (before it: ``link_before``);
    # LINK_UNLIKE_BASELINE: its rate now.  M handoffs/s.
    link: float | None = None
    link_before: float | None = None
    baseline_low: float | None = None  # LINK_UNLIKE_BASELINE: the baseline runs' range
    baseline_high: float | None = None
    ratio: float | None = None  # MACHINE_MOVED: the probe now against the baseline runs
    component: str = ""  # MACHINE_MOVED: the probe's component
    timer: str = ""  # TIMER_UNLIKE_BASELINE: how this run timed the check
    baseline_timers: tuple[str, ...] = ()  # TIMER_UNLIKE_BASELINE: how the baseline runs did
    text: str = ""  # OTHER: the flag's words

    def to_dict(self) -> dict[str, Any]:
        """The stored form: the kind and the fields it sets."""
        defaults = NoiseFlag(self.kind)
        return {
            k: _plain(v)
            for k, v in asdict(self).items()
            if k == "kind" or v != getattr(defaults, k)
        }

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> NoiseFlag:
        """From the stored form (its fields checked by the loader)."""
        known = _known(cls, data)
        known["kind"] = FlagKind(known["kind"])
        known["throttled"] = tuple(known.get("throttled", ()))
        known["baseline_timers"] = tuple(known.get("baseline_timers", ()))
        return cls(**known)


class Because(StrEnum):
    """What a baseline verdict rests on (decided by ``family.decide``, worded by ``explain``)."""

    NO_BASELINE = "no-baseline"  # new: the baseline holds no runs of this check
    UNIT_CHANGED = "unit-changed"  # new: the baseline measured the check in another unit
    NOT_IN_RUN_A = "not-in-run-a"  # new: compare's run A did not measure the check
    BEYOND_TOLERANCE = "beyond-tolerance"  # regressed or improved: beyond it, and significant
    NOT_SIGNIFICANT = "not-significant"  # noisy: beyond it, not significant (or few samples)
    NOISE_FLAGS = "noise-flags"  # noisy: beyond it, measured under the verdict's noise flags
    WITHIN_SPREAD = "within-spread"  # beyond it, within the baseline's run-to-run spread
    WITHIN_NOISE = "within-noise"  # ok: beyond it, within the noise the baseline shows
    WITHIN_TOLERANCE = "within-tolerance"  # ok
    NOT_BEYOND_BOUND = "not-beyond-bound"  # noisy: not beyond it the way the bounding runs are


@dataclass(frozen=True)
class Why:
    """Why a baseline verdict is what it is: its ground, and the figures that qualify it.

    Against the baseline runs that bound a check (``BaselineVerdict.judged_against_bound``),
    a change is judged only that way, and anything but a change is *noisy*.
    """

    because: Because
    # The fewer samples of the two sides, when fewer than a judgement needs.
    fewest_samples: int | None = None
    # The CI's width over the ratio, when too wide to rule out a change at the tolerance.
    ci_width: float | None = None
    # With WITHIN_NOISE: the change's p-value under the baseline's own noise alone, and the
    # level it stayed above.
    noise_p: float | None = None
    alpha: float | None = None
    late: bool = False  # significant only once the session's whole family was in
    baseline_unit: str = ""  # with UNIT_CHANGED: the unit the baseline measured the check in


class Limit(StrEnum):
    """What in a baseline keeps every sample count from detecting a check's tolerance."""

    SPREAD = "spread"  # a run's median lies further from their centre than the tolerance
    WITHIN_RUN_SCATTER = "within-run-scatter"  # the scatter of the samples within its runs
    UNKNOWN_SPREAD = "unknown-spread"  # one run: its run-to-run spread is unknown
    CAUTIOUS_SPREAD = "cautious-spread"  # too few runs: the cautious run-to-run spread
    RUN_TO_RUN = "run-to-run"  # the run-to-run spread of its runs
    BORROWED_RUN_TO_RUN = "borrowed-run-to-run"  # the run-to-run spread of the other checks


@dataclass(frozen=True)
class BaselineLimit:
    """What limits a baseline's comparisons, with its figure."""

    kind: Limit
    # SPREAD: the largest distance of a run's median from the centre (a fraction); the
    # others: a standard deviation (log scale); None for UNKNOWN_SPREAD.
    value: float | None
    runs: int  # the baseline's runs
    sessions: int | None = None  # the sessions they come from (None: one a run)


@dataclass(frozen=True)
class Undetectable:
    """A comparison that cannot detect its tolerance, with what keeps it from it."""

    tolerance: float
    samples: int  # this run's
    family: int  # the family it was judged in, when it was judged
    detectable: float  # the smallest change it can detect (a fraction)
    needed: int | None  # samples that would detect the tolerance; None when no count can
    run_scatter_sd: float | None  # this run's within-run sd (log scale)
    baseline_scatter_sd: float | None  # the baseline's within-run sd (log scale)
    limited_by: BaselineLimit | None = None  # where no count can: what in the baseline


@dataclass(frozen=True)
class BaselineVerdict:
    """The result against the stored baseline of the same profile."""

    verdict: str
    ratio: float | None = None  # current/baseline oriented so that below 1 is worse
    tolerance: float | None = None
    baseline_median: float | None = None
    baseline_run_id: str = ""
    reason: str = ""  # why, in words (report.explain writes it from ``why``)
    why: Why | None = None  # None in records written before it was stored
    ci_low: float | None = None  # confidence interval of the ratio
    ci_high: float | None = None
    p_value: float | None = None  # the two-level Student's t test, two-sided
    significant: bool | None = None  # after the family's correction (see ``final``)
    n_baseline: int | None = None
    few_samples: bool = False
    confidence: float = 0.95
    baseline_runs: int | None = None  # accepted runs the baseline holds for this check
    # The sessions those runs come from: runs accepted within stats.BACK_TO_BACK_S of a
    # session's first share its machine state (None in records written before it was stored).
    baseline_sessions: int | None = None
    between_run_sd: float | None = None  # log scale; None when the spread is unknown
    within_run_sd: float | None = None  # log scale
    run_spread: float | None = None  # largest distance of a baseline run from its centre
    between_source: str = ""  # runs, runs+prior, prior, cautious or unknown (stats.Levels)
    detectable: float | None = None  # smallest slowdown detectable at the family threshold
    family_size: int | None = None  # the family this verdict was judged in
    correction: str = ""  # the family's correction: fdr (Benjamini-Hochberg) or holm
    threshold: float | None = None  # the family's first (strictest) threshold
    cannot_detect: Undetectable | None = None  # None when it can detect its tolerance
    # Noise flags the check was measured under: a change beyond the tolerance stays "noisy"
    # whatever its p-value (foreign load, a machine that moved, the CPUs' link state).
    noise_flags: tuple[NoiseFlag, ...] = ()
    # "slower"/"faster": the check's CPU link state was unlike every baseline run's, so it was
    # judged only against the baseline runs that bound it that way (the runs in the state
    # where it runs slowest, or fastest); "" when compared like with like.
    judged_against_bound: str = ""
    # With judged_against_bound: why like was not compared with like (the link's state).
    bound_because: NoiseFlag | None = None
    final: bool = False  # significance decided over the session's whole family


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _numbers(values: Any) -> tuple[float, ...]:
    items = values if isinstance(values, list | tuple) else ()
    return tuple(float(v) for v in items if _number(v) is not None)


@dataclass(frozen=True)
class MachineChange:
    """How far the framework-free machine probe moved against the baseline runs."""

    component: str  # the probe's component the check follows: memory, cache or compute
    ratio: float  # now against the baseline runs (1.0: unmoved)
    baseline_runs: int

    @classmethod
    def read(cls, data: Any) -> MachineChange | None:
        """From the record's form; None for anything else."""
        if not isinstance(data, Mapping) or _number(data.get("ratio")) is None:
            return None
        return cls(
            str(data.get("component", "")),
            float(data["ratio"]),
            int(_number(data.get("baseline_runs")) or 0),
        )


@dataclass(frozen=True)
class LinkSubset:
    """The baseline runs compared with, for a check that follows the CPUs' link state."""

    baseline_runs: int  # compared with
    of: int  # held by the baseline
    bound: str = ""  # "slower"/"faster": unlike every run, judged against the runs that bound it
    state: NoiseFlag | None = None  # the link state measured, when unlike every baseline run's

    @classmethod
    def read(cls, data: Any) -> LinkSubset | None:
        """From the record's form; None for anything else (a state in words is OTHER)."""
        if not isinstance(data, Mapping) or _number(data.get("baseline_runs")) is None:
            return None
        state = data.get("state")
        if isinstance(state, str):
            state = flag_fields([state])[0] if state else None
        try:
            flag = NoiseFlag.read(state) if isinstance(state, Mapping) else None
        except (KeyError, TypeError, ValueError):
            flag = None
        return cls(
            int(data["baseline_runs"]),
            int(_number(data.get("of")) or 0),
            str(data.get("bound") or ""),
            flag,
        )


@dataclass(frozen=True)
class ReferenceChange:
    """The check's bare reference now against the baseline runs' references."""

    ratio: float
    baseline_runs: int

    @classmethod
    def read(cls, data: Any) -> ReferenceChange | None:
        """From the record's form; None for anything else."""
        if not isinstance(data, Mapping) or _number(data.get("ratio")) is None:
            return None
        return cls(float(data["ratio"]), int(_number(data.get("baseline_runs")) or 0))


@dataclass(frozen=True)
class LoadCancelled:
    """A check judged by its ratio to the bare reference paired with it, sample by sample.

    Other work beside the check (now, or in the baseline runs) slows both sides of a pair
    alike, and cancels in their ratio; the raw samples would carry it.
    """

    cores: float  # the most foreign load seen now or in the runs compared (cores)
    baseline_runs: int  # the baseline runs compared, each with its pairs' ratios
    of: int  # the runs the baseline holds for the check

    @classmethod
    def read(cls, data: Any) -> LoadCancelled | None:
        """From the record's form; None for anything else."""
        if not isinstance(data, Mapping) or _number(data.get("cores")) is None:
            return None
        return cls(
            float(data["cores"]),
            int(_number(data.get("baseline_runs")) or 0),
            int(_number(data.get("of")) or 0),
        )


@dataclass(frozen=True)
class PassesKept:
    """A check of a session measured in several passes, kept from its fastest pass.

    ``perfsuite compare --passes N`` folds each session's passes into one record this way.
    """

    kept: str  # the run id of the pass kept
    medians: tuple[tuple[str, float], ...]  # each pass's run id and its median

    @classmethod
    def read(cls, data: Any) -> PassesKept | None:
        """From the record's form (``{"kept": id, "medians": {id: median}}``); else None."""
        if not isinstance(data, Mapping) or not isinstance(data.get("kept"), str):
            return None
        medians = data.get("medians")
        if not isinstance(medians, Mapping):
            return None
        pairs = [(str(k), _number(v)) for k, v in medians.items()]
        return cls(data["kept"], tuple((k, float(v)) for k, v in pairs if v is not None))


@dataclass(frozen=True)
class ModeDifference:
    """How this run measured unlike every baseline run: its mode, warm-up, sample length."""

    mode: str
    warmup_seconds: float | None
    baseline_modes: tuple[str, ...]
    baseline_warmup_seconds: tuple[float, ...]
    sample_seconds: float | None
    baseline_sample_seconds: tuple[float, ...]

    @classmethod
    def read(cls, data: Any) -> ModeDifference | None:
        """From the record's form; None for anything else."""
        if not isinstance(data, Mapping):
            return None
        modes = data.get("baseline_modes")
        return cls(
            str(data.get("mode", "")),
            _number(data.get("warmup_seconds")),
            tuple(str(m) for m in modes) if isinstance(modes, list | tuple) else (),
            _numbers(data.get("baseline_warmup_seconds")),
            _number(data.get("sample_seconds")),
            _numbers(data.get("baseline_sample_seconds")),
        )


@dataclass(frozen=True)
class BaselineFacts:
    """What a comparison with the baseline rested on, beyond its verdict.

    Stored in the result's ``facts`` field under these names, and read from it into typed
    fields (records written before that field kept them in ``context``).
    """

    machine_change: MachineChange | None = None
    link_state: LinkSubset | None = None
    reference_change: ReferenceChange | None = None
    measured_unlike_baseline: ModeDifference | None = None
    baseline_span_s: float | None = None  # first to last accepted baseline run
    load_cancelled: LoadCancelled | None = None  # judged by the ratio to its paired reference
    passes: PassesKept | None = None  # kept from the fastest of a session's passes

    NAMES = ("machine_change", "link_state", "reference_change", "measured_unlike_baseline",
             "baseline_span_s", "load_cancelled", "passes")  # fmt: skip

    def to_context(self) -> dict[str, Any]:
        """The facts that are known, in the record's form."""
        out: dict[str, Any] = {}
        for name in self.NAMES:
            value = getattr(self, name)
            if value is None:
                continue
            if name == "link_state":  # empty bound and state are left out, as ever
                state = value.state.to_dict() if value.state is not None else None
                whole = {**asdict(value), "state": state}
                value = {k: v for k, v in whole.items() if v not in ("", None)}
            elif name == "passes":
                value = {"kept": value.kept, "medians": dict(value.medians)}
            elif not isinstance(value, float):
                value = {
                    k: list(v) if isinstance(v, tuple) else v for k, v in asdict(value).items()
                }
            out[name] = value
        return out

    @classmethod
    def from_context(cls, context: Mapping[str, Any]) -> BaselineFacts:
        """The facts found in a stored mapping (``facts``, or an older ``context``).

        Malformed ones are left out.
        """
        return cls(
            machine_change=MachineChange.read(context.get("machine_change")),
            link_state=LinkSubset.read(context.get("link_state")),
            reference_change=ReferenceChange.read(context.get("reference_change")),
            measured_unlike_baseline=ModeDifference.read(context.get("measured_unlike_baseline")),
            baseline_span_s=_number(context.get("baseline_span_s")),
            load_cancelled=LoadCancelled.read(context.get("load_cancelled")),
            passes=PassesKept.read(context.get("passes")),
        )
