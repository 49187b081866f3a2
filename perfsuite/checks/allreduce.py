"""Allreduce latency and bus bandwidth across real ranks (OSU and nccl-tests conventions).

One check per message size.  Sizes double from 4 B to 64 MiB in full mode (default mode:
8 B, 64 KiB, 16 MiB; quick mode: 8 B and 16 MiB).  Each size is one launch of
:mod:`perfsuite.collectives.worker` through the launcher (``mpiexec -n N`` by default); the
pytest process is never a rank.

* Below 1 MiB the metric is latency: microseconds per allreduce, the mean across ranks
  (lower is better).  A small-message latency reference exists only where the profile gives
  one (``interconnect.allreduce_latency_us``); otherwise the check is no-reference.
* From 1 MiB the metric is busbw = algbw * 2(n-1)/n, with algbw = S/t (nccl-tests), in GB/s.
  Its floor on GPUs is the profile's ``interconnect.bandwidth_gbs``.  Ranks on the host CPU
  have no floor: they reduce through shared memory (MPI) or TCP sockets (gloo, TensorFlow's
  ring), and no figure bounds either.  A single-thread copy did not: a healthy 16 MiB MPI
  allreduce reads about a tenth of it, and gloo over TCP loopback a third of MPI, still
  above the 5% floor once set there, so that floor could not tell a transport fallen back
  to sockets.  They are judged against their baselines.
* MPI's figure is the collective's own time, taken by a C loop inside the rank over
  mpi4py's communicator (:mod:`perfsuite.collectives.native_loop`, the OSU method); each
  sample also times mpi4py's own calls, and the record keeps both (``binding_latency_us``).

The run record's ``allreduce`` section holds the whole curve per backend and rank count:
latency (mean and max across ranks), algbw and busbw per size, the fitted alpha-beta model
t = 2(n-1) alpha + 2(n-1)/n S beta, and the tensor-fusion speedup.
"""

from __future__ import annotations

import importlib.util
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfsuite import sections
from perfsuite.collectives import LIBRARIES, SOCKET_LIBRARIES, horovod
from perfsuite.collectives.launch import Launcher, free_loopback_ports, ranks_without_gpus
from perfsuite.hardware.profile import HardwareProfile
from perfsuite.measure.redaction import redact_command
from perfsuite.measure.sources import ChildSource
from perfsuite.measure.workload import Reference, Workload
from perfsuite.model import Result, Work
from perfsuite.settings import Settings

FULL_SIZES = tuple(4 << i for i in range(25))  # 4 B .. 64 MiB
# Quick mode: one launch per regime (latency at 8 B and 64 KiB, bandwidth at 16 MiB);
# each launch costs the ranks' start-up (a framework import per rank), not just samples.
QUICK_SIZES = (8, 64 << 10, 16 << 20)
# Quick mode (--perf-quick): latency at 8 B and bus bandwidth at 16 MiB, no fusion check.
REPRESENTATIVE_SIZES = (8, 16 << 20)
BUSBW_FROM = 1 << 20  # sizes from here are judged as bus bandwidth
FUSION_TENSORS = 64
FUSION_BYTES = 1 << 20
# nccl-tests busbw on 8xA100 NVSwitch reaches ~230 GB/s against NVLink3's 600 GB/s
# (bidirectional) figure: 0.38; DCGM-style floors sit at 0.75x of good hardware -> 0.3.
GPU_BUSBW_FRACTION = 0.3


@dataclass(frozen=True)
class Case:
    """One backend, device kind, rank count and message size."""

    backend: str
    device: str
    ranks: int
    size: int  # bytes; 0 for the fusion check
    full_only: bool = False
    sweep: bool = False  # beyond quick mode's latency and bandwidth representatives
    # Horovod's HOROVOD_FUSION_THRESHOLD for the fusion check; None: the library's default.
    fusion_threshold: int | None = None

    @property
    def id(self) -> str:
        """The pytest id, e.g. ``mpi-cpu-2ranks-64KiB``.

        Horovod's fusion check with ``HOROVOD_FUSION_THRESHOLD=0`` (tensor fusion off) ends
        in ``-threshold0``: ``horovod-cpu-2ranks-fusion64-threshold0``.
        """
        what = human_bytes(self.size) if self.size else f"fusion{FUSION_TENSORS}"
        if self.fusion_threshold is not None:
            what += f"-threshold{self.fusion_threshold}"
        return f"{self.backend}-{self.device}-{self.ranks}ranks-{what}"

    @property
    def metric(self) -> str:
        """``latency`` for small messages, ``busbw`` from 1 MiB, ``latency`` for fusion."""
        return "busbw" if self.size >= BUSBW_FROM else "latency"


def human_bytes(size: int) -> str:
    """4B, 64KiB, 16MiB."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale}{unit}"
    return f"{size}B"


def cases(ranks: Sequence[int]) -> list[Case]:
    """Every (backend, device, ranks, size), with the fusion check per group."""
    out = []
    for backend in LIBRARIES:
        # MPI and TF's ring reduce host buffers here; GPU allreduce is torch's and Horovod's.
        for device in ("cpu", "gpu") if backend in ("torch", "horovod") else ("cpu",):
            for n in ranks:
                for size in FULL_SIZES:
                    out.append(
                        Case(
                            backend,
                            device,
                            n,
                            size,
                            full_only=size not in QUICK_SIZES,
                            sweep=size not in REPRESENTATIVE_SIZES,
                        )
                    )
                out.append(Case(backend, device, n, 0, sweep=True))
                if backend == "horovod":  # tensor fusion off, against the default above
                    out.append(Case(backend, device, n, 0, sweep=True, fusion_threshold=0))
    return out


def busbw_factor(ranks: int) -> float:
    """2(n-1)/n: the share of the buffer a ring allreduce moves through each link."""
    return 2 * (ranks - 1) / ranks


def unavailable_reason(case: Case, launcher: Launcher) -> str | None:
    """Why this case cannot run here, with an install hint; or None."""
    module, hint = LIBRARIES[case.backend]
    if case.backend == "horovod":
        reason = horovod.unavailable_reason(need_torch=case.device == "gpu")
        if reason:
            return reason
    elif importlib.util.find_spec(module) is None:
        return f"{module} is not installed; {hint}"
    if case.device == "gpu":
        return ranks_without_gpus(case.ranks, launcher) or launcher.unavailable_reason()
    return launcher.unavailable_reason()


def _launch(case: Case, settings: Settings) -> tuple[ChildSource, dict[str, Any], bool]:
    """The launch of the worker's ranks for this case, and what the record says of it.

    And whether its ranks run outside this session's process tree (a scheduler's ranks, not
    mpiexec's children).
    """
    launcher = Launcher.parse(settings.launcher)
    launcher.check_slots(case.ranks, settings.oversubscribe)
    policy = settings.policy
    args = ["--backend", case.backend, "--device", case.device]
    args += ["--sample-seconds", str(policy.sample_seconds)]
    if case.size:
        args += ["--sizes", str(case.size)]
    else:
        args += ["--fusion-tensors", str(FUSION_TENSORS), "--fusion-bytes", str(FUSION_BYTES)]
    master, *workers = free_loopback_ports(1 + case.ranks)
    env = {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(master),
        "PERFSUITE_COLLECTIVE_PORTS": ",".join(map(str, workers)),
    }
    if case.backend == "torch" and case.device == "cpu":
        env["GLOO_SOCKET_IFNAME"] = "lo"
    if case.fusion_threshold is not None:
        env["HOROVOD_FUSION_THRESHOLD"] = str(case.fusion_threshold)
    launcher_env = launcher.environment()
    env.update(launcher_env)
    source = ChildSource(
        launcher.command(case.ranks, args, settings.oversubscribe),
        timeout_s=settings.launch_timeout,
        env=env,
        kind="ranks",
        rounds_flag="--samples",
    )
    context: dict[str, Any] = {
        "launcher": redact_command(launcher.template),  # as recorded: no credential
        "launcher_program": launcher.executable,
        "ranks": case.ranks,
    }
    if launcher_env:
        context["launcher_env"] = sorted(launcher_env)
    return source, context, not launcher.is_local_mpiexec


def workload(case: Case, settings: Settings, profile: HardwareProfile) -> Workload:
    """One launch of the worker for this case; its ranks print the samples."""
    source, context, outside_tree = _launch(case, settings)
    params = {"backend": case.backend, "device": case.device, "ranks": case.ranks}
    if not case.size:
        fusion_params: dict[str, Any] = {"tensors": FUSION_TENSORS, "total_bytes": FUSION_BYTES}
        if case.fusion_threshold is not None:
            fusion_params["fusion_threshold"] = case.fusion_threshold
        return Workload(
            check="allreduce_fusion",
            params={**params, **fusion_params},
            metric="latency",
            unit="µs",
            work=Work(
                1, "op", f"{FUSION_TENSORS} allreduces of {FUSION_BYTES // FUSION_TENSORS} B each"
            ),
            run=_never,
            scale=1e-6,
            higher_is_better=False,
            floor_note=(
                "tensor fusion: many small allreduces against one fused; judged against its "
                "baseline, and the report shows the fusion's gain"
            ),
            context=context,
            ranks_outside_tree=outside_tree,
            source=source,
        )
    params["size"] = case.size
    context["size_bytes"] = case.size
    if case.metric == "latency":
        return Workload(
            check="allreduce",
            params=params,
            metric="latency",
            unit="µs",
            work=Work(1, "op", "one allreduce, float32 sum, mean latency across ranks (OSU)"),
            run=_never,
            scale=1e-6,
            higher_is_better=False,
            reference=Reference("interconnect.allreduce_latency_us", 1.0, profile.kind),
            context=context,
            ranks_outside_tree=outside_tree,
            source=source,
        )
    factor = busbw_factor(case.ranks)
    reference: Reference | None
    if case.device == "cpu":
        reference = None  # shared memory or TCP sockets on one host: no figure bounds either
    else:
        reference = Reference("interconnect.bandwidth_gbs", GPU_BUSBW_FRACTION, "gpu")
    return Workload(
        check="allreduce",
        params=params,
        metric="busbw",
        unit="GB/s",
        work=Work(
            case.size * factor,
            "B",
            f"nccl-tests busbw: S x 2(n-1)/n = {case.size} x {factor:g} B per allreduce",
        ),
        run=_never,
        scale=1e9,
        reference=reference,
        floor_note=_cpu_busbw_note(case.backend) if reference is None else "",
        context=context,
        ranks_outside_tree=outside_tree,
        source=source,
    )


def _cpu_busbw_note(backend: str) -> str:
    """Why ranks on the host CPU have no bandwidth floor."""
    if backend in SOCKET_LIBRARIES or backend == "horovod":  # Horovod as built here: Gloo
        how = f"{backend} moves the data over TCP sockets here"
    else:
        how = f"{backend}'s ranks on one host reduce through shared memory"
    return (
        f"{how}: no figure bounds it (a single-thread copy's rate cannot tell shared memory "
        "from sockets); judged against its baseline"
    )


def _never() -> None:
    raise RuntimeError("an allreduce check is measured by its ranks, not in this process")


def fit_alpha_beta(
    sizes: Sequence[float], seconds: Sequence[float], ranks: int
) -> tuple[float, float] | None:
    """Fit t = 2(n-1) alpha + 2(n-1)/n S beta (least squares on relative error).

    Returns (alpha in seconds, beta in seconds per byte), both >= 0, or None with fewer than
    two sizes.  Relative error weighs a 4 B and a 64 MiB point alike.
    """
    if len(sizes) < 2:
        return None
    from scipy.optimize import nnls

    t = np.asarray(seconds, dtype=float)
    design = np.column_stack(
        [np.full(len(t), 2.0 * (ranks - 1)), busbw_factor(ranks) * np.asarray(sizes, float)]
    )
    coef, _ = nnls(design / t[:, None], np.ones(len(t)))
    return float(coef[0]), float(coef[1])


def _median(values: Iterable[float]) -> float:
    return float(np.median(list(values)))


def _seconds_per_op(r: Result) -> list[float]:
    return [float(s) for s in r.seconds]


def section(profile: HardwareProfile, results: Iterable[Result]) -> dict[str, Any]:
    """The allreduce curves: per (backend, device, ranks), every size, the fit, the fusion."""
    groups: dict[tuple[str, str, int], dict[str, Any]] = defaultdict(
        lambda: {"points": [], "fusion": None}
    )
    for r in results:
        if r.check not in ("allreduce", "allreduce_fusion"):
            continue
        key = (str(r.params["backend"]), str(r.params["device"]), int(r.params["ranks"]))
        group = groups[key]
        per_sample = dict(r.source).get("per_sample", {}) or {}
        facts = dict(r.source).get("facts") or []
        layout = next((f["layout"] for f in facts if "layout" in f), None)
        if layout:
            group["layout"] = layout
        seconds = _median(_seconds_per_op(r))
        if r.check == "allreduce_fusion":
            fused = per_sample.get("fused_seconds") or []
            # Horovod's run with tensor fusion off (HOROVOD_FUSION_THRESHOLD=0) sits beside.
            which = "fusion" if r.params.get("fusion_threshold") is None else "fusion_off"
            if fused:
                group[which] = {
                    "tensors": int(r.params["tensors"]),
                    "total_bytes": int(r.params["total_bytes"]),
                    "separate_us": seconds * 1e6,
                    "fused_us": _median(fused) * 1e6,
                    "speedup": seconds / _median(fused),
                }
            continue
        size = int(r.params["size"])
        n = int(layout["ranks"]) if layout else int(r.params["ranks"])
        maxima = per_sample.get("max_seconds") or []
        binding = per_sample.get("binding_seconds") or []
        group["points"].append(
            {
                "id": r.id,
                "size": size,
                "latency_us": seconds * 1e6,
                "max_latency_us": _median(maxima) * 1e6 if maxima else None,
                # MPI: mpi4py's own calls, paired with the C loop's samples (else None)
                "binding_latency_us": _median(binding) * 1e6 if binding else None,
                "algbw_gbs": size / seconds / 1e9,
                "busbw_gbs": size / seconds / 1e9 * busbw_factor(n),
                "baseline_latency_us": _baseline_latency_us(r, size, n),
            }
        )
    curves = []
    for (backend, device, ranks), group in sorted(groups.items()):
        points = sorted(group["points"], key=lambda p: p["size"])
        n = int(group.get("layout", {}).get("ranks", ranks))
        fit = fit_alpha_beta(
            [p["size"] for p in points], [p["latency_us"] * 1e-6 for p in points], n
        )
        curves.append(
            {
                "backend": backend,
                "device": device,
                "ranks": n,
                "layout": group.get("layout"),
                "points": points,
                "alpha_us": fit[0] * 1e6 if fit else None,
                "beta_ns_per_byte": fit[1] * 1e9 if fit else None,
                "fit_bandwidth_gbs": 1 / fit[1] / 1e9 if fit and fit[1] > 0 else None,
                "fusion": group["fusion"],
                **horovod_fusion_effect(group),
            }
        )
    return {"curves": curves} if curves else {}


def horovod_fusion_effect(group: dict[str, Any]) -> dict[str, Any]:
    """Horovod's tensor-fusion effect: K small allreduces in flight, fusion off over on.

    Empty unless the group has both runs (the default threshold and 0).
    """
    on, off = group.get("fusion"), group.get("fusion_off")
    if not on or not off:
        return {}
    return {
        "fusion_off": off,
        "fusion_effect": off["separate_us"] / on["separate_us"],
    }


def _baseline_latency_us(r: Result, size: int, ranks: int) -> float | None:
    """The baseline's median latency for this size (from its latency or busbw median)."""
    median = r.baseline.baseline_median
    if median is None:
        return None
    if r.metric == "latency":
        return float(median)
    return size * busbw_factor(ranks) / (median * 1e9) * 1e6


sections.register("allreduce", section)
