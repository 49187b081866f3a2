"""POP scaling efficiency of a data-parallel training step, at 1, 2, ... N ranks.

A small CNN trains on synthetic images at every rank count of the series (1, 2, 4, ... up
to N from ``--perf-ranks``, and N), each launch started by ``--perf-launcher`` like the
allreduce check's; the pytest process is never a rank.  The rank side,
:mod:`perfsuite.collectives.train`, times every step in phases (the wait for the next
batch from a host input pipeline, compute, the wait for the slowest rank, the gradient
allreduce, the whole step) with timers, not a profiler; its docstring gives the method.
:mod:`perfsuite.checks.pop` turns the times into POP's efficiencies, per step, and each
efficiency is one check, judged like any other: its samples are the per-step
efficiencies, the baseline verdict compares them with the stored runs', and POP's rule of
thumb (below 0.8 is worth a look) is an advisory floor on their median: a warning, never
a failure.  The input efficiency (1 - the input-wait share of a step) is one of them;
:mod:`perfsuite.checks.pop` says how input time enters the model.

* Strong scaling: the global batch is fixed (``BATCH``), each of N ranks trains on
  BATCH / N samples.  Weak scaling: each rank trains on ``BATCH`` samples.  Both share the
  one-rank run (BATCH samples), which is the reference for computation scalability and
  scaling efficiency.
* Ranks that share this host get ``cpus // N`` intra-op threads each (one on a 2-core
  machine with 2 ranks), the same at every rank count of the series, so that the one-rank
  reference does the work of one rank of the largest run; the record says how many.
* Quick mode runs torch's weak scaling at the largest rank count only, with its one-rank
  reference: two launches (each rank's start-up, a torch import, is most of a launch's
  time).

Backends: torch ``DistributedDataParallel`` (gloo on the CPU, NCCL on GPUs),
TensorFlow's ``MultiWorkerMirroredStrategy`` (its RING collective, on the CPU) and Horovod
(``horovod.torch``, every gradient submitted asynchronously and fused, as
``hvd.DistributedOptimizer`` does: :class:`perfsuite.collectives.horovod.HorovodTrainer`).
Horovod's cases skip with the reason where no Horovod with a torch extension is installed
(``tox -e horovod`` builds one).
"""

from __future__ import annotations

import importlib.util
import os
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from perfsuite import sections
from perfsuite.checks import pop
from perfsuite.collectives import LIBRARIES, horovod
from perfsuite.collectives.launch import Launcher, free_loopback_ports, ranks_without_gpus
from perfsuite.hardware.profile import HardwareProfile
from perfsuite.measure.redaction import redact_command
from perfsuite.measure.sources import ChildSource, SourceError, run_child
from perfsuite.measure.workload import Reference, Workload
from perfsuite.model import Result, Work
from perfsuite.settings import Settings

TRAINER = "perfsuite.collectives.train"
BATCH = 32  # the global batch in strong scaling, the batch per rank in weak scaling
WARMUP_STEPS = 2
BACKENDS = ("torch", "tensorflow", "horovod")
WARNING_TEXT = (
    "POP: median {value:.2f} is below {threshold:.1f}, POP's rule of thumb for an "
    "efficiency worth a look (a warning, not a failure)"
)


@dataclass(frozen=True)
class Case:
    """One backend, device, scaling mode, rank count and efficiency."""

    backend: str
    device: str
    mode: str
    ranks: int
    metric: str
    full_only: bool = False

    @property
    def id(self) -> str:
        """The pytest id, e.g. ``torch-cpu-strong-2ranks-load_balance``."""
        return f"{self.backend}-{self.device}-{self.mode}-{self.ranks}ranks-{self.metric}"


def series(largest: int) -> tuple[int, ...]:
    """The rank counts of a scaling series: 1, 2, 4, ... below ``largest``, and ``largest``."""
    counts = {1, largest}
    n = 2
    while n < largest:
        counts.add(n)
        n *= 2
    return tuple(sorted(counts))


def cases(ranks: Sequence[int]) -> list[Case]:
    """Every case; quick and default mode keep torch's weak scaling at the largest rank count."""
    largest = max(ranks)
    out = []
    for backend in BACKENDS:
        for device in ("cpu", "gpu") if backend != "tensorflow" else ("cpu",):
            for mode in pop.MODES:
                for n in series(largest)[1:]:
                    for metric in pop.METRICS:
                        quick = n == largest and mode == "weak" and backend == "torch"
                        out.append(Case(backend, device, mode, n, metric, not quick))
    return out


def batch_per_rank(mode: str, ranks: int) -> int:
    """Samples per rank per step: BATCH / N in strong scaling, BATCH in weak scaling."""
    if mode == "weak":
        return BATCH
    if BATCH % ranks:
        raise ValueError(f"strong scaling splits a batch of {BATCH}; {ranks} ranks do not")
    return BATCH // ranks


def unavailable_reason(case: Case, launcher: Launcher) -> str | None:
    """Why this case cannot run here, with an install hint; or None."""
    module, hint = LIBRARIES[case.backend]
    if case.backend == "horovod":
        reason = horovod.unavailable_reason(need_torch=True)  # the step is horovod.torch's
        if reason:
            return reason
    elif importlib.util.find_spec(module) is None:
        return f"{module} is not installed; {hint}"
    if case.backend != "tensorflow" and importlib.util.find_spec("torch") is None:
        return f"torch is not installed; {LIBRARIES['torch'][1]}"
    if case.mode == "strong" and BATCH % case.ranks:
        return f"strong scaling splits a global batch of {BATCH}; {case.ranks} ranks do not"
    if case.device == "gpu":
        return ranks_without_gpus(case.ranks, launcher) or launcher.unavailable_reason()
    return launcher.unavailable_reason()


def threads_per_rank(launcher: Launcher, largest: int) -> int:
    """Intra-op threads per rank: this host's CPUs shared by the largest run's ranks.

    0 (the framework's default) where the launcher places ranks itself (srun, a hostfile).
    """
    if not launcher.is_local_mpiexec:
        return 0
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, (cpus or 1) // largest)


@dataclass(frozen=True)
class Launch:
    """One launch of the training ranks: what to run."""

    backend: str
    device: str
    ranks: int
    batch: int  # per rank
    steps: int
    threads: int
    launcher: str
    oversubscribe: bool = False
    timeout_s: float = 300.0
    imbalance: bool = False
    comm_delay_ms: float = 0.0
    input_delay_ms: float = 0.0

    def command(self) -> list[str]:
        """The launcher's command line for the ranks."""
        args = ["--backend", self.backend, "--device", self.device]
        args += ["--batch", str(self.batch), "--steps", str(self.steps)]
        args += ["--warmup", str(WARMUP_STEPS), "--threads", str(self.threads)]
        if self.imbalance:
            args.append("--imbalance")
        if self.comm_delay_ms:
            args += ["--comm-delay-ms", f"{self.comm_delay_ms:g}"]
        if self.input_delay_ms:
            args += ["--input-delay-ms", f"{self.input_delay_ms:g}"]
        launcher = Launcher.parse(self.launcher)
        return launcher.command(self.ranks, args, self.oversubscribe, worker=TRAINER)

    def environment(self) -> dict[str, str]:
        """Rendezvous on loopback, and what the launcher itself needs."""
        master, *workers = free_loopback_ports(1 + self.ranks)
        env = {
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(master),
            "PERFSUITE_COLLECTIVE_PORTS": ",".join(map(str, workers)),  # TensorFlow's workers
        }
        if self.device == "cpu":
            env["GLOO_SOCKET_IFNAME"] = "lo"
        env.update(Launcher.parse(self.launcher).environment())
        return env


@dataclass(frozen=True)
class RankTimes:
    """What a launch's rank 0 reported: every rank's phase times per timed step."""

    launch: Launch
    command: tuple[str, ...]
    compute: tuple[tuple[float, ...], ...]  # [step][rank]
    wait: tuple[tuple[float, ...], ...]
    comm: tuple[tuple[float, ...], ...]
    step: tuple[tuple[float, ...], ...]
    compute_clock: str
    facts: tuple[dict[str, Any], ...] = ()
    input: tuple[tuple[float, ...], ...] = ()  # [step][rank]; empty: no input phase

    def steps(self) -> list[pop.Step]:
        """The POP model's view: compute and input per rank, the step's time (max over ranks)."""
        samples = self.launch.batch * self.launch.ranks
        inputs = self.input or ((),) * len(self.step)
        return [
            pop.Step(c, max(s), samples, i)
            for c, s, i in zip(self.compute, self.step, inputs, strict=True)
        ]

    def median_share(self, phase: str) -> float:
        """A phase's median over steps of its mean over ranks, as a share of the step time."""
        phases = {"input": self.input, "compute": self.compute, "wait": self.wait}
        rows = {**phases, "comm": self.comm}[phase] or ((0.0,),) * len(self.step)
        return statistics.median(
            statistics.fmean(r) / max(s) for r, s in zip(rows, self.step, strict=True)
        )

    @property
    def layout(self) -> dict[str, Any] | None:
        """The ranks' layout (hosts, threads, library), as rank 0 printed it."""
        return next((f["layout"] for f in self.facts if "layout" in f), None)


def run(launch: Launch) -> RankTimes:
    """Start the ranks and parse rank 0's report."""
    command = launch.command()
    lines, _ = run_child(command, launch.timeout_s, launch.environment())
    report = next((obj["pop_steps"] for obj in lines if "pop_steps" in obj), None)
    if not isinstance(report, dict):
        raise SourceError(f"{TRAINER}: rank 0 printed no step times")
    per_rank = report["per_rank"]

    def by_step(key: str) -> tuple[tuple[float, ...], ...]:
        return tuple(zip(*(tuple(float(x) for x in r[key]) for r in per_rank), strict=True))

    facts = tuple(obj for obj in lines if "pop_steps" not in obj)
    return RankTimes(
        launch,
        tuple(command),
        by_step("compute"),
        by_step("wait"),
        by_step("comm"),
        by_step("step"),
        str(report["compute_clock"]),
        facts,
        by_step("input"),
    )


_LAUNCHES: dict[Launch, RankTimes] = {}


def launched(launch: Launch) -> RankTimes:
    """A launch's times, run once per session: every efficiency of a scale reads the same."""
    if launch not in _LAUNCHES:
        _LAUNCHES[launch] = run(launch)
    return _LAUNCHES[launch]


@dataclass
class ScalingSource(ChildSource):
    """The per-step efficiencies of one scale against its one-rank reference.

    A child source: the ranks time themselves; the samples this source returns are the
    efficiency of each timed step (the workload is a ratio, see :class:`Workload`).
    """

    case: Case | None = None
    make: Callable[[int, int], Launch] | None = None  # (ranks, steps) -> launch
    rows: list[pop.Efficiencies] = field(default_factory=list)
    reference: dict[str, Any] = field(default_factory=dict)
    phase_shares: dict[str, float] = field(default_factory=dict)
    compute_clock: str = ""

    def durations(
        self, step: Callable[[], None], presync: Callable[[], None], warmup: int, rounds: int
    ) -> list[float]:
        """Launch (or reuse) this scale's ranks and the one-rank reference's."""
        assert self.case is not None and self.make is not None
        ref_times = launched(self.make(1, rounds))
        times = launched(self.make(self.case.ranks, rounds))
        ref = pop.Reference.of(ref_times.steps())
        self.command = list(times.command)
        self.rows = pop.per_step(ref, times.steps())
        self.facts = list(times.facts)
        self.ranks = self.case.ranks
        self.per_sample = {
            "step_seconds": [s.seconds for s in times.steps()],
            "max_compute_seconds": [max(s.compute) for s in times.steps()],
            "mean_compute_seconds": [statistics.fmean(s.compute) for s in times.steps()],
        }
        median = pop.median(pop.per_step(ref, ref_times.steps()))
        self.reference = {
            "ranks": 1,
            "compute_seconds": ref.compute,
            "step_seconds": ref.seconds,
            "samples_per_step": ref.samples,
            "communication_efficiency": median.communication_efficiency,
            "input_efficiency": median.input_efficiency,
        }
        phases = ("input", "compute", "wait", "comm")
        self.phase_shares = {p: times.median_share(p) for p in phases}
        self.compute_clock = times.compute_clock
        return [r.value(self.case.metric) for r in self.rows]

    def describe(self) -> dict[str, Any]:
        """The child source's description, with the reference run and the phase shares."""
        return {
            **super().describe(),
            "reference": self.reference,
            "phase_shares": self.phase_shares,
            "compute_clock": self.compute_clock,
        }


def workload(case: Case, settings: Settings, profile: HardwareProfile) -> Workload:
    """One efficiency at one scale; the launches behind it are shared with its siblings."""
    launcher = Launcher.parse(settings.launcher)
    launcher.check_slots(case.ranks, settings.oversubscribe)
    largest = max(settings.ranks) if settings.ranks else case.ranks
    threads = threads_per_rank(launcher, max(largest, case.ranks))

    def make(ranks: int, steps: int) -> Launch:
        return Launch(
            case.backend,
            case.device,
            ranks,
            batch_per_rank(case.mode, ranks),
            steps,
            threads,
            settings.launcher,
            settings.oversubscribe,
            settings.launch_timeout,
        )

    source = ScalingSource(
        command=make(case.ranks, 0).command(),
        timeout_s=settings.launch_timeout,
        kind="ranks",
        case=case,
        make=make,
    )
    context: dict[str, Any] = {
        "launcher": redact_command(launcher.template),  # as recorded: no credential
        "launcher_program": launcher.executable,
        "ranks": case.ranks,
        "mode": case.mode,
        "batch_per_rank": batch_per_rank(case.mode, case.ranks),
        "global_batch": batch_per_rank(case.mode, case.ranks) * case.ranks,
        "threads_per_rank": threads or "framework default",
        "timing": "timers around the phases (perfsuite.collectives.train), not a profiler",
        "summary": "median over timed steps of the per-step efficiency",
        "floor_fail_text": WARNING_TEXT,
    }
    return Workload(
        check="scaling",
        params={
            "backend": case.backend,
            "device": case.device,
            "mode": case.mode,
            "ranks": case.ranks,
            "metric": case.metric,
        },
        metric=case.metric,
        unit="ratio",
        work=Work(1, "step", "POP efficiency of one training step (1 is ideal)"),
        run=_never,
        ratio=True,
        reference=Reference(
            "POP rule of thumb", pop.WORTH_A_LOOK, profile.kind, measured=1.0, advisory=True
        ),
        context=context,
        source=source,
        ranks_outside_tree=not launcher.is_local_mpiexec,
    )


def _never() -> None:
    raise RuntimeError("a scaling check is measured by its ranks, not in this process")


def section(profile: HardwareProfile, results: Iterable[Result]) -> dict[str, Any]:
    """The POP table per (backend, device, mode): every efficiency at every rank count."""
    groups: dict[tuple[str, str, str], dict[int, dict[str, Any]]] = defaultdict(dict)
    references: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in results:
        if r.check != "scaling":
            continue
        key = (str(r.params["backend"]), str(r.params["device"]), str(r.params["mode"]))
        row = groups[key].setdefault(int(r.params["ranks"]), {"ranks": int(r.params["ranks"])})
        row[str(r.params["metric"])] = r.summary.median
        baseline = r.baseline.baseline_median
        if baseline is not None:
            row.setdefault("baseline", {})[str(r.params["metric"])] = baseline
        source = dict(r.source)
        row["phase_shares"] = source.get("phase_shares") or {}
        row["compute_clock"] = source.get("compute_clock", "")
        facts = source.get("facts") or []
        layout = next((f["layout"] for f in facts if "layout" in f), None)
        if layout:
            row["threads_per_rank"] = layout.get("threads_per_rank")
            row["library"] = layout.get("library")
        if source.get("reference"):
            references[key] = source["reference"]
    series_out = []
    for (backend, device, mode), rows in sorted(groups.items()):
        table = [reference_row(references.get((backend, device, mode)))]
        table += [rows[n] for n in sorted(rows)]
        series_out.append(
            {"backend": backend, "device": device, "mode": mode, "rows": [t for t in table if t]}
        )
    return {"series": series_out, "worth_a_look_below": pop.WORTH_A_LOOK} if series_out else {}


def reference_row(reference: dict[str, Any] | None) -> dict[str, Any]:
    """The one-rank run as a row of the table (its own efficiencies are 1 but CE and input)."""
    if not reference:
        return {}
    ce = float(reference["communication_efficiency"])
    row: dict[str, Any] = {
        "ranks": 1,
        "load_balance": 1.0,
        "communication_efficiency": ce,
        "parallel_efficiency": ce,
        "computation_scalability": 1.0,
        "global_efficiency": ce,
        "scaling_efficiency": 1.0,
        "reference": True,
    }
    if "input_efficiency" in reference:  # none in a record from before the input phase
        row["input_efficiency"] = float(reference["input_efficiency"])
    return row


sections.register("scaling", section)
