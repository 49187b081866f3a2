"""How a result was measured, as typed fields of the result (record schema 4).

A check's own description of its workload stays free-form in ``Result.context``, and only
the report reads it.  What the rooms exchange about the measurement itself is typed here:
the check's expectations, the bare reference timed beside it, the measuring policy and the
machine probe's reading over the check.  The timer, the tolerance's source and the
framework's warnings are plain fields of :class:`perfsuite.model.Result`.  Before schema 4
all of them lived in ``context``; a record of an earlier version is read with them moved
out (:func:`perfsuite.model.upgraded`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from perfsuite.model.verdicts import _known

# The keys of a result's ``context`` that schema 4 made typed fields of the result, with the
# kind of value the judge wrote under each.
MOVED_IN_4: dict[str, type | tuple[type, ...]] = {
    "timer": str,
    "tolerance_from": str,
    "expectations": list,
    "policy": dict,
    "bare_reference": dict,
    "machine": dict,
    "framework_warnings": list,
}


@dataclass(frozen=True)
class Expectation:
    """A condition a check states about its own workload, e.g. a FLOP count cross-check."""

    name: str
    passed: bool
    detail: str

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> Expectation:
        """From its stored form; a missing part reads as an empty name or detail."""
        return cls(
            str(data.get("name", "")), bool(data.get("passed", True)), str(data.get("detail", ""))
        )


@dataclass(frozen=True)
class BareReference:
    """The same operation, written directly, timed beside the check (its fidelity).

    ``unavailable`` says why there is no reading (then ``value`` is None).  ``paired``: each
    reference sample was taken with one of the check's, and ``pair_ratios`` are check over
    reference, sample by sample.
    """

    what: str = ""
    value: float | None = None
    unit: str = ""
    samples: tuple[float, ...] = ()
    calls_per_sample: int | None = None
    warmup_s: float | None = None
    paired: bool = False
    pair_ratios: tuple[float, ...] | None = None
    unavailable: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Its stored form: an unavailable reference keeps only what and why."""
        if self.unavailable:
            return {"what": self.what, "unavailable": self.unavailable}
        out = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}
        del out["unavailable"]
        if self.pair_ratios is None:
            del out["pair_ratios"]
        return out

    @classmethod
    def read(cls, data: Any) -> BareReference | None:
        """From its stored form (None for anything else)."""
        if not isinstance(data, Mapping):
            return None
        known = _known(cls, data)
        known["samples"] = tuple(float(v) for v in known.get("samples", ()))
        if known.get("pair_ratios") is not None:
            known["pair_ratios"] = tuple(float(v) for v in known["pair_ratios"])
        return cls(**known)


@dataclass(frozen=True)
class MeasuringPolicy:
    """How a check was measured: the session's policy, and what the loop did under it.

    The first group is :class:`perfsuite.measure.loop.Policy` (``repetitions`` is the count
    taken); the rest is what the loop found: the samples planned, the warm-up it ran, the
    calls per sample and how they were launched, and the share of a sample the timing itself
    took.  A field a record predates reads as None.
    """

    warmup: int | None = None
    repetitions: int | None = None
    max_repetitions: int | None = None
    max_seconds: float | None = None
    warmup_seconds: float | None = None
    sample_seconds: float | None = None
    mode: str = ""
    warmup_max_seconds: float | None = None
    warmup_settle: float | None = None
    references: bool | None = None
    machine_probe: bool | None = None
    planned: int | None = None
    warmup_s: float | None = None
    warmup_windows: tuple[float, ...] = ()
    warmup_settled: bool | None = None
    calls_per_sample: int | None = None
    launch: str = ""
    call_seconds: float | None = None
    work_per_sample: float | None = None
    overhead_fraction: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """Its stored form."""
        out = asdict(self)
        out["warmup_windows"] = list(self.warmup_windows)
        return out

    @classmethod
    def read(cls, data: Any) -> MeasuringPolicy | None:
        """From its stored form (None for anything else)."""
        if not isinstance(data, Mapping):
            return None
        known = _known(cls, data)
        known["warmup_windows"] = tuple(known.get("warmup_windows") or ())
        return cls(**known)


# The machine probe's components (:mod:`perfsuite.measure.probe`): memory and cache in GB/s,
# compute in GFLOP/s, and the CPUs' link in million cache-line handoffs per second.
RATES = ("memory", "cache", "compute", "link")


def _rate_value(value: Any) -> float | None:
    """A stored rate as a float (kept even when not finite, so a loader can refuse it)."""
    if not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:  # an integer past a float's range
        return math.inf


@dataclass(frozen=True)
class ProbeRates:
    """One pass of the machine probe: each component's rate, None where it was not read."""

    memory: float | None = None
    cache: float | None = None
    compute: float | None = None
    link: float | None = None

    def rate(self, component: str) -> float | None:
        """A component's rate, where it is a finite positive number; else None."""
        value = getattr(self, component) if component in RATES else None
        if value is None or not math.isfinite(value) or value <= 0:
            return None
        return float(value)

    def to_dict(self) -> dict[str, float]:
        """Its stored form: the rates that were read."""
        return {k: v for k in RATES if (v := getattr(self, k)) is not None}

    @classmethod
    def read(cls, data: Any) -> ProbeRates | None:
        """From its stored form (None for anything else)."""
        if not isinstance(data, Mapping):
            return None
        return cls(**{k: _rate_value(data.get(k)) for k in RATES})


@dataclass(frozen=True)
class MachineReading:
    """The machine probe's reading over a check, or what a baseline run kept of it.

    ``rates`` is the faster of the readings before and after the check (both kept in
    ``before`` and ``after`` where read); ``component`` is the rate the check follows
    (None for a check that does not run on the host).  ``source`` names the probe, so that
    only rates of one probe are compared.  :mod:`perfsuite.measure.readings` reads it.
    """

    rates: ProbeRates
    source: str | None = None
    component: str | None = None
    before: ProbeRates | None = None
    after: ProbeRates | None = None
    seconds: float | None = None  # how long one probe pass took, where it was timed

    def rate(self, component: str, source: str | None = None) -> float | None:
        """A component's rate (only from ``source`` when given), or None."""
        if source is not None and self.source != source:
            return None
        return self.rates.rate(component)

    def own_rate(self) -> float | None:
        """The rate of the component the check follows, or None."""
        return self.rate(self.component) if self.component else None

    def to_dict(self) -> dict[str, Any]:
        """Its stored form: the rates, source, component, and the two edge readings."""
        out: dict[str, Any] = dict(self.rates.to_dict())
        if self.source is not None:
            out["source"] = self.source
        if self.seconds is not None:
            out["seconds"] = self.seconds
        for name, edge in (("before", self.before), ("after", self.after)):
            if edge is not None:
                out[name] = edge.to_dict()
        out["component"] = self.component
        return out

    @classmethod
    def read(cls, data: Any) -> MachineReading | None:
        """From its stored form or a probe's mapping (an instance passes through)."""
        if isinstance(data, MachineReading):
            return data
        rates = ProbeRates.read(data)
        if rates is None:
            return None
        source, component, seconds = (data.get(k) for k in ("source", "component", "seconds"))
        return cls(
            rates,
            source=None if source is None else str(source),
            component=None if component is None else str(component),
            before=ProbeRates.read(data.get("before")),
            after=ProbeRates.read(data.get("after")),
            seconds=_rate_value(seconds),
        )
