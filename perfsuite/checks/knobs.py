"""Framework knobs: a compiler (XLA, ``torch.compile``), mixed precision (AMP), layout.

A small CNN's training step is measured in each variant its backend offers (its
``knob_variants``): TensorFlow's ``baseline``, ``xla`` (``jit_compile=True``), ``amp``
(``mixed_float16`` with loss scaling on a GPU, ``mixed_bfloat16`` on a CPU with bf16
instructions) and ``xla+amp``; torch's ``baseline``, ``compile``, ``amp``, ``compile+amp``
and ``channels_last``.  The metric is samples/s.  There is no datasheet figure for a model's
throughput, so floors are no-reference; regressions against the baseline apply.  The run
record derives each variant's speedup over ``baseline`` on the same device.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from perfsuite import backends, sections
from perfsuite.checks.cases import Case
from perfsuite.hardware.profile import HardwareProfile
from perfsuite.measure.workload import Workload
from perfsuite.model import Result, Work

BATCH = 64
SEED = 32
BASELINE = "baseline"  # every backend's plain variant; quick mode runs it alone


def cases() -> list[Case]:
    """Every (target, variant) the knobs check runs."""
    return [
        Case(t, "", v, v, sweep=v != BASELINE)
        for t in backends.targets_for("train_step")
        for v in backends.get(t.backend).knob_variants
    ]


def skip_reason(case: Case) -> str | None:
    """Why a variant cannot run here (backend, device, or no mixed-precision hardware)."""
    reason = backends.skip_reason(case.target, "train_step")
    if reason or "amp" not in case.spec:
        return reason
    return backends.get(case.target.backend).amp_unavailable_reason(case.target.device)


def workload(case: Case) -> Workload:
    """Build the training-step workload of one variant."""
    backend = backends.get(case.target.backend)
    kernel = backend.train_step(case.target.device, case.spec, BATCH, SEED)

    return Workload(
        check="knobs",
        params={"backend": case.target.backend, "device": case.target.device, "variant": case.spec},
        metric="train_step",
        unit="samples/s",
        work=Work(BATCH, "samples", f"batch {BATCH} per step"),
        run=kernel.run,
        sync=kernel.sync,
        floor_note=(
            "a small CNN's training step with or without a knob: no profile figure applies; "
            "judged against its baseline, and the report compares the variants"
        ),
        context={
            "backend_version": backend.version(),
            **kernel.describe(),
        },
        close=kernel.close,
        source=backend.timer(case.target.device),
    )


def speedups(
    profile: HardwareProfile | None, results: Iterable[Result]
) -> dict[str, dict[str, Any]]:
    """Each variant's median samples/s over the baseline variant's, per backend and device."""
    medians: dict[str, dict[str, float]] = {}
    for r in results:
        if r.check == "knobs":
            key = f"{r.params['backend']}-{r.params['device']}"
            medians.setdefault(key, {})[r.params["variant"]] = r.summary.median
    out: dict[str, dict[str, Any]] = {}
    for key, by_variant in medians.items():
        base = by_variant.get(BASELINE)
        if base:
            out[key] = {v: m / base for v, m in by_variant.items() if v != BASELINE}
    return out


sections.register("knob_speedups", speedups)
