"""The data perfsuite measures, judges and stores.

Everything here is a frozen dataclass with ``to_dict``/``from_dict`` so that it can cross
process boundaries (pytest-xdist workers) and land in JSON files.  The run record layout
is a public contract: fields may be added, never renamed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

SCHEMA_VERSION = 1

# The words a stored verdict may hold (the loaders refuse anything else).
FLOOR_VERDICTS = ("pass", "fail", "no-reference")
BASELINE_VERDICTS = ("ok", "regressed", "improved", "noisy", "new")


def _known(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of ``data`` that ``cls`` has (records may carry fields added later)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def _baseline_verdict(data: Mapping[str, Any]) -> BaselineVerdict:
    known = _known(BaselineVerdict, data)
    known["guards"] = tuple(known.get("guards", ()))
    return BaselineVerdict(**known)


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
    reason: str = ""


@dataclass(frozen=True)
class BaselineVerdict:
    """The result against the stored baseline of the same profile."""

    verdict: str
    ratio: float | None = None  # current/baseline oriented so that below 1 is worse
    tolerance: float | None = None
    baseline_median: float | None = None
    baseline_run_id: str = ""
    reason: str = ""
    ci_low: float | None = None  # confidence interval of the ratio
    ci_high: float | None = None
    p_value: float | None = None  # the two-level Student's t test, two-sided
    significant: bool | None = None  # after the family's correction (see ``final``)
    n_baseline: int | None = None
    few_samples: bool = False
    confidence: float = 0.95
    baseline_runs: int | None = None  # accepted runs the baseline holds for this check
    between_run_sd: float | None = None  # log scale; None when the spread is unknown
    within_run_sd: float | None = None  # log scale
    run_spread: float | None = None  # largest distance of a baseline run from its centre
    between_source: str = ""  # runs, runs+prior, prior or unknown
    detectable: float | None = None  # smallest slowdown detectable at the family threshold
    family_size: int | None = None  # the family (BH or Holm) this verdict was judged in
    threshold: float | None = None  # the family's first (strictest) threshold
    blind: str = ""  # why this comparison cannot detect its tolerance; empty when it can
    guards: tuple[str, ...] = ()  # noise flags that made a change "noisy" whatever its p-value
    bound: str = ""  # "slower"/"faster": judged against the baseline runs that bound it
    held: str = ""  # why a bound comparison cannot clear the check (the link's state)
    final: bool = False  # significance decided over the session's whole family


@dataclass(frozen=True)
class Result:
    """One check's measurement and verdicts."""

    id: str
    check: str
    params: Mapping[str, Any]
    metric: str
    unit: str
    higher_is_better: bool
    samples: tuple[float, ...]
    seconds: tuple[float, ...]
    summary: Summary
    work: Work
    floor: FloorVerdict
    baseline: BaselineVerdict
    outcome: str = ""
    message: str = ""
    context: Mapping[str, Any] = field(default_factory=dict)
    noise: Mapping[str, Any] = field(default_factory=dict)  # dispersion, clocks, load
    waiver: Mapping[str, Any] | None = None  # pattern, reason, expires, status
    source: Mapping[str, Any] = field(default_factory=dict)  # where the samples came from
    # Where the check's time went, in seconds: build, probe, noise, warmup, samples,
    # reference_and_overhead, judge (see lab/phases.py).
    phases: Mapping[str, float] = field(default_factory=dict)

    @property
    def direction(self) -> str:
        """``throughput`` (higher is better, judged by floors) or ``latency`` (ceilings)."""
        return "throughput" if self.higher_is_better else "latency"

    def to_dict(self) -> dict[str, Any]:
        """Return JSON-ready data; tuples become lists."""
        data = asdict(self)
        data["params"] = dict(self.params)
        data["context"] = dict(self.context)
        data["noise"] = dict(self.noise)
        data["waiver"] = dict(self.waiver) if self.waiver is not None else None
        data["source"] = dict(self.source)
        data["phases"] = dict(self.phases)
        data["direction"] = self.direction
        data["samples"] = list(self.samples)
        data["seconds"] = list(self.seconds)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Result:
        """Rebuild a result from :meth:`to_dict` output."""
        return cls(
            id=data["id"],
            check=data["check"],
            params=dict(data["params"]),
            metric=data["metric"],
            unit=data["unit"],
            higher_is_better=bool(data["higher_is_better"]),
            samples=tuple(float(v) for v in data["samples"]),
            seconds=tuple(float(v) for v in data.get("seconds", ())),
            summary=Summary(**_known(Summary, data["summary"])),
            work=Work(**_known(Work, data["work"])),
            floor=FloorVerdict(**_known(FloorVerdict, data["floor"])),
            baseline=_baseline_verdict(data["baseline"]),
            outcome=data.get("outcome", ""),
            message=data.get("message", ""),
            context=dict(data.get("context", {})),
            noise=dict(data.get("noise", {})),
            waiver=data.get("waiver"),
            source=dict(data.get("source", {})),
            phases=dict(data.get("phases", {})),
        )

    def with_outcome(self, outcome: str, message: str = "") -> Result:
        """Return a copy with the pytest outcome filled in."""
        return Result(**{**self.__dict__, "outcome": outcome, "message": message})


@dataclass(frozen=True)
class Crash:
    """A selected check that failed for a reason its verdict does not explain.

    It raised, timed out or lost its worker before it measured, or it failed after measuring
    for another reason than its judged outcome (an assertion, a teardown error).
    """

    id: str
    phase: str  # the pytest phase that failed: setup, call or teardown
    message: str  # the first line of the error

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Crash:
        """Rebuild a crash from its JSON form."""
        return cls(str(data["id"]), str(data["phase"]), str(data["message"]))


@dataclass(frozen=True)
class RunRecord:
    """Everything one session measured, with the profile and environment it ran on.

    ``incomplete`` says why the run did not run every selected check (an interrupt); empty
    for a run that completed.  ``crashed`` lists the selected checks that produced no result.
    """

    run_id: str
    created: str  # UTC, ISO 8601
    hardware_profile: Mapping[str, Any]
    environment: Mapping[str, Any]
    results: tuple[Result, ...]
    settings: Mapping[str, Any] = field(default_factory=dict)
    duration_s: float | None = None
    schema_version: int = SCHEMA_VERSION
    derived: Mapping[str, Any] = field(default_factory=dict)  # roofline, knob speedups
    incomplete: str = ""
    crashed: tuple[Crash, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Return JSON-ready data in the public run-record layout."""
        return {
            "incomplete": self.incomplete,
            "crashed": [asdict(c) for c in self.crashed],
            "schema_version": self.schema_version,
            "run_id": self.run_id,
            "created": self.created,
            "duration_s": self.duration_s,
            "hardware_profile": dict(self.hardware_profile),
            "environment": dict(self.environment),
            "settings": dict(self.settings),
            "results": [r.to_dict() for r in self.results],
            "derived": dict(self.derived),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunRecord:
        """Rebuild a run record (the caller has checked ``schema_version``)."""
        return cls(
            run_id=data["run_id"],
            created=data["created"],
            hardware_profile=dict(data["hardware_profile"]),
            environment=dict(data.get("environment", {})),
            results=tuple(Result.from_dict(r) for r in data.get("results", ())),
            settings=dict(data.get("settings", {})),
            duration_s=data.get("duration_s"),
            schema_version=int(data["schema_version"]),
            derived=dict(data.get("derived", {})),
            incomplete=str(data.get("incomplete", "")),
            crashed=tuple(Crash.from_dict(c) for c in data.get("crashed", ())),
        )
