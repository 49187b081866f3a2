"""The POP efficiency model: per-rank times in, efficiencies out (pure arithmetic).

POP's multiplicative tree (the POP Centre of Excellence's metrics)::

    global efficiency = parallel efficiency x computation scalability
    parallel efficiency = load balance x communication efficiency

* load balance = mean over ranks of useful compute time / max over ranks;
* communication efficiency = max useful compute time / step (wall) time;
* computation scalability = total useful compute per sample at the reference scale (one
  rank) / at this scale.  Strong scaling (the global batch fixed): total compute at 1 rank
  / total compute at N ranks.  Weak scaling (the batch per rank fixed, so N ranks do N
  times the work): N x total compute at 1 rank / total compute at N ranks;
* scaling efficiency = throughput per rank / throughput of the one-rank run (samples per
  second per rank).  It differs from the global efficiency by the one-rank run's own
  communication efficiency: POP's global efficiency counts the reference's useful compute,
  scaling efficiency its whole step;
* input efficiency = 1 - input-wait share, the share being the mean over ranks of the time
  a step waited for its next batch / step time (the TF profiler's input-bound fraction).

**How input time enters the model.**  POP counts useful computation; waiting for input is
not useful computation.  It is in the step time and not in the compute, so it lowers the
communication efficiency, as any time a rank spends not computing does (POP's
communication efficiency is everything between the slowest rank's compute and the
runtime).  The input efficiency is its own factor of it, the way POP splits
communication efficiency into serialisation x transfer::

    communication efficiency = input efficiency x max compute / (step - mean input)

exactly, per step, with no change to POP's two identities: load balance and computation
scalability never see the input, parallel = load balance x communication efficiency and
global = parallel x computation scalability hold as before.  An input delay moves the
communication efficiency and the input efficiency, not the load balance.

Why an efficiency (1 - share, higher is better) and not the share itself: it reads like
every other POP metric, and POP's rule of thumb applies unchanged (below 0.8 is a share of
20% or more, the TF profiler's "highly input-bound"); it is a factor of the tree; and a
baseline judges samples as log ratios, which a share near zero (a step that never waits)
makes unstable.  The share itself is recorded (``phase_shares``) and drawn in the report.

Efficiencies are computed per step (every rank's times of that step) and summarised by
the median over steps, each efficiency on its own: a median of products is not the
product of medians, so the identities hold per step exactly and for the medians only
approximately.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

MODES = ("strong", "weak")
# POP's rule of thumb: an efficiency below this is worth investigating.
WORTH_A_LOOK = 0.8
METRICS = (
    "load_balance",
    "communication_efficiency",
    "parallel_efficiency",
    "computation_scalability",
    "global_efficiency",
    "scaling_efficiency",
    "input_efficiency",
)


@dataclass(frozen=True)
class Step:
    """One training step: every rank's useful compute and input wait, the step's wall time.

    Seconds.  ``input`` is empty for a step with no input phase (no wait for data).
    """

    compute: tuple[float, ...]
    seconds: float
    samples: int  # the global batch of this step (samples over all ranks)
    input: tuple[float, ...] = ()  # per rank: the wait for the next batch

    @property
    def ranks(self) -> int:
        """How many ranks took part."""
        return len(self.compute)


@dataclass(frozen=True)
class Reference:
    """The one-rank run every scale is compared with (medians over its steps)."""

    compute: float  # seconds of useful compute per step
    seconds: float  # seconds per step
    samples: int  # samples per step

    @classmethod
    def of(cls, steps: Sequence[Step]) -> Reference:
        """The reference from a one-rank run's steps."""
        if not steps or any(s.ranks != 1 for s in steps):
            raise ValueError("the reference is a run of one rank")
        return cls(
            statistics.median(s.compute[0] for s in steps),
            statistics.median(s.seconds for s in steps),
            steps[0].samples,
        )


@dataclass(frozen=True)
class Efficiencies:
    """POP's efficiencies at one rank count (all dimensionless; 1 is ideal)."""

    ranks: int
    load_balance: float
    communication_efficiency: float
    parallel_efficiency: float
    computation_scalability: float
    global_efficiency: float
    scaling_efficiency: float
    input_efficiency: float

    def value(self, metric: str) -> float:
        """One efficiency by its name in :data:`METRICS`."""
        if metric not in METRICS:
            raise KeyError(f"no POP metric {metric!r}; one of {', '.join(METRICS)}")
        return float(getattr(self, metric))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def load_balance(compute: Sequence[float]) -> float:
    """mean(compute) / max(compute) over ranks."""
    return statistics.fmean(compute) / max(compute)


def communication_efficiency(compute: Sequence[float], seconds: float) -> float:
    """max(compute) / step time."""
    return max(compute) / seconds


def input_wait_share(input_: Sequence[float], seconds: float) -> float:
    """mean(input wait) over ranks / step time; 0 for a step with no input phase."""
    return statistics.fmean(input_) / seconds if input_ else 0.0


def input_efficiency(input_: Sequence[float], seconds: float) -> float:
    """1 - the input-wait share: the factor of the communication efficiency lost to input."""
    return 1.0 - input_wait_share(input_, seconds)


def communication_efficiency_beside_input(
    compute: Sequence[float], input_: Sequence[float], seconds: float
) -> float:
    """max(compute) / (step time - mean input wait): the communication efficiency's other factor.

    communication efficiency = input efficiency x this, exactly.
    """
    return max(compute) / (seconds - (statistics.fmean(input_) if input_ else 0.0))


def strong_scalability(reference_total: float, total: float) -> float:
    """Strong scaling: the same work at both scales, so total compute at 1 rank / at N."""
    return reference_total / total


def weak_scalability(reference_total: float, total: float, ranks: int) -> float:
    """Weak scaling: N ranks do N times the one rank's work, so N x total at 1 / total at N."""
    return ranks * reference_total / total


def computation_scalability(reference: Reference, step: Step) -> float:
    """Total useful compute per sample at one rank over that at this step's scale.

    This is the strong definition when the global batch is the reference's, and the weak
    one when it is N times the reference's; any other batch is weighed by its samples.
    """
    per_sample_then = reference.compute / reference.samples
    per_sample_now = sum(step.compute) / step.samples
    return per_sample_then / per_sample_now


def scaling_efficiency(reference: Reference, step: Step) -> float:
    """Samples per second per rank at this scale over the one-rank run's samples per second."""
    return (step.samples / step.seconds / step.ranks) / (reference.samples / reference.seconds)


def efficiencies(reference: Reference, step: Step) -> Efficiencies:
    """Every efficiency of one step."""
    lb = load_balance(step.compute)
    ce = communication_efficiency(step.compute, step.seconds)
    cs = computation_scalability(reference, step)
    return Efficiencies(
        ranks=step.ranks,
        load_balance=lb,
        communication_efficiency=ce,
        parallel_efficiency=lb * ce,
        computation_scalability=cs,
        global_efficiency=lb * ce * cs,
        scaling_efficiency=scaling_efficiency(reference, step),
        input_efficiency=input_efficiency(step.input, step.seconds),
    )


def per_step(reference: Reference, steps: Sequence[Step]) -> list[Efficiencies]:
    """The efficiencies of each step."""
    return [efficiencies(reference, s) for s in steps]


def median(rows: Sequence[Efficiencies]) -> Efficiencies:
    """Each efficiency's median over steps (each on its own)."""
    if not rows:
        raise ValueError("no steps")
    return Efficiencies(
        rows[0].ranks, *(statistics.median(r.value(m) for r in rows) for m in METRICS)
    )
