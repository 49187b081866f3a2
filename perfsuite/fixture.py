"""The ``perf`` fixture: what a check sees of perfsuite.

A check hands it a workload; the fixture plans the samples, measures through the workload's
sample source (or the in-process clock via pytest-benchmark), judges the result and turns its
outcome into the test's: a failing outcome fails the test, a waived regression is an
expected failure.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import pytest

from perfsuite.backends import Target, skip_reason
from perfsuite.errors import PerfsuiteError, first_line
from perfsuite.hardware.profile import HardwareProfile
from perfsuite.judge import stats
from perfsuite.measure import noise, probe
from perfsuite.measure.loop import BenchmarkClock, Measurement, Workload, measure
from perfsuite.model import MachineReading, Result
from perfsuite.report.headline import failure_text, floor_label
from perfsuite.session import PerfSession
from perfsuite.settings import Settings

RESULT_KEY = pytest.StashKey[Result]()
_PACKAGE = Path(__file__).resolve().parent
# Framework out-of-memory errors, matched by name so no framework has to be imported.
OOM_ERRORS = frozenset({"ResourceExhaustedError", "OutOfMemoryError"})


_T = TypeVar("_T")


def _hooked(answer: _T | None, default: _T, name: str) -> _T:
    """A ``pytest_perfsuite_<name>`` hook's answer, or ``default`` when it left it alone."""
    if answer is None:
        return default
    if not isinstance(answer, type(default)):
        raise TypeError(f"pytest_perfsuite_{name} returned {type(answer).__name__}")
    return answer


class Perf:
    """The ``perf`` fixture object."""

    def __init__(self, request: pytest.FixtureRequest, session: PerfSession) -> None:
        """Bind to one test item."""
        self._request = request
        self._item = request.node
        self._session = session

    @property
    def profile(self) -> HardwareProfile:
        """The hardware profile of this run."""
        return self._session.profile

    @property
    def settings(self) -> Settings:
        """The session's settings (launcher, rank counts, mode, ...)."""
        return self._session.settings

    @contextlib.contextmanager
    def uncaptured(self) -> Iterator[None]:
        """Let a progress bar reach the terminal: pytest's output capture is off inside."""
        capman = self._request.config.pluginmanager.getplugin("capturemanager")
        if capman is None:
            yield
            return
        with capman.global_and_fixture_disabled():
            yield

    @contextlib.contextmanager
    def _bar(self, samples: int, expected_s: float) -> Iterator[Callable[[], None]]:
        """A progress bar over a long measurement's samples, on the terminal (a TTY only)."""
        from tqdm import tqdm

        label = f"perfsuite: {self._item.name} ({samples} samples, ~{expected_s:.0f} s)"
        with (
            self.uncaptured(),
            tqdm(
                total=samples, desc=label, unit="sample", leave=False, disable=None, mininterval=0.5
            ) as bar,
        ):
            yield lambda: bar.update()

    def artifact(self, name: str) -> Path:
        """A path for a file that belongs with this run's record (a trace, say).

        Such files live in ``artifacts/`` beside the records, so that nothing but run
        records sits in the profile's folder.
        """
        session = self._session
        folder = session.settings.report_dir / session.profile.name / "artifacts"
        return folder / f"{session.run_id}-{name}"

    @property
    def quick(self) -> bool:
        """Whether the session runs in quick mode."""
        return self._session.settings.quick

    def require(self, target: Target, operation: str = "stream", precision: str = "fp32") -> None:
        """Skip the test, with the reason, when backend, device or precision is not available."""
        try:
            reason = skip_reason(target, operation, precision)
        except PerfsuiteError as exc:  # the device is there but the framework cannot use it
            _fail(str(exc))
        if reason:
            pytest.skip(reason)

    def measure(self, workload: Workload | Callable[[], Workload]) -> Result:
        """Measure, judge and record a workload; fail the test on a failing outcome.

        ``workload`` may be a factory: building it (allocating its buffers) then happens
        under the out-of-memory guard, so an OOM fails this check with a clear message and
        the session goes on.
        """
        if RESULT_KEY in self._item.stash:
            raise RuntimeError("perf.measure() can be called once per test")
        try:
            seen: list[str] = []
            started = time.perf_counter()
            with framework_warnings(seen):
                built = workload() if callable(workload) else workload
            return self._measure(built, seen, build_s=time.perf_counter() - started)
        except PerfsuiteError as exc:
            message = str(exc)  # a launcher, a child or a setting the user can fix
        except Exception as exc:
            if not (isinstance(exc, MemoryError) or type(exc).__name__ in OOM_ERRORS):
                raise
            message = f"out of memory: {type(exc).__name__}: {first_line(exc)}"
        # Outside the except block, so the report is the one line, not a chained traceback.
        _fail(message)

    def _noise_snapshot(self) -> noise.Snapshot:
        """What the machine is doing now (a ``pytest_perfsuite_noise_snapshot`` hook may say)."""
        hook = self._request.config.hook
        reading: noise.Snapshot | None = hook.pytest_perfsuite_noise_snapshot(with_gpus=True)
        return reading if reading is not None else noise.snapshot()

    def _machine_reading(self) -> dict[str, Any]:
        """The machine probe now (a ``pytest_perfsuite_machine_reading`` hook may say)."""
        reading: dict[str, Any] | None = (
            self._request.config.hook.pytest_perfsuite_machine_reading()
        )
        return reading if reading is not None else probe.host_probe().measure()

    def _measure(self, workload: Workload, seen: list[str], build_s: float = 0.0) -> Result:
        marker = self._item.get_closest_marker("perf")
        kwargs = marker.kwargs if marker else {}
        judge = self._session.judge
        hook = self._request.config.hook
        policy = self._session.settings.policy
        policy = _hooked(hook.pytest_perfsuite_policy(policy=policy), policy, "policy")
        plan = judge.plan(self._item.nodeid, workload, kwargs.get("tolerance"), policy)
        # Requested only now, so a check that fails before measuring leaves it unused; and
        # only for the in-process clock (child ranks and device events time themselves).
        benchmark = None if workload.source else self._request.getfixturevalue("benchmark")
        clock = BenchmarkClock(benchmark) if benchmark is not None else None
        clock_at = [time.perf_counter()]

        def lap() -> float:  # seconds since the last lap
            now = time.perf_counter()
            spent, clock_at[0] = now - clock_at[0], now
            return spent

        machine = self._machine_reading() if policy.machine_probe else None
        probe_s = lap()
        before = self._noise_snapshot()
        noise_s = lap()
        between = hook.pytest_perfsuite_between_samples(nodeid=self._item.nodeid)
        with framework_warnings(seen):
            measurement = measure(
                workload, policy, clock, plan.rounds, progress=self._bar, between=between
            )
        measure_s = lap()
        replaced = hook.pytest_perfsuite_measured(workload=workload, measurement=measurement)
        measurement = _hooked(replaced, measurement, "measured")
        guards = self._noise_guards(before, workload, measurement)
        noise_s += lap()
        reading = None
        if machine is not None:
            reading = MachineReading.read(probe.combine(machine, self._machine_reading()))
        probe_s += lap()
        phases = _phases(workload, measurement, build_s, probe_s, noise_s, measure_s)
        result = judge.judge(
            self._item.nodeid,
            workload,
            measurement,
            plan,
            floor_fraction=kwargs.get("floor"),
            noise=guards,
            machine=reading,
            policy=policy,
            framework_warnings=seen,
        )
        result = self._session.explained(result)
        phases["judge"] = lap()
        result = dataclasses.replace(result, phases={k: round(v, 4) for k, v in phases.items()})
        self._publish(result, benchmark)
        if result.outcome in self._session.settings.fail_on:
            _fail(failure_text(result))
        if result.outcome == "waived":
            pytest.xfail(result.message)
        return result

    def _noise_guards(
        self, before: noise.Snapshot, workload: Workload, measurement: Measurement
    ) -> dict[str, Any]:
        """The noise facts of the measurement: the machine's load across it, the device's signs."""
        guards = noise.assess(
            before, self._noise_snapshot(), _outside_tree_cpu(workload, measurement)
        )
        return noise.on_device(
            guards,
            str(workload.params.get("device", "cpu")),
            measurement.overhead_fraction,
            measurement.median_call_seconds,
            graph=measurement.launch == "graph",
            host_memory=workload.host_memory,
        )

    def _publish(self, result: Result, benchmark: Any) -> None:
        """Put the result where pytest and pytest-benchmark (when it timed) report it from."""
        self._item.stash[RESULT_KEY] = result
        best = stats.best(result.samples, result.higher_is_better)
        # On the item, so every report of the test carries them (JUnit XML reads teardown's).
        self._item.user_properties.extend(
            [
                ("perf_metric", result.metric),
                ("perf_value", best),
                ("perf_unit", result.unit),
                ("perf_floor", floor_label(result)),
                ("perf_baseline", result.baseline.verdict),
                ("perf_outcome", result.outcome),
            ]
        )
        if benchmark is not None:
            benchmark.extra_info.update(
                {
                    "perfsuite_metric": result.metric,
                    "perfsuite_unit": result.unit,
                    "perfsuite_best": best,
                    "perfsuite_median": result.summary.median,
                    "perfsuite_work": {"amount": result.work.amount, "unit": result.work.unit},
                    "perfsuite_outcome": result.outcome,
                }
            )


@contextlib.contextmanager
def framework_warnings(into: list[str]) -> Iterator[None]:
    """Record the warnings a check's framework raises while it builds and runs its workload.

    They go into the run record (``framework_warnings``) and are never raised, whatever the
    warning filters say: advice a new library version prints (Inductor's about TF32, say)
    must not turn a nightly check into an error.  Each is kept once per place it is raised
    from (the ``default`` action), so a warning raised by every timed call costs nothing after
    its first.  perfsuite's own warnings are raised again afterwards, under the caller's filters.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        try:
            yield
        finally:
            own = []
            for w in caught:
                if Path(w.filename).resolve().is_relative_to(_PACKAGE):
                    own.append(w)
                    continue
                text = f"{w.category.__name__}: {first_line(w.message)}"[:300]
                if text not in into:
                    into.append(text)
    for w in own:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)


def _phases(
    workload: Workload,
    measurement: Measurement,
    build_s: float,
    probe_s: float,
    noise_s: float,
    measure_s: float,
) -> dict[str, float]:
    """Where a check's time went, in seconds, by phase (see lab/phases.py)."""
    # a ratio's samples are no durations: its ranks' time is all in the measurement
    samples_s = 0.0 if workload.ratio else sum(measurement.seconds)
    return {
        "build": build_s,
        "probe": probe_s,
        "noise": noise_s,
        "warmup": measurement.warmup_s,
        "samples": samples_s,
        # between samples, while the other side of ``perfsuite ab`` had the machine
        "waiting": measurement.waited_s,
        # the bare reference's samples, calibration and the loop's own overhead
        "reference_and_overhead": max(
            0.0, measure_s - measurement.warmup_s - samples_s - measurement.waited_s
        ),
    }


def _outside_tree_cpu(workload: Workload, measurement: Measurement) -> float:
    """CPU seconds the check's ranks reported, when a scheduler started them outside the tree."""
    if not workload.ranks_outside_tree:
        return 0.0
    facts = measurement.source.get("facts") or []
    return float(sum(f.get("rank_cpu_seconds", 0.0) for f in facts if isinstance(f, dict)))


def _fail(message: str) -> NoReturn:
    pytest.fail(message, pytrace=False)
