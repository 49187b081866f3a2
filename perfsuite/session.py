"""The perf session: resolves the profile, judges measurements, writes the run record.

It is built from a plain :class:`Settings` dataclass, so it can be used and tested without
pytest; the plugin only translates options into settings and wires hooks to it.
"""

from __future__ import annotations

import datetime as dt
import re
import secrets
import socket
import time
import zlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from perfsuite import stats, waivers
from perfsuite.baseline import Baseline, BaselineStore
from perfsuite.hardware.detect import resolve
from perfsuite.hardware.profile import HardwareProfile, ProfileRegistry
from perfsuite.measure import FULL, QUICK, Measurement, Policy, Workload
from perfsuite.model import FloorVerdict, Result, RunRecord
from perfsuite.storage import check_writable, write_json_atomic, write_text_atomic
from perfsuite.tolerances import Tolerances
from perfsuite.workloads import knobs, roofline

DEFAULT_TOLERANCE = 0.05
HISTORY_RUNS = 30  # past run records a report draws its sparklines from


@dataclass(frozen=True)
class Settings:
    """Everything a perf session needs to know, independent of pytest."""

    hw: str = "auto"
    baseline_dir: Path = Path("baselines")
    report_dir: Path = Path("reports")
    profile_dirs: tuple[Path, ...] = ()
    save_baseline: bool = False
    quick: bool = False
    tolerance: float = DEFAULT_TOLERANCE
    alpha: float = stats.ALPHA
    html: bool = True
    markdown: Path | None = None

    def __post_init__(self) -> None:
        """Reject settings that cannot be right."""
        if not 0 < self.tolerance < 1:
            raise ValueError(f"tolerance must be a fraction between 0 and 1, got {self.tolerance}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be between 0 and 1, got {self.alpha}")

    @property
    def policy(self) -> Policy:
        """Repetition policy: fewer repetitions in quick mode."""
        return QUICK if self.quick else FULL

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready settings, stored in the run record."""
        data = asdict(self)
        data.update(
            baseline_dir=str(self.baseline_dir),
            report_dir=str(self.report_dir),
            profile_dirs=[str(p) for p in self.profile_dirs],
            markdown=str(self.markdown) if self.markdown else None,
            warmup=self.policy.warmup,
            repetitions=self.policy.repetitions,
        )
        return data


def _new_run_id(now: datetime) -> str:
    host = re.sub(r"[^A-Za-z0-9]+", "-", socket.gethostname()).strip("-")[:32] or "host"
    return f"{now:%Y%m%dT%H%M%S}{now.microsecond // 1000:03d}Z-{host}-{secrets.token_hex(2)}"


@dataclass
class PerfSession:
    """Collects results for one pytest session (or one worker of it)."""

    settings: Settings
    registry: ProfileRegistry = field(init=False)
    results: list[Result] = field(default_factory=list)
    created: datetime = field(default_factory=lambda: datetime.now(UTC))
    started: float = field(default_factory=time.perf_counter)
    run_id: str = ""
    today: dt.date = field(default_factory=lambda: dt.datetime.now(UTC).date())
    _profile: HardwareProfile | None = field(default=None, init=False)
    _baseline: Baseline | None = field(default=None, init=False)
    _tolerances: Tolerances | None = field(default=None, init=False)
    _waivers: list[waivers.Waiver] | None = field(default=None, init=False)
    _holm: stats.SequentialHolm = field(default_factory=lambda: stats.SequentialHolm(1))

    def __post_init__(self) -> None:
        """Index profiles and check a named ``--hw`` right away (cheap, no detection)."""
        self.registry = ProfileRegistry(self.settings.profile_dirs)
        if self.settings.hw != "auto":
            self.registry.path(self.settings.hw)
        self.run_id = self.run_id or _new_run_id(self.created)

    def prepare(self) -> None:
        """Resolve the profile, load its baseline and check writability; raise on bad input."""
        profile = self.profile
        self.baseline  # noqa: B018 - loads and validates the baseline file now
        self.tolerances  # noqa: B018
        self.waivers  # noqa: B018
        check_writable(self.settings.report_dir / profile.name)
        if self.settings.save_baseline:
            BaselineStore(self.settings.baseline_dir).check_writable(profile.name)

    @property
    def profile(self) -> HardwareProfile:
        """The hardware profile of this run (resolved once)."""
        if self._profile is None:
            self._profile = resolve(self.settings.hw, self.registry)
        return self._profile

    @property
    def baseline(self) -> Baseline:
        """The stored baseline of this run's profile (loaded once)."""
        if self._baseline is None:
            self._baseline = BaselineStore(self.settings.baseline_dir).load(self.profile.name)
        return self._baseline

    @property
    def profile_dir(self) -> Path:
        """The profile's folder under the baselines directory."""
        return self.settings.baseline_dir / self.profile.name

    @property
    def tolerances(self) -> Tolerances:
        """The profile's tolerance configuration (loaded once)."""
        if self._tolerances is None:
            self._tolerances = Tolerances.load(self.profile_dir)
        return self._tolerances

    @property
    def waivers(self) -> list[waivers.Waiver]:
        """The profile's waivers (loaded once)."""
        if self._waivers is None:
            self._waivers = waivers.load(self.profile_dir)
        return self._waivers

    def set_family(self, node_ids: list[str]) -> int:
        """Size the Holm family: the checks of this run that have a baseline."""
        m = sum(1 for node_id in node_ids if self.baseline.get(node_id) is not None)
        self._holm = stats.SequentialHolm(m, self.settings.alpha)
        return m

    def floor(self, workload: Workload, value: float, fraction: float | None) -> FloorVerdict:
        """Judge the best sample against the profile figure the workload names."""
        ref = workload.reference
        profile = self.profile
        if ref is None:
            return stats.floor_verdict(value, None, 0.0, reason="the check has no reference figure")
        fraction = ref.fraction if fraction is None else fraction
        if profile.kind != ref.device_kind:
            reason = (
                f"profile {profile.name!r} describes a {profile.kind}; it has no "
                f"{ref.figure} for a {ref.device_kind} measurement"
            )
            return stats.floor_verdict(value, None, fraction, figure=ref.figure, reason=reason)
        values = [profile.figure(key) for key in ref.inputs]
        missing = [key for key, v in zip(ref.inputs, values, strict=True) if v is None]
        if missing:
            reason = f"profile {profile.name!r} has no {', '.join(missing)}"
            return stats.floor_verdict(value, None, fraction, figure=ref.figure, reason=reason)
        peak = ref.combine(*values) if ref.combine else values[0]
        return stats.floor_verdict(
            value,
            peak,
            fraction,
            higher_is_better=workload.higher_is_better,
            figure=ref.figure,
            estimated=any(profile.is_estimated(key) for key in ref.inputs),
        )

    def judge(
        self,
        node_id: str,
        workload: Workload,
        measurement: Measurement,
        *,
        floor_fraction: float | None = None,
        tolerance: float | None = None,
        noise: dict[str, Any] | None = None,
    ) -> Result:
        """Turn a measurement into a result with its floor and baseline verdicts."""
        noise = dict(noise or {})
        tol, tol_source = self.tolerances.resolve(node_id, tolerance, self.settings.tolerance)
        values = measurement.values
        best = stats.best(values, workload.higher_is_better)
        entry = self.baseline.get(node_id)
        if entry is not None and entry.unit != workload.unit:
            entry = None  # a changed unit is a different measurement: judged as new
        summary = stats.summarize(values)
        noise["cv"] = summary.cv
        baseline = stats.baseline_verdict(
            values,
            entry.samples if entry else None,
            higher_is_better=workload.higher_is_better,
            tolerance=tol,
            baseline_run_id=entry.run_id if entry else "",
            holm_family=self._holm,
            alpha=self.settings.alpha,
            guards=noise.get("flags", ()),
            seed=zlib.crc32(node_id.encode()),
        )
        waiver = waivers.find(self.waivers, node_id)
        waiver_info = None
        if waiver is not None:
            if waiver.expired(self.today):
                waiver_info = waiver.to_dict("expired")
            else:
                applied = baseline.verdict == "regressed"
                waiver_info = waiver.to_dict("applied" if applied else "stale")
        return Result(
            id=node_id,
            check=workload.check,
            params=dict(workload.params),
            metric=workload.metric,
            unit=workload.unit,
            higher_is_better=workload.higher_is_better,
            samples=values,
            seconds=measurement.seconds,
            summary=summary,
            work=workload.work,
            floor=self.floor(workload, best, floor_fraction),
            baseline=baseline,
            context={
                **workload.context,
                "timer": measurement.timer,
                "tolerance_from": tol_source,
                "expectations": [asdict(e) for e in workload.expectations],
            },
            noise=noise,
            waiver=waiver_info,
        )

    def add(self, result: Result) -> None:
        """Keep a result (from this process or from an xdist worker)."""
        self.results.append(result)

    def record(self, environment: Mapping[str, Any]) -> RunRecord:
        """Assemble the run record of everything collected so far."""
        return RunRecord(
            run_id=self.run_id,
            created=self.created.isoformat(timespec="seconds"),
            hardware_profile=self.profile.to_dict(),
            environment=dict(environment),
            results=tuple(self.results),
            settings=self.settings.to_dict(),
            duration_s=round(time.perf_counter() - self.started, 3),
            derived={
                "roofline": roofline.section(self.profile, self.results),
                "knob_speedups": knobs.speedups(self.results),
            },
        )

    def record_path(self) -> Path:
        """Where this run's record goes: ``<report_dir>/<profile>/<run-id>.json``."""
        return self.settings.report_dir / self.profile.name / f"{self.run_id}.json"

    def write_record(self, record: RunRecord) -> Path:
        """Write the run record atomically."""
        return write_json_atomic(self.record_path(), record.to_dict())

    def save_baseline(self, environment: Mapping[str, Any] | None = None) -> Path:
        """Accept this run's results as the profile's baseline (merged per check)."""
        store = BaselineStore(self.settings.baseline_dir)
        return store.save(self.profile.name, self.results, self.run_id, environment)

    def write_html(self, record: RunRecord) -> Path:
        """Render the HTML report next to the run record, with the baseline run and history."""
        from perfsuite import records
        from perfsuite.report.html import render

        # An unreadable old record does not stop this run's report.
        history = records.history(
            self.settings.report_dir, self.profile.name, last=HISTORY_RUNS, skip_unreadable=True
        )
        runs = Counter(
            r.baseline.baseline_run_id for r in record.results if r.baseline.baseline_run_id
        )
        baseline_record = next(
            (h for run_id, _ in runs.most_common() for h in history if h.run_id == run_id), None
        )
        html = render(
            record,
            baseline=baseline_record,
            baseline_environment=self.baseline.environment(),
            history=history,
        )
        path = self.record_path().with_suffix(".html")
        write_text_atomic(path, html)
        return path
