"""What a perf session needs to know, independent of pytest (a plain dataclass)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from perfsuite.judge import outcome, stats
from perfsuite.measure import allocator
from perfsuite.measure.loop import DEFAULT, FULL, QUICK, Policy
from perfsuite.measure.redaction import redact_command
from perfsuite.model.baseline import MAX_WINDOW, MIN_WINDOW

DEFAULT_TOLERANCE = 0.05
MIN_SAMPLES = 3  # a median, a spread and a test need at least this many
MAX_SAMPLES = 10_000  # repetitions per check: past this a check runs for hours, not minutes
MAX_SAMPLE_SECONDS = 60.0  # longer samples leave too few of them in any sensible session


def duration(text: str) -> float:
    """Seconds, 0 or more, from ``1800``, ``1800s``, ``30m`` or ``1h``; ValueError otherwise."""
    raw = text.strip().lower()
    scale = {"s": 1, "m": 60, "h": 3600}.get(raw[-1:], 0)
    value = float(raw[:-1] if scale else raw) * (scale or 1)
    if not 0 <= value < 1e7:  # also refuses nan and inf
        raise ValueError(text)
    return value


def duration_text(seconds: float) -> str:
    """A duration as :func:`duration` reads it back: ``10m``, ``1h`` or ``90s``."""
    if seconds > 0 and seconds == int(seconds):
        whole = int(seconds)
        if whole % 3600 == 0:
            return f"{whole // 3600}h"
        if whole % 60 == 0:
            return f"{whole // 60}m"
    return f"{seconds:.15g}s"


@dataclass(frozen=True)
class Settings:
    """Everything a perf session needs to know, independent of pytest."""

    hw: str = "auto"
    baseline_dir: Path = Path("baselines")
    report_dir: Path = Path("reports")
    profile_dirs: tuple[Path, ...] = ()
    save_baseline: bool = False
    force_baseline: bool = False
    baseline_runs: int | None = None  # None: the stored baseline's own window, else 5
    # Baseline runs accepted within this many seconds of a session's first count as one
    # session (stats.sessions); 0 counts each run as its own.
    baseline_window_s: float = stats.BACK_TO_BACK_S
    malloc_threshold: int = allocator.DEFAULT_MIB  # MiB; 0 leaves glibc's own policy
    quick: bool = False  # a smoke: the representative cases, short samples
    full: bool = False  # every case of each sweep, each beside its bare reference
    fidelity: bool = False  # sample bare references in quick and default mode too
    backends: tuple[str, ...] = ()  # run only these backends; empty: all
    samples: int | None = None  # repetitions per check, overriding the mode's
    sample_seconds: float | None = None  # the least a sample lasts, overriding the mode's
    tolerance: float = DEFAULT_TOLERANCE
    alpha: float = stats.ALPHA
    correction: str = stats.DEFAULT_CORRECTION  # fdr (Benjamini-Hochberg) or holm
    fail_on: frozenset[str] = outcome.DEFAULT_FAIL_ON
    html: bool = True
    markdown: Path | None = None
    allow_missing_device: bool = False  # judge against a GPU profile with no GPU visible
    allow_empty: bool = False  # a session that selected checks but measured none may pass
    benchmark_table: bool = False  # also print pytest-benchmark's own table
    model_flops: float | None = None  # training FLOPs per sample for the input compute limit
    data_dir: Path | None = None  # where the input-pipeline dataset is cached
    model_path: Path | None = None  # a saved Keras model whose FLOPs set the compute limit
    launcher: str = "mpiexec -n {ranks}"  # how collective checks start their ranks
    ranks: tuple[int, ...] = (2,)  # rank counts the collective checks are parametrized over
    oversubscribe: bool = False  # allow more local ranks than CPUs
    launch_timeout: float = 300.0  # seconds before a launch's process group is killed

    def __post_init__(self) -> None:
        """Reject settings that cannot be right."""
        if self.quick and self.full:
            raise ValueError("--perf-quick and --perf-full exclude each other; choose one mode")
        if not 0 < self.tolerance < 1:
            raise ValueError(f"tolerance must be a fraction between 0 and 1, got {self.tolerance}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be between 0 and 1, got {self.alpha}")
        if self.correction not in stats.CORRECTIONS:
            raise ValueError(
                f"unknown correction {self.correction!r}; use one of {', '.join(stats.CORRECTIONS)}"
            )
        if self.samples is not None and not MIN_SAMPLES <= self.samples <= MAX_SAMPLES:
            raise ValueError(f"samples must be {MIN_SAMPLES} to {MAX_SAMPLES}, got {self.samples}")
        if self.sample_seconds is not None and not 0 < self.sample_seconds <= MAX_SAMPLE_SECONDS:
            raise ValueError(
                f"a sample lasts more than 0 s and at most {MAX_SAMPLE_SECONDS:g} s, "
                f"got {self.sample_seconds}"
            )
        if self.malloc_threshold < 0:
            raise ValueError(f"the malloc threshold is a size, got {self.malloc_threshold}")
        if self.malloc_threshold > allocator.MAX_MIB:
            raise ValueError(
                f"--perf-malloc-threshold {self.malloc_threshold}: at most "
                f"{allocator.MAX_MIB} MiB (glibc's mallopt takes a C int of bytes)"
            )
        if self.baseline_runs is not None and not MIN_WINDOW <= self.baseline_runs <= MAX_WINDOW:
            raise ValueError(
                f"a baseline keeps {MIN_WINDOW} to {MAX_WINDOW} runs, got {self.baseline_runs}"
            )
        unknown = set(self.fail_on) - set(outcome.CHOOSABLE)
        if unknown:
            raise ValueError(f"unknown outcome(s) to fail on: {', '.join(sorted(unknown))}")

    @property
    def mode(self) -> str:
        """``quick``, ``default`` or ``full``: which cases run, and how each is measured."""
        return "quick" if self.quick else "full" if self.full else "default"

    @property
    def policy(self) -> Policy:
        """The mode's policy (fewer repetitions in quick mode), with the options' overrides."""
        base = {"quick": QUICK, "default": DEFAULT, "full": FULL}[self.mode]
        if self.fidelity:
            base = replace(base, references=True)
        if self.sample_seconds:
            base = replace(base, sample_seconds=self.sample_seconds)
        return base.with_repetitions(self.samples) if self.samples else base

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready settings, stored in the run record."""
        data = asdict(self)
        data.update(
            baseline_dir=str(self.baseline_dir),
            report_dir=str(self.report_dir),
            profile_dirs=[str(p) for p in self.profile_dirs],
            markdown=str(self.markdown) if self.markdown else None,
            data_dir=str(self.data_dir) if self.data_dir else None,
            model_path=str(self.model_path) if self.model_path else None,
            fail_on=sorted(self.fail_on),
            ranks=list(self.ranks),
            launcher=redact_command(self.launcher),
            warmup=self.policy.warmup,
            repetitions=self.policy.repetitions,
            policy=self.policy.to_dict(),
        )
        return data
