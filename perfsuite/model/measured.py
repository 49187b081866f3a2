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


def _number(value: Any) -> float | None:
    """A stored figure as stored (a whole number stays one); None for a word, a bool, nothing."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def _whole(value: Any) -> int | None:
    """A stored whole number (an index, a bit mask); None for anything else."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _numbers(value: Any) -> tuple[float | None, ...]:
    return tuple(_number(v) for v in value) if isinstance(value, list | tuple) else ()


def _words(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list | tuple) else ()


@dataclass(frozen=True)
class GpuState:
    """A GPU's clock and throttling before and after a check (NVML's figures)."""

    index: int | None = None
    sm_clock_mhz: tuple[float | None, ...] = ()  # before, after
    throttle_reasons: tuple[int | None, ...] = ()  # NVML's bit masks, before and after
    throttled: tuple[str, ...] = ()  # the reasons that slow it (a power cap, heat)
    info: tuple[str, ...] = ()  # the reasons that do not (idle, application clocks)

    def to_dict(self) -> dict[str, Any]:
        """Its stored form."""
        return {
            "index": self.index,
            "sm_clock_mhz": list(self.sm_clock_mhz),
            "throttle_reasons": list(self.throttle_reasons),
            "throttled": list(self.throttled),
            "info": list(self.info),
        }

    @classmethod
    def read(cls, data: Any) -> GpuState | None:
        """From its stored form (None for anything else)."""
        if not isinstance(data, Mapping):
            return None
        masks = data.get("throttle_reasons")
        return cls(
            _whole(data.get("index")),
            _numbers(data.get("sm_clock_mhz")),
            tuple(map(_whole, masks if isinstance(masks, list | tuple) else ())),
            _words(data.get("throttled")),
            _words(data.get("info")),
        )


@dataclass(frozen=True)
class LoadNotFlagged:
    """Why a device check's host load stayed a fact and not a flag (the host could not pace it).

    ``host_share``: the sync's share of a sample; ``call_s``: one call's device time;
    ``graph``: the calls replay a captured graph.
    """

    device: str
    host_share: float | None = None
    graph: bool = False
    call_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """Its stored form."""
        out: dict[str, Any] = {
            "device": self.device,
            "host_share": self.host_share,
            "graph": self.graph,
        }
        if self.call_s is not None:
            out["call_s"] = self.call_s
        return out

    @classmethod
    def read(cls, data: Any) -> LoadNotFlagged | None:
        """From its stored form (None for anything else)."""
        if not isinstance(data, Mapping):
            return None
        return cls(
            str(data.get("device", "")),
            _number(data.get("host_share")),
            data.get("graph") is True,
            _number(data.get("call_s")),
        )


@dataclass(frozen=True)
class NoiseReading:
    """What the noise guard read of the machine over a check, and the samples' dispersion.

    ``foreign_cores``: the CPU time of other work and steal over the check's wall time, in
    cores; ``steal_cores`` the steal alone.  ``load_average`` and ``cpu_mhz`` are the
    readings before and after.  ``cv``: the samples' coefficient of variation.  The flags
    the guard raised are :attr:`perfsuite.model.Result.noise_flags` (stored with these, as
    the noise's ``flags``).  ``wall_s`` is None where no guard read the machine.
    """

    wall_s: float | None = None
    foreign_cores: float | None = None
    steal_cores: float | None = None
    load_average: tuple[tuple[float | None, ...], ...] = ()
    cpu_mhz: tuple[float | None, ...] = ()
    governor: str | None = None
    gpus: tuple[GpuState, ...] = ()
    cv: float | None = None
    load_not_flagged: LoadNotFlagged | None = None

    def to_dict(self) -> dict[str, Any]:
        """Its stored form: the guard's figures where it read them, the dispersion."""
        out: dict[str, Any] = {}
        if self.wall_s is not None:
            out.update(
                wall_s=self.wall_s,
                foreign_cores=self.foreign_cores,
                steal_cores=self.steal_cores,
                load_average=[list(x) for x in self.load_average],
                cpu_mhz=list(self.cpu_mhz),
                governor=self.governor,
                gpus=[g.to_dict() for g in self.gpus],
            )
        elif self.foreign_cores is not None:
            out["foreign_cores"] = self.foreign_cores
        if self.cv is not None or self.wall_s is not None:
            out["cv"] = self.cv
        if self.load_not_flagged is not None:
            out["load_not_flagged"] = self.load_not_flagged.to_dict()
        return out

    @classmethod
    def read(cls, data: Any) -> NoiseReading:
        """From its stored form or the guard's mapping (its ``flags`` are read elsewhere).

        A figure that is not a number reads as None; anything but a mapping as no reading.
        """
        if isinstance(data, NoiseReading):
            return data
        if not isinstance(data, Mapping):
            return cls()
        loads = data.get("load_average")
        governor = data.get("governor")
        gpus = data.get("gpus")
        return cls(
            wall_s=_number(data.get("wall_s")),
            foreign_cores=_number(data.get("foreign_cores")),
            steal_cores=_number(data.get("steal_cores")),
            load_average=tuple(
                _numbers(x) for x in (loads if isinstance(loads, list | tuple) else ())
            ),
            cpu_mhz=_numbers(data.get("cpu_mhz")),
            governor=None if governor is None else str(governor),
            gpus=tuple(
                g
                for g in map(GpuState.read, gpus if isinstance(gpus, list | tuple) else ())
                if g is not None
            ),
            cv=_number(data.get("cv")),
            load_not_flagged=LoadNotFlagged.read(data.get("load_not_flagged")),
        )

    def __bool__(self) -> bool:
        return self != NoiseReading()
