"""The data perfsuite measures, judges and stores.

Everything here is a frozen dataclass with ``to_dict``/``from_dict`` so that it can cross
process boundaries (pytest-xdist workers) and land in JSON files.  The run record layout
is a public contract: fields may be added; renaming one takes a new ``SCHEMA_VERSION``, and
the records of earlier versions stay readable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from perfsuite.model.measured import (
    MOVED_IN_4,
    BareReference,
    Expectation,
    MachineReading,
    MeasuringPolicy,
    NoiseReading,
)
from perfsuite.model.rules import WaiverState
from perfsuite.model.verdicts import (
    BaselineFacts,
    BaselineLimit,
    BaselineVerdict,
    Because,
    FloorBecause,
    FloorVerdict,
    Limit,
    NoiseFlag,
    Summary,
    Undetectable,
    Why,
    Work,
    _known,
    _plain,
    flag_fields,
)

# Version 2 renamed three fields of a result's baseline verdict (RENAMED_IN_2), and stores
# what keeps a comparison from detecting its tolerance typed (``cannot_detect``) where
# version 1 held a sentence (``blind``); it added the verdict's typed ``why``.
# Version 3 stores noise flags typed (``NoiseFlag``: ``noise.flags``, the baseline verdict's
# ``noise_flags`` and ``bound_because``) where earlier versions held sentences, and a floor
# verdict's typed ``because`` where they held a ``reason`` (see :func:`upgraded`).
# Version 4 keeps how a check was measured in typed fields of the result (``timer``,
# ``tolerance_from``, ``expectations``, ``policy``, ``bare_reference``, ``machine``), where
# earlier versions kept them in its free-form ``context`` (:mod:`perfsuite.model.measured`).
SCHEMA_VERSION = 4
READABLE_VERSIONS = (1, 2, 3, 4)  # run records this perfsuite reads (an earlier one upgraded)
# A baseline verdict's fields renamed in version 2: the old name, the new one.
RENAMED_IN_2 = {"guards": "noise_flags", "bound": "judged_against_bound", "held": "bound_because"}


def upgraded(record: Mapping[str, Any]) -> dict[str, Any]:
    """A run record's JSON in this version's layout (an earlier version's upgraded).

    Parts that are not what a record holds are left as they are, for the checks to refuse.
    """
    out = dict(record)
    results = out.get("results")
    if isinstance(results, list):
        version = out.get("schema_version")
        before_4 = not isinstance(version, int) or version < 4
        out["results"] = [
            _result_fields(r, before_4) if isinstance(r, dict) else r for r in results
        ]
    return out


def _result_fields(data: Mapping[str, Any], before_4: bool) -> dict[str, Any]:
    out = dict(data)
    if isinstance(out.get("baseline"), dict):
        out["baseline"] = baseline_fields(out["baseline"])
    if isinstance(out.get("floor"), dict):
        out["floor"] = floor_fields(out["floor"])
    noise = out.get("noise")
    if isinstance(noise, dict) and isinstance(noise.get("flags"), list):
        out["noise"] = {**noise, "flags": flag_fields(noise["flags"])}
    context = out.get("context")
    if before_4 and isinstance(context, dict):
        # Only what the judge wrote moves: a check's own key of the same name and another
        # kind stays its own (a TensorFlow step's ``policy`` was its precision policy).
        moved = {k: v for k, v in context.items() if isinstance(v, MOVED_IN_4.get(k, ()))}
        out["context"] = {k: v for k, v in context.items() if k not in moved}
        for key, value in moved.items():
            out.setdefault(key, value)
    return out


def baseline_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """A stored baseline verdict with this version's field names (versions 1 and 2 accepted).

    Version 1's ``blind`` was a sentence, which no typed ``cannot_detect`` can be read from:
    it is dropped.  The noise flags of versions 1 and 2 were sentences: they are kept as
    flags of kind OTHER, which show their words.
    """
    out = {k: v for k, v in data.items() if k != "blind"}
    for old, new in RENAMED_IN_2.items():
        if old in out:
            value = out.pop(old)
            out.setdefault(new, value)
    if isinstance(out.get("noise_flags"), list):
        out["noise_flags"] = flag_fields(out["noise_flags"])
    bound = out.get("bound_because")
    if isinstance(bound, str):
        out["bound_because"] = flag_fields([bound])[0] if bound else None
    return out


def floor_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """A stored floor verdict in this version's form.

    Before version 3 a verdict without a reference held its ground in words (``reason``):
    kept as OTHER, which shows them.
    """
    out = {k: v for k, v in data.items() if k != "reason"}
    reason = data.get("reason")
    if isinstance(reason, str) and reason and "because" not in out:
        out["because"] = FloorBecause.OTHER.value
        out.setdefault("note", reason)
    return out


def _baseline_verdict(data: Mapping[str, Any]) -> BaselineVerdict:
    known = _known(BaselineVerdict, baseline_fields(data))
    known["noise_flags"] = noise_flags(known.get("noise_flags", ()))
    if isinstance(known.get("bound_because"), Mapping):
        known["bound_because"] = NoiseFlag.read(known["bound_because"])
    if isinstance(known.get("why"), Mapping):
        known["why"] = _why(known["why"])
    if isinstance(known.get("cannot_detect"), Mapping):
        known["cannot_detect"] = _undetectable(known["cannot_detect"])
    return BaselineVerdict(**known)


def _floor_verdict(data: Mapping[str, Any]) -> FloorVerdict:
    known = _known(FloorVerdict, floor_fields(data))
    if known.get("because") is not None:
        known["because"] = FloorBecause(known["because"])
    known["missing"] = tuple(known.get("missing", ()))
    return FloorVerdict(**known)


def noise_flags(data: Any) -> tuple[NoiseFlag, ...]:
    """Noise flags from their stored form (a sentence of an earlier version is OTHER)."""
    items = flag_fields(list(data)) if isinstance(data, list | tuple) else []
    return tuple(NoiseFlag.read(f) if isinstance(f, Mapping) else f for f in items)


def _facts(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """Where a stored result keeps what its comparison rested on.

    Its own ``facts`` field; records written before it kept them in ``context``, under
    :attr:`BaselineFacts.NAMES`.  Malformed facts are left out.
    """
    facts = data.get("facts", data.get("context"))
    return facts if isinstance(facts, Mapping) else {}


def _own_context(data: Mapping[str, Any]) -> dict[str, Any]:
    """The check's own description (a record without ``facts`` kept the facts among it)."""
    context = dict(data.get("context", {}))
    if "facts" in data:
        return context
    return {k: v for k, v in context.items() if k not in BaselineFacts.NAMES}


def _why(data: Mapping[str, Any]) -> Why:
    return Why(**{**_known(Why, data), "because": Because(data["because"])})


def _undetectable(data: Mapping[str, Any]) -> Undetectable:
    limit = data.get("limited_by")
    if isinstance(limit, Mapping):
        limit = BaselineLimit(**{**_known(BaselineLimit, limit), "kind": Limit(limit["kind"])})
    return Undetectable(**{**_known(Undetectable, data), "limited_by": limit})


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
    context: Mapping[str, Any] = field(default_factory=dict)  # the check's own facts
    noise: NoiseReading = field(default_factory=NoiseReading)  # load, clocks, dispersion
    waiver: WaiverState | None = None  # the waiver that covers it, and how it applied
    source: Mapping[str, Any] = field(default_factory=dict)  # where the samples came from
    # Where the check's time went, in seconds: build, probe, noise, warmup, samples,
    # waiting (for ``perfsuite ab``'s other side), reference_and_overhead, judge
    # (see lab/phases.py).
    phases: Mapping[str, float] = field(default_factory=dict)
    facts: BaselineFacts = field(default_factory=BaselineFacts)  # what its comparison rested on
    # What the noise guard flagged while the check measured (stored as the noise's ``flags``).
    noise_flags: tuple[NoiseFlag, ...] = ()
    # How it was measured (:mod:`perfsuite.model.measured`): the clock or event that timed
    # it, where its tolerance came from, the check's own expectations, the measuring policy,
    # the bare reference timed beside it, and the machine probe's reading over it
    # (:mod:`perfsuite.measure.readings` says what a reading holds).
    timer: str = ""
    tolerance_from: str = ""
    expectations: tuple[Expectation, ...] = ()
    policy: MeasuringPolicy | None = None
    bare_reference: BareReference | None = None
    machine: MachineReading | None = None
    # What the framework warned while the check measured (never raised, never judged).
    framework_warnings: tuple[str, ...] = ()

    @property
    def direction(self) -> str:
        """``throughput`` (higher is better, judged by floors) or ``latency`` (ceilings)."""
        return "throughput" if self.higher_is_better else "latency"

    def to_dict(self) -> dict[str, Any]:
        """Return JSON-ready data; tuples become lists."""
        data = asdict(self)
        del data["facts"], data["noise_flags"]
        data["expectations"] = [asdict(e) for e in self.expectations]
        data["policy"] = self.policy.to_dict() if self.policy is not None else None
        data["bare_reference"] = self.bare_reference and self.bare_reference.to_dict()
        data["machine"] = self.machine and self.machine.to_dict()
        data["framework_warnings"] = list(self.framework_warnings)
        data["params"] = dict(self.params)
        data["floor"] = _plain(data["floor"])
        data["baseline"] = _plain(data["baseline"])
        b = self.baseline
        data["baseline"]["noise_flags"] = [f.to_dict() for f in b.noise_flags]
        data["baseline"]["bound_because"] = b.bound_because and b.bound_because.to_dict()
        data["context"] = dict(self.context)
        data["facts"] = self.facts.to_context()
        data["noise"] = self.noise.to_dict()
        if self.noise or self.noise_flags:
            data["noise"]["flags"] = [f.to_dict() for f in self.noise_flags]
        data["waiver"] = self.waiver.to_dict() if self.waiver is not None else None
        data["source"] = dict(self.source)
        data["phases"] = dict(self.phases)
        data["direction"] = self.direction
        data["samples"] = list(self.samples)
        data["seconds"] = list(self.seconds)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Result:
        """Rebuild a result from :meth:`to_dict` output, in this version's layout."""
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
            floor=_floor_verdict(data["floor"]),
            baseline=_baseline_verdict(data["baseline"]),
            outcome=data.get("outcome", ""),
            message=data.get("message", ""),
            context=_own_context(data),
            noise=NoiseReading.read(data.get("noise")),
            waiver=WaiverState.read(data.get("waiver")),
            source=dict(data.get("source", {})),
            phases=dict(data.get("phases", {})),
            facts=BaselineFacts.from_context(_facts(data)),
            noise_flags=noise_flags(dict(data.get("noise", {})).get("flags", ())),
            timer=str(data.get("timer") or ""),
            tolerance_from=str(data.get("tolerance_from") or ""),
            expectations=tuple(
                Expectation.read(e)
                for e in data.get("expectations") or ()
                if isinstance(e, Mapping)
            ),
            policy=MeasuringPolicy.read(data.get("policy")),
            bare_reference=BareReference.read(data.get("bare_reference")),
            machine=MachineReading.read(data.get("machine")),
            framework_warnings=tuple(str(w) for w in data.get("framework_warnings") or ()),
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
    schema_version: int = SCHEMA_VERSION  # the layout it is in (one read is upgraded)
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
        """Rebuild a run record, in this version's layout (the caller checked its version)."""
        return cls(
            run_id=data["run_id"],
            created=data["created"],
            hardware_profile=dict(data["hardware_profile"]),
            environment=dict(data.get("environment", {})),
            results=tuple(Result.from_dict(r) for r in data.get("results", ())),
            settings=dict(data.get("settings", {})),
            duration_s=data.get("duration_s"),
            schema_version=SCHEMA_VERSION,
            derived=dict(data.get("derived", {})),
            incomplete=str(data.get("incomplete", "")),
            crashed=tuple(Crash.from_dict(c) for c in data.get("crashed", ())),
        )
