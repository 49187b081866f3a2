"""One perf run: profile, judge, results, and what the run writes at its end.

The session resolves the profile, judges through the :class:`~perfsuite.judge.verdict.Judge`, and
writes the run record, the reports and (when asked) the baseline.

It is built from a plain :class:`~perfsuite.settings.Settings`, so it can be used and tested
without pytest; the plugin only translates options into settings and wires hooks to it.
"""

from __future__ import annotations

import datetime as dt
import re
import secrets
import socket
import sys
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from perfsuite import sections
from perfsuite.errors import ProfileError, StorageError
from perfsuite.hardware.detect import gpu_facts, resolve
from perfsuite.hardware.profile import HardwareProfile, ProfileRegistry
from perfsuite.judge.admission import not_saved, refusals
from perfsuite.judge.verdict import Judge, finalize
from perfsuite.model import Crash, Result, RunRecord
from perfsuite.model.baseline import Baseline
from perfsuite.model.finished import Finished, NotSaved, Refusal
from perfsuite.report.explain import explained
from perfsuite.report.terminal import baseline_notice
from perfsuite.settings import DEFAULT_TOLERANCE, Settings
from perfsuite.store import rules
from perfsuite.store.baseline import BaselineStore
from perfsuite.store.files import check_writable, same_file, write_json_atomic, write_text_atomic

__all__ = ["DEFAULT_TOLERANCE", "Finished", "PerfSession", "Settings"]

HISTORY_RUNS = 30  # past run records a report draws its sparklines from


def _new_run_id(now: datetime) -> str:
    host = re.sub(r"[^A-Za-z0-9]+", "-", socket.gethostname()).strip("-")[:32] or "host"
    return f"{now:%Y%m%dT%H%M%S}{now.microsecond // 1000:03d}Z-{host}-{secrets.token_hex(2)}"


@dataclass
class PerfSession:
    """Collects results for one pytest session (or one worker of it)."""

    settings: Settings
    registry: ProfileRegistry = field(init=False)
    results: list[Result] = field(default_factory=list)
    crashed: list[Crash] = field(default_factory=list)  # selected checks with no result
    incomplete: str = ""  # why the run stopped before every selected check ran
    seam: list[str] = field(default_factory=list)  # plugins that replaced machine readings
    created: datetime = field(default_factory=lambda: datetime.now(UTC))
    started: float = field(default_factory=time.perf_counter)
    run_id: str = ""
    today: dt.date = field(default_factory=lambda: dt.datetime.now(UTC).date())
    _profile: HardwareProfile | None = field(default=None, init=False)
    _judge: Judge | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        """Index profiles and check a named ``--hw`` right away (cheap, no detection)."""
        self.registry = ProfileRegistry(self.settings.profile_dirs)
        if self.settings.hw.lower() != "auto":
            self.registry.path(self.settings.hw)
        self.run_id = self.run_id or _new_run_id(self.created)

    @property
    def store(self) -> BaselineStore:
        """The baselines directory, keeping the configured number of runs per check."""
        return BaselineStore(self.settings.baseline_dir, self.settings.baseline_runs)

    @property
    def profile(self) -> HardwareProfile:
        """The hardware profile of this run (resolved once)."""
        if self._profile is None:
            self._profile = resolve(self.settings.hw, self.registry)
        return self._profile

    @property
    def judge(self) -> Judge:
        """The judge of this run: baseline, tolerances and waivers loaded once."""
        if self._judge is None:
            profile_dir = self.settings.baseline_dir / self.profile.name
            self._judge = Judge(
                self.settings,
                self.profile,
                self.store.load(self.profile.name),
                rules.load_tolerances(profile_dir),
                rules.load_waivers(profile_dir),
                self.today,
            )
        return self._judge

    @property
    def baseline(self) -> Baseline:
        """The stored baseline of this run's profile."""
        return self.judge.baseline

    def check_device(self) -> None:
        """A named GPU profile needs a visible GPU, unless the user allows its absence."""
        profile = self.profile
        if self.settings.hw.lower() == "auto" or profile.kind != "gpu":
            return
        if self.settings.allow_missing_device:
            return
        facts = gpu_facts()
        if not facts.names:
            raise ProfileError(
                f"--hw={self.settings.hw}: profile {profile.name!r} describes a GPU, but no GPU "
                f"is visible here ({facts.reason}); a nightly GPU job whose GPU is gone must not "
                "pass. Use --perf-allow-missing-device to judge this machine against it anyway."
            )

    def check_baseline_dir(self) -> None:
        """Comparing needs the baselines directory to exist; only saving creates it."""
        directory = self.settings.baseline_dir
        if self.settings.save_baseline or directory.is_dir():
            return
        if directory.exists():
            raise StorageError(f"--perf-baseline-dir {directory}: not a directory")
        raise StorageError(
            f"--perf-baseline-dir {directory}: no such directory, so nothing could be compared "
            "(a typo, or a CI cache that was not restored?). Run once with --perf-save-baseline "
            "to create it, or point --perf-baseline-dir at the baselines."
        )

    def prepare(self) -> None:
        """Resolve the profile, load its baseline and check writability; raise on bad input."""
        self.check_device()
        self.check_baseline_dir()
        folder = self.settings.baseline_dir / self.profile.name
        if folder.exists() and not folder.is_dir():
            raise StorageError(
                f"{folder}: is a file where the baselines of profile {self.profile.name!r} "
                "belong (a folder); move it away so the baseline can be read"
            )
        self.judge  # noqa: B018 - loads and validates the baseline, tolerances and waivers now
        check_writable(self.settings.report_dir / self.profile.name)
        if self.settings.save_baseline:
            self.store.check_writable(self.profile.name)

    def check_outputs(self, outputs: list[Path | None]) -> None:
        """Refuse an output file (Markdown, JUnit) that is one of the run's input files."""
        folder = self.settings.baseline_dir / self.profile.name
        inputs = [
            self.store.path(self.profile.name),
            folder / rules.WAIVERS,
            folder / "tolerances.toml",
            Path(self.profile.origin),
        ]
        for out in [self.settings.markdown, *outputs]:
            for path in inputs:
                if out is not None and same_file(out, path):
                    raise StorageError(
                        f"{out}: that is {path}, an input of this run; write the report elsewhere"
                    )

    def set_family(self, node_ids: list[str]) -> int:
        """Size the family of comparisons from the checks selected to run."""
        return self.judge.set_family(node_ids)

    def add(self, result: Result) -> None:
        """Keep a result (from this process or from an xdist worker)."""
        self.results.append(result)

    def add_crash(self, crash: Crash) -> None:
        """Keep a selected check that produced no result (its first failing phase only)."""
        if crash.id not in {c.id for c in self.crashed}:
            self.crashed.append(crash)

    def not_saved(self) -> NotSaved | None:
        """Why this run saves no baseline at all, whatever its results (None: it may)."""
        return not_saved(self.incomplete, len(self.crashed), self.settings.force_baseline)

    def finalize(self) -> list[str]:
        """Decide every result's significance over the whole family (all xdist workers').

        Returns the ids whose outcome changed (see :func:`perfsuite.judge.verdict.finalize`).
        """
        results, changed = finalize(
            self.results, alpha=self.settings.alpha, correction=self.settings.correction
        )
        self.results = [self.explained(r) for r in results]
        return changed

    def explained(self, result: Result) -> Result:
        """The result with the sentences that explain its verdict and outcome (pytest, reports)."""
        return explained(result, self.profile.name)

    def record(self, environment: Mapping[str, Any]) -> RunRecord:
        """Assemble the run record of everything collected so far."""
        judged = [r for r in self.results if r.baseline.verdict != "new"]
        settings = self.settings.to_dict()
        # Each verdict carries the family it was judged in (xdist workers size it themselves;
        # this process may not have collected anything).
        sizes = [r.baseline.family_size for r in judged if r.baseline.family_size]
        size = max(sizes) if sizes else self.judge.family.m
        settings["family"] = {
            "size": size,
            "judged": len(judged),
            "alpha": self.settings.alpha,
            "correction": self.settings.correction,
            "first_threshold": self.settings.alpha / max(size, 1),
            "final": all(r.baseline.final for r in judged),
        }
        if self.seam:
            settings["measurement_seam"] = list(self.seam)
        return RunRecord(
            run_id=self.run_id,
            created=self.created.isoformat(timespec="seconds"),
            hardware_profile=self.profile.to_dict(),
            environment=dict(environment),
            results=tuple(self.results),
            settings=settings,
            duration_s=round(time.perf_counter() - self.started, 3),
            derived=sections.compute(self.profile, self.results),
            incomplete=self.incomplete,
            crashed=tuple(self.crashed),
        )

    def record_path(self) -> Path:
        """Where this run's record goes: ``<report_dir>/<profile>/<run-id>.json``."""
        return self.settings.report_dir / self.profile.name / f"{self.run_id}.json"

    def write_record(self, record: RunRecord) -> Path:
        """Write the run record atomically."""
        return write_json_atomic(self.record_path(), record.to_dict())

    def save_baseline(
        self, environment: Mapping[str, Any] | None = None
    ) -> tuple[Path | None, int, dict[str, list[Refusal]]]:
        """Add this run to the profile's baseline; refuse results a baseline must not hold.

        Failed or regressed results, results measured under foreign load or throttling, and
        quick-mode results are refused unless the settings force them.  Returns the path
        (None when nothing was saved), the number of entries saved and the refusals.
        """
        refused: dict[str, list[Refusal]] = {}
        accepted = []
        for r in self.results:
            why = refusals(r, self.settings.quick)
            if why and not self.settings.force_baseline:
                refused[r.id] = why
            else:
                accepted.append(r)
        if not accepted:
            return None, 0, refused
        policy = {**self.settings.policy.to_dict(), "forced": self.settings.force_baseline}
        path, saved = self.store.save(
            self.profile.name, accepted, self.run_id, environment, policy=policy
        )
        return path, saved, refused

    def write_html(self, record: RunRecord, baseline_notice: str = "") -> Path:
        """Render the HTML report next to the run record, with the baseline run and history.

        ``baseline_notice``: what became of a baseline the run was asked to save.
        """
        from perfsuite.report.html import render
        from perfsuite.store import records

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
            baseline_notice=baseline_notice,
        )
        path = self.record_path().with_suffix(".html")
        write_text_atomic(path, html)
        return path


def finish(session: PerfSession, environment: Mapping[str, Any]) -> Finished:
    """Write the run record, then the baseline if asked, then the HTML and Markdown reports.

    Each step's failure is collected, never raised: a report must never lose the run record,
    and the record must never be lost to a baseline problem.
    """
    from perfsuite.errors import PerfsuiteError
    from perfsuite.report.markdown import render_markdown

    late = session.finalize()
    record = session.record(environment)
    done = Finished(record, late=late)
    try:
        done.record_path = session.write_record(record)
    except PerfsuiteError as exc:
        done.errors.append(f"run record not written: {exc}")
    else:  # the record first: the store's copy is a convenience, its failure a warning
        from perfsuite.store import append_run

        if warning := append_run(session.settings.report_dir, record):
            print(warning, file=sys.stderr)
    settings = session.settings
    # The baseline before the reports, so they say what became of it; its failure is
    # collected like theirs, and the record is already written.
    done.asked = settings.save_baseline
    if settings.save_baseline and session.not_saved():
        done.not_saved = session.not_saved()
    elif settings.save_baseline:
        try:
            done.baseline_path, done.saved, done.refused = session.save_baseline(environment)
        except PerfsuiteError as exc:
            done.errors.append(str(exc))
    notice = baseline_notice(done, session.results)
    if settings.html:
        try:
            done.html_path = session.write_html(record, notice)
        except Exception as exc:  # a report must never lose the run record or the verdicts
            done.errors.append(f"HTML report not written: {type(exc).__name__}: {exc}")
    if settings.markdown:
        try:
            with settings.markdown.open("a", encoding="utf-8") as fh:
                fh.write(render_markdown(record, done.html_path, notice))
        except OSError as exc:
            done.errors.append(
                f"{settings.markdown}: Markdown summary not written: {exc.strerror or exc}"
            )
    return done
