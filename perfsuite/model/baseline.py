"""A baseline as judging sees it: each check's accepted runs, their samples and policies.

The files they live in, their lock and their history are :mod:`perfsuite.store.baseline`'s;
the verdict against them is :mod:`perfsuite.judge.verdict`'s.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from perfsuite.errors import StorageError
from perfsuite.model.measured import BareReference, MachineReading
from perfsuite.model.verdicts import FlagKind

if TYPE_CHECKING:
    from perfsuite.model.result import Result

DEFAULT_WINDOW = 5
# The runs a baseline may keep per check: every later save rewrites them all, and a judgement
# reads them all, so a window past this is a typo, not a plan.
MIN_WINDOW, MAX_WINDOW = 1, 1000


@dataclass(frozen=True)
class BaselineRun:
    """The samples one accepted run contributed to a check, and how they were measured."""

    run_id: str
    created: str
    samples: tuple[float, ...]
    policy: Mapping[str, Any] = field(default_factory=dict)
    # Each sample over the bare reference sample taken with it (``BareReference.pair_ratios``),
    # where the check was measured in pairs: the measure a load both shared cancels in.
    pair_ratios: tuple[float, ...] = ()
    # Cores of other work (or steal) beside the check while it was measured; None: none seen.
    load_cores: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        out: dict[str, Any] = {
            "run_id": self.run_id,
            "created": self.created,
            "samples": list(self.samples),
            "policy": dict(self.policy),
        }
        if self.pair_ratios:
            out["pair_ratios"] = list(self.pair_ratios)
        if self.load_cores is not None:
            out["load_cores"] = self.load_cores
        return out


@dataclass(frozen=True)
class BaselineEntry:
    """The accepted runs of one check, oldest first."""

    metric: str
    unit: str
    higher_is_better: bool
    runs: tuple[BaselineRun, ...]

    @property
    def samples(self) -> tuple[float, ...]:
        """The newest run's samples."""
        return self.runs[-1].samples

    @property
    def run_id(self) -> str:
        """The newest run's id."""
        return self.runs[-1].run_id

    @property
    def run_samples(self) -> list[tuple[float, ...]]:
        """Every accepted run's samples, oldest first."""
        return [r.samples for r in self.runs]

    @property
    def machines(self) -> list[MachineReading | None]:
        """The machine-probe reading each run kept (None where it had none)."""
        return [MachineReading.read(r.policy.get("machine")) for r in self.runs]

    @property
    def references(self) -> list[float]:
        """The bare reference each accepted run measured beside the check, where it had one."""
        return [float(r.policy["reference"]) for r in self.runs if "reference" in r.policy]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "metric": self.metric,
            "unit": self.unit,
            "higher_is_better": self.higher_is_better,
            "runs": [r.to_dict() for r in self.runs],
        }


@dataclass(frozen=True)
class Baseline:
    """All accepted entries of one profile, keyed by pytest node id."""

    profile: str
    entries: Mapping[str, BaselineEntry]
    path: Path
    environments: Mapping[str, Any] = field(default_factory=dict)  # run id -> fingerprint

    def environment(self) -> Mapping[str, Any] | None:
        """The fingerprint of the run most entries were last accepted from, if stored."""
        runs = Counter(e.run_id for e in self.entries.values())
        for run_id, _ in runs.most_common():
            if run_id in self.environments:
                env: Mapping[str, Any] = self.environments[run_id]
                return env
        return None

    def get(self, node_id: str) -> BaselineEntry | None:
        """Return the entry for a check, if one was accepted."""
        return self.entries.get(node_id)


class Measured(Protocol):
    """A check's measurement as a baseline entry and a result both describe it."""

    @property
    def unit(self) -> str:
        """The unit it is measured in."""

    @property
    def higher_is_better(self) -> bool:
        """Which way is better."""


def direction_words(higher_is_better: bool) -> str:
    """Which way is better, in words (for the messages that refuse a disagreement)."""
    return "higher is better" if higher_is_better else "lower is better"


def same_direction(
    node_id: str, a: tuple[str, Measured], b: tuple[str, Measured], refusal: str
) -> None:
    """Refuse two measurements of a check in one unit that disagree on which way is better.

    The direction decides whether a change is a regression or an improvement: when two
    records (or a record and its baseline) disagree one of them is wrong, and either reading
    would turn a loss into a gain.  A check measured in another unit is another measurement.
    ``a`` and ``b`` are each a name for the message and the measurement.
    """
    (a_name, first), (b_name, second) = a, b
    if first.unit == second.unit and first.higher_is_better != second.higher_is_better:
        raise StorageError(
            f"check {node_id}: {a_name} has it in {first.unit} with "
            f"{direction_words(first.higher_is_better)}, {b_name} with "
            f"{direction_words(second.higher_is_better)}; one of them is wrong: {refusal}"
        )


def paired_ratios(bare: BareReference | None, samples: int) -> tuple[float, ...]:
    """Each of a check's ``samples`` over its bare reference's sample taken with it, or ().

    Only where the check and its reference were measured in pairs, one ratio a sample: a
    load both sides of a pair shared cancels in the ratio.
    """
    if bare is None or not bare.paired or not bare.pair_ratios:
        return ()
    ratios = bare.pair_ratios
    if len(ratios) != samples or not all(_finite_positive(v) for v in ratios):
        return ()
    return tuple(float(v) for v in ratios)


def load_cores(result: Result) -> float | None:
    """The cores of other work the noise guard saw beside a check (None: it saw none)."""
    cores = [f.cores or 0.0 for f in result.noise_flags if f.kind is FlagKind.FOREIGN_LOAD]
    return max(cores) if cores else None


def bare_reference_value(bare: BareReference | None) -> float | None:
    """The rate of the bare reference a check measured beside it, or None."""
    value: Any = bare.value if bare is not None else None
    return float(value) if _finite_positive(value) else None


def _finite_positive(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )
