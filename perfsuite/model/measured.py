"""How a result was measured, as typed fields of the result (record schema 4).

A check's own description of its workload stays free-form in ``Result.context``, and only
the report reads it.  What the rooms exchange about the measurement itself is typed here:
the check's expectations, the bare reference timed beside it, and the measuring policy.
The timer, the tolerance's source, the machine probe's reading and the framework's warnings
are plain fields of :class:`perfsuite.model.Result`.  Before schema 4 all of them lived in
``context``; a record of an earlier version is read with them moved out
(:func:`perfsuite.model.upgraded`).
"""

from __future__ import annotations

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
