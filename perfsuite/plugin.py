"""The pytest plugin: options, the ``perf`` marker and fixture, and hook wiring only.

State lives in ``config.stash``; the :class:`~perfsuite.session.PerfSession` does the work.
Results travel from the test (possibly in an xdist worker) to the controlling process on
the test report's ``user_properties``, which pytest-xdist serialises, so every result
reaches the run record whichever process measured it.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Generator
from pathlib import Path
from typing import Any, cast

import pytest

# The checks register the run record's derived sections (roofline, fidelity, ...) when
# imported; the controller of an xdist run collects none, so the plugin imports them.
import perfsuite.checks  # noqa: F401
from perfsuite import late, options
from perfsuite.errors import PerfsuiteError, loud_skip
from perfsuite.fixture import RESULT_KEY, Perf
from perfsuite.judge import outcome, tolerances
from perfsuite.measure import allocator, environment, noise
from perfsuite.model import Crash, Result
from perfsuite.model.finished import Finished
from perfsuite.report.terminal import (
    baseline_lines,
    empty_line,
    progress_line,
    skip_warning_lines,
    summary_lines,
    verdict_lines,
)
from perfsuite.selection import beyond_mode, outside
from perfsuite.session import PerfSession, finish

SESSION_KEY = pytest.StashKey[PerfSession]()
FINISHED_KEY = pytest.StashKey[Finished]()
EMPTY_KEY = pytest.StashKey[int]()
WORKER_SOFTWARE_KEY = pytest.StashKey[dict[str, Any]]()
RESULT_PROPERTY = "perfsuite.result"
SELECTED_PROPERTY = "perfsuite.selected"
SELECTED_KEY = pytest.StashKey[list[str]]()
LATE_KEY = pytest.StashKey[dict[str, Result]]()
JUNIT_KEY = pytest.StashKey[Path | None]()
VARIABLES_KEY = pytest.StashKey[dict[str, str]]()
SKIP_WARNINGS_KEY = pytest.StashKey[Counter[str]]()
COLLECTED_KEY = pytest.StashKey[list[str]]()  # the perf checks this process collected
PROGRESS_KEY = pytest.StashKey[list[float]]()  # [started, last progress line] (monotonic)
DONE_TESTS_KEY = pytest.StashKey[set[str]]()  # node ids of the selected tests that have finished
# A progress line at most this often (seconds), on a terminal, unless -q.
PROGRESS_EVERY_S = 30.0
SKIPPED_KEY = pytest.StashKey[set[str]]()  # selected perf checks that skipped
# pytest-benchmark skips tests that do not request its fixture up front; perf checks request
# it lazily, when they measure, so that skip is taken off them again.
BENCHMARK_ONLY_SKIP = "Skipping non-benchmark (--benchmark-only active)."


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """Register perfsuite's hooks (see :mod:`perfsuite.hookspec`)."""
    from perfsuite import hookspec

    pluginmanager.add_hookspecs(hookspec)


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add perfsuite's options (see :mod:`perfsuite.options`)."""
    options.add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    """Register the markers and build the perf session; a bad option stops here."""
    config.addinivalue_line(
        "markers",
        "perf(tolerance=None, floor=None): a perfsuite check; tolerance overrides the "
        "regression tolerance and floor the fraction of peak required",
    )
    config.addinivalue_line(
        "markers",
        "perf_backend(name): the backend a check runs on, where its parameters do not say "
        "(for --perf-backend)",
    )
    config.addinivalue_line(
        "markers",
        "perf_full: a case that runs in full mode only (--perf-full; deselected otherwise)",
    )
    config.addinivalue_line(
        "markers",
        "perf_sweep: a case beyond its family's representative (deselected by --perf-quick)",
    )
    try:
        config.stash[SESSION_KEY] = PerfSession(options.settings_from_config(config))
    except (PerfsuiteError, ValueError) as exc:
        raise pytest.UsageError(str(exc)) from None
    allocator.pin(config.stash[SESSION_KEY].settings.malloc_threshold)
    config.stash[JUNIT_KEY] = late.junit_path(config)  # resolved now, as pytest resolves it
    # As the user set them, before a backend's import sets its defaults.
    config.stash[VARIABLES_KEY] = environment.performance_env()
    allocator.pool_frameworks()
    config.stash[WORKER_SOFTWARE_KEY] = {}
    config.stash[SELECTED_KEY] = []
    config.stash[SKIP_WARNINGS_KEY] = Counter()
    config.stash[COLLECTED_KEY] = []
    config.stash[PROGRESS_KEY] = [time.monotonic(), time.monotonic()]
    config.stash[DONE_TESTS_KEY] = set()
    config.stash[SKIPPED_KEY] = set()
    if not _is_worker(config):
        # The noise guard counts this process tree (xdist workers included) as its own.
        os.environ[noise.SESSION_PID_ENV] = str(os.getpid())
        config.pluginmanager.register(ResultCollector(config), "perfsuite-collector")
        if config.pluginmanager.hasplugin("xdist"):
            config.pluginmanager.register(XdistHooks(config), "perfsuite-xdist")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Hide pytest-benchmark's own table unless asked (every plugin is configured by now).

    ``--benchmark-compare`` asks for it: that comparison is only shown in the table.
    """
    config = session.config
    benchmark_session = getattr(config, "_benchmarksession", None)
    if benchmark_session is None or config.stash[SESSION_KEY].settings.benchmark_table:
        return
    if not getattr(benchmark_session, "compare", None):
        benchmark_session.quiet = True


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The backend and mode selection; --benchmark-only still runs perf checks."""
    other_backends = outside(items, config.stash[SESSION_KEY].settings.backends)
    if other_backends:
        config.hook.pytest_deselected(items=other_backends)
        dropped = {id(item) for item in other_backends}
        items[:] = [item for item in items if id(item) not in dropped]
    settings = config.stash[SESSION_KEY].settings
    deselected = beyond_mode(items, settings.quick, settings.full)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        dropped = {id(item) for item in deselected}
        items[:] = [item for item in items if id(item) not in dropped]
    for item in items:
        if _is_perf(item):
            # They are benchmarks: they request pytest-benchmark's fixture when they measure.
            item.own_markers = [
                m
                for m in item.own_markers
                if not (m.name == "skip" and m.kwargs.get("reason") == BENCHMARK_ONLY_SKIP)
            ]


def _is_perf(item: pytest.Item) -> bool:
    return "perf" in getattr(item, "fixturenames", ())


def pytest_collection_finish(session: pytest.Session) -> None:
    """After every deselection: resolve profile and baseline, and size the family."""
    items = [i for i in session.items if _is_perf(i)]
    if items:
        perf_session = session.config.stash[SESSION_KEY]
        try:
            for item in items:
                marker = item.get_closest_marker("perf")
                tolerances.marker_tolerance(item.nodeid, marker and marker.kwargs.get("tolerance"))
            perf_session.prepare()
            perf_session.check_outputs([session.config.stash[JUNIT_KEY]])
        except PerfsuiteError as exc:
            raise pytest.UsageError(str(exc)) from None
        perf_session.set_family([i.nodeid for i in items])
        session.config.stash[COLLECTED_KEY] = [i.nodeid for i in items]
        session.config.stash[PROGRESS_KEY] = [time.monotonic(), time.monotonic()]


@pytest.fixture
def perf(request: pytest.FixtureRequest) -> Perf:
    """Measure a workload with perfsuite's core and judge it against profile and baseline."""
    return Perf(request, request.config.stash[SESSION_KEY])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Attach the judged result to the call-phase report."""
    report = yield
    if call.when == "setup" and _is_perf(item):
        report.user_properties.append((SELECTED_PROPERTY, item.nodeid))
    if call.when == "call" and RESULT_KEY in item.stash:
        # An xdist worker's report crosses to the controller as JSON-ready data; in one
        # process the result itself travels, with no round trip.
        result = item.stash[RESULT_KEY]
        payload = result.to_dict() if _is_worker(item.config) else result
        report.user_properties.append((RESULT_PROPERTY, payload))
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Controller: write record, reports and baseline; workers: report what they loaded."""
    config = session.config
    if _is_worker(config):
        config.workeroutput["perfsuite_software"] = environment.software()  # type: ignore[attr-defined]
        return
    perf_session = config.stash[SESSION_KEY]
    perf_session.incomplete = _incomplete(session, exitstatus)
    selected = config.stash[SELECTED_KEY]
    if not (perf_session.results or perf_session.crashed or perf_session.incomplete):
        if selected and not perf_session.settings.allow_empty:
            config.stash[EMPTY_KEY] = len(selected)
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
        return
    if not (perf_session.results or perf_session.crashed or selected):
        return  # interrupted before any perf check started: nothing to record
    perf_session.seam = seam_plugins(config)
    env: dict[str, Any] = environment.fingerprint(config.stash[VARIABLES_KEY])
    from_workers: dict[str, Any] = config.stash[WORKER_SOFTWARE_KEY]
    env["software"] = environment.merge_software(env["software"], from_workers)
    done = config.stash[FINISHED_KEY] = finish(perf_session, env)
    final = {r.id: r for r in perf_session.results}
    changed = config.stash[LATE_KEY] = {i: final[i] for i in done.late}
    moved = late.amend_reports(config, changed, perf_session.settings.fail_on)
    failing = outcome.failing(perf_session.results, perf_session.settings.fail_on)
    fails = bool(done.errors or failing or perf_session.crashed or done.save_failed)
    late.amend_session(session, moved, fails)
    if session.exitstatus == pytest.ExitCode.OK and session_verdict(config).state == "inconclusive":
        session.exitstatus = outcome.EXIT_INCONCLUSIVE  # undecided is not a pass


def pytest_unconfigure(config: pytest.Config) -> None:
    """Bring the JUnit XML file (written at session finish) in line with late outcomes."""
    xmlpath = config.stash.get(JUNIT_KEY, None)
    changed: dict[str, Result] = config.stash.get(LATE_KEY, {})
    if xmlpath is not None and changed:
        late.amend_junit(
            xmlpath,
            changed,
            config.stash[SESSION_KEY].settings.fail_on,
            getattr(config.option, "junitprefix", None),
        )
    if xmlpath is not None and FINISHED_KEY in config.stash:
        late.state_junit(xmlpath, session_verdict(config))


def session_verdict(config: pytest.Config) -> outcome.SessionVerdict:
    """The session's one verdict, as every view states it."""
    perf_session = config.stash[SESSION_KEY]
    return outcome.session_verdict(
        perf_session.results,
        perf_session.settings.fail_on,
        crashed=perf_session.crashed,
        incomplete=perf_session.incomplete,
    )


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """The perfsuite section: the checks, the notes, and where everything went."""
    if _is_worker(config) or FINISHED_KEY not in config.stash:
        return
    terminalreporter.section("perfsuite")
    perf_session = config.stash[SESSION_KEY]
    for line, markup in summary_lines(
        perf_session.profile,
        perf_session.seam,
        config.stash[FINISHED_KEY],
        save_baseline=perf_session.settings.save_baseline,
    ):
        terminalreporter.write_line(line, **markup)


def seam_plugins(config: pytest.Config) -> list[str]:
    """The plugins that replace the machine's readings or the measurements (the seam)."""
    hook = config.hook
    callers = (
        hook.pytest_perfsuite_noise_snapshot,
        hook.pytest_perfsuite_machine_reading,
        hook.pytest_perfsuite_measured,
        hook.pytest_perfsuite_policy,
    )
    return sorted({impl.plugin_name for caller in callers for impl in caller.get_hookimpls()})


def _incomplete(session: pytest.Session, exitstatus: int) -> str:
    """Why the run did not run every selected perf check, or "" when it did."""
    config = session.config
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        return "interrupted before every selected check ran"
    collected = config.stash[COLLECTED_KEY]
    perf_session = config.stash[SESSION_KEY]
    if collected:  # this process collected the checks (no xdist): name what never ran
        skipped: set[str] = config.stash[SKIPPED_KEY]
        accounted = {r.id for r in perf_session.results} | {c.id for c in perf_session.crashed}
        accounted |= skipped
        missing = [i for i in collected if i not in accounted]
        if missing:
            return f"the run stopped before {len(missing)} selected check(s) ran"
    elif session.shouldfail or session.shouldstop:  # an xdist controller: only that is known
        return f"the run stopped early ({session.shouldfail or session.shouldstop})"
    return ""


def crash_of(
    report: pytest.TestReport, results: list[Result], fail_on: frozenset[str]
) -> Crash | None:
    """The crash a failed report of a selected perf check shows, or None.

    A check that failed for its judged outcome (a floor, a regression) did not crash; one
    that failed in any other way (an exception, a timeout, a failing assertion after it
    measured, a worker that died) produced no verdict that explains the failure.
    """
    if report.when == "call" and any(r.outcome in fail_on for r in results):
        return None
    lines = [line for line in report.longreprtext.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("E ")]
    message = (errors or lines or ["failed"])[0].removeprefix("E ").strip()
    return Crash(report.nodeid, report.when or "call", message[:300])


def _verdict(terminalreporter: Any, config: pytest.Config) -> None:
    """The session's verdict lines, the last thing before pytest's own counts."""
    warnings = skip_warning_lines(config.stash[SKIP_WARNINGS_KEY])
    if not (warnings or EMPTY_KEY in config.stash or FINISHED_KEY in config.stash):
        return
    terminalreporter.write_sep("-", "perfsuite verdict")
    for line, markup in warnings:
        terminalreporter.write_line(line, **markup)
    if EMPTY_KEY in config.stash:
        terminalreporter.write_line(empty_line(config.stash[EMPTY_KEY]), red=True, bold=True)
    elif FINISHED_KEY in config.stash:
        perf_session = config.stash[SESSION_KEY]
        for line, markup in verdict_lines(
            perf_session.results,
            perf_session.settings.fail_on,
            crashed=perf_session.crashed,
            incomplete=perf_session.incomplete,
        ):  # the same rule as session_verdict(config)
            terminalreporter.write_line(line, **markup)
        for line, markup in baseline_lines(config.stash[FINISHED_KEY], perf_session.results):
            terminalreporter.write_line(line, **markup)


class ResultCollector:
    """Controller side: takes results off call reports, whichever process measured them."""

    def __init__(self, config: pytest.Config) -> None:
        """Bind to the controlling config."""
        self._config = config

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Move the full result into the session; JUnit XML keeps the compact properties."""
        selected = [v for name, v in report.user_properties if name == SELECTED_PROPERTY]
        if selected:
            self._config.stash[SELECTED_KEY].extend(str(v) for v in selected)
            report.user_properties = [
                p for p in report.user_properties if p[0] != SELECTED_PROPERTY
            ]
        if report.skipped and report.nodeid in self._config.stash[SELECTED_KEY]:
            self._config.stash[SKIPPED_KEY].add(report.nodeid)
        if report.skipped and isinstance(report.longrepr, tuple):
            warning = loud_skip(str(report.longrepr[2]))
            if warning:
                self._config.stash[SKIP_WARNINGS_KEY][warning] += 1
        perf_session = self._config.stash[SESSION_KEY]
        payload = [value for name, value in report.user_properties if name == RESULT_PROPERTY]
        results = [
            data if isinstance(data, Result) else Result.from_dict(cast("dict[str, Any]", data))
            for data in payload
        ]
        if report.when == "call" and payload:
            report.user_properties = [p for p in report.user_properties if p[0] != RESULT_PROPERTY]
            for result in results:
                perf_session.add(result)
        if report.failed and report.nodeid in self._config.stash[SELECTED_KEY]:
            crash = crash_of(report, results, perf_session.settings.fail_on)
            if crash is not None:
                perf_session.add_crash(crash)

    @pytest.hookimpl
    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        """Tests done of total (pytest's items), time so far and to go, now and then."""
        config = self._config
        collected = config.stash[COLLECTED_KEY]
        total = len(collected)
        if nodeid in collected:
            config.stash[DONE_TESTS_KEY].add(nodeid)
        started, last = config.stash[PROGRESS_KEY]
        now = time.monotonic()
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if not total or reporter is None or config.get_verbosity() < 0:
            return
        if now - last < PROGRESS_EVERY_S or not reporter.isatty():
            return
        config.stash[PROGRESS_KEY][1] = now
        done = len(config.stash[DONE_TESTS_KEY])
        reporter.write_line(progress_line(done, total, now - started), cyan=True)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> Generator[None, None, None]:
        """The verdict lines, after pytest's short test summary (``-r``)."""
        try:
            return (yield)
        finally:
            _verdict(terminalreporter, self._config)


class XdistHooks:
    """Hooks that exist only when pytest-xdist is installed."""

    def __init__(self, config: pytest.Config) -> None:
        """Bind to the controlling config."""
        self._config = config

    @pytest.hookimpl
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """Merge what a worker loaded (e.g. TensorFlow) into the environment fingerprint."""
        software = getattr(node, "workeroutput", {}).get("perfsuite_software")
        if software:
            merged = environment.merge_software(self._config.stash[WORKER_SOFTWARE_KEY], software)
            self._config.stash[WORKER_SOFTWARE_KEY] = merged
