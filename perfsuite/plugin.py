"""The pytest plugin: options, the ``perf`` marker and fixture, and hook wiring.

State lives in ``config.stash``; the :class:`~perfsuite.session.PerfSession` does the work.
Results travel from the test (possibly in an xdist worker) to the controlling process on
the test report's ``user_properties``, which pytest-xdist serialises, so every result
reaches the run record whichever process measured it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any, cast

import pytest

from perfsuite import environment, noise, stats
from perfsuite.errors import PerfsuiteError
from perfsuite.hardware.profile import HardwareProfile
from perfsuite.measure import BenchmarkRunner, Workload, measure
from perfsuite.model import Result
from perfsuite.report.markdown import render_markdown
from perfsuite.report.terminal import format_result_lines
from perfsuite.session import DEFAULT_TOLERANCE, PerfSession, Settings
from perfsuite.workloads.backend import Target, skip_reason

SESSION_KEY = pytest.StashKey[PerfSession]()
RESULT_KEY = pytest.StashKey[Result]()
RECORD_KEY = pytest.StashKey[Path]()
HTML_KEY = pytest.StashKey[Path]()
ERRORS_KEY = pytest.StashKey[list[str]]()
WORKER_SOFTWARE_KEY = pytest.StashKey[dict[str, Any]]()
RESULT_PROPERTY = "perfsuite.result"
# Framework out-of-memory errors, matched by name so no framework has to be imported.
OOM_ERRORS = frozenset({"ResourceExhaustedError", "OutOfMemoryError"})

_OPTIONS: list[tuple[str, str, dict[str, Any], str, Any]] = [
    # (flag, ini key, argparse kwargs, ini type, default)
    (
        "--hw",
        "perf_hw",
        {"metavar": "NAME|auto", "help": "hardware profile to judge against (default: auto)"},
        "string",
        "auto",
    ),
    (
        "--perf-baseline-dir",
        "perf_baseline_dir",
        {
            "metavar": "DIR",
            "help": "baselines directory, one folder per profile (default: baselines)",
        },
        "string",
        "baselines",
    ),
    (
        "--perf-save-baseline",
        "perf_save_baseline",
        {"action": "store_const", "const": True, "help": "accept this run as the baseline"},
        "bool",
        False,
    ),
    (
        "--perf-quick",
        "perf_quick",
        {"action": "store_const", "const": True, "help": "quick mode: fewer repetitions"},
        "bool",
        False,
    ),
    (
        "--perf-tolerance",
        "perf_tolerance",
        {
            "metavar": "FRACTION",
            "help": f"default regression tolerance (default: {DEFAULT_TOLERANCE})",
        },
        "string",
        str(DEFAULT_TOLERANCE),
    ),
    (
        "--perf-alpha",
        "perf_alpha",
        {
            "metavar": "ALPHA",
            "help": "family-wise significance level of a run's regression tests (default: 0.05)",
        },
        "string",
        "0.05",
    ),
    (
        "--perf-report-dir",
        "perf_report_dir",
        {"metavar": "DIR", "help": "where run records go, per profile (default: reports)"},
        "string",
        "reports",
    ),
    (
        "--perf-markdown",
        "perf_markdown",
        {
            "metavar": "FILE",
            "help": "append a Markdown summary to FILE (e.g. $GITHUB_STEP_SUMMARY)",
        },
        "string",
        "",
    ),
    (
        "--perf-html",
        "perf_html",
        {
            "metavar": "yes|no",
            "help": "write the HTML report next to the run record (default: yes)",
        },
        "string",
        "yes",
    ),
    (
        "--perf-profile-dir",
        "perf_profile_dir",
        {"metavar": "DIR", "help": "extra directory of hardware profile TOML files"},
        "string",
        "",
    ),
]


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add perfsuite's options, each also settable as an ini key."""
    group = parser.getgroup("perfsuite", "perfsuite performance checks")
    for flag, ini, kwargs, ini_type, default in _OPTIONS:
        group.addoption(flag, dest=ini, default=None, **kwargs)
        parser.addini(ini, kwargs["help"], type=ini_type, default=default)  # type: ignore[arg-type]


def _option(config: pytest.Config, ini: str) -> Any:
    value = config.getoption(ini)
    return config.getini(ini) if value is None else value


def _path(config: pytest.Config, ini: str) -> Path:
    path = Path(_option(config, ini))
    return path if path.is_absolute() else config.rootpath / path


def settings_from_config(config: pytest.Config) -> Settings:
    """Translate options and ini keys into :class:`Settings`; bad values are usage errors."""
    raw_tolerance = _option(config, "perf_tolerance")
    raw_alpha = _option(config, "perf_alpha")
    try:
        alpha = float(raw_alpha)
        if not 0 < alpha < 1:
            raise ValueError(alpha)
    except ValueError:
        raise pytest.UsageError(
            f"--perf-alpha: expected a significance level between 0 and 1, got {raw_alpha!r}"
        ) from None
    raw_html = str(_option(config, "perf_html")).strip().lower()
    if raw_html not in ("yes", "no"):
        raise pytest.UsageError(f"--perf-html: expected yes or no, got {raw_html!r}")
    markdown = _option(config, "perf_markdown")
    try:
        tolerance = float(raw_tolerance)
        profile_dir = _option(config, "perf_profile_dir")
        return Settings(
            hw=_option(config, "perf_hw").strip() or "auto",
            baseline_dir=_path(config, "perf_baseline_dir"),
            report_dir=_path(config, "perf_report_dir"),
            profile_dirs=(_path(config, "perf_profile_dir"),) if profile_dir else (),
            save_baseline=bool(_option(config, "perf_save_baseline")),
            quick=bool(_option(config, "perf_quick")),
            tolerance=tolerance,
            alpha=alpha,
            html=raw_html == "yes",
            markdown=Path(markdown) if markdown else None,
        )
    except ValueError:
        raise pytest.UsageError(
            "--perf-tolerance: expected a fraction between 0 and 1 (e.g. 0.05), "
            f"got {raw_tolerance!r}"
        ) from None


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker and build the perf session; a bad ``--hw`` stops here."""
    config.addinivalue_line(
        "markers",
        "perf(tolerance=None, floor=None): a perfsuite check; tolerance overrides the "
        "regression tolerance and floor the fraction of peak required",
    )
    try:
        config.stash[SESSION_KEY] = PerfSession(settings_from_config(config))
    except PerfsuiteError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.addinivalue_line(
        "markers", "perf_full: a case that runs in full mode only (deselected by --perf-quick)"
    )
    config.stash[ERRORS_KEY] = []
    config.stash[WORKER_SOFTWARE_KEY] = {}
    if not _is_worker(config):
        config.pluginmanager.register(ResultCollector(config), "perfsuite-collector")
        if config.pluginmanager.hasplugin("xdist"):
            config.pluginmanager.register(XdistHooks(config), "perfsuite-xdist")


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """When perf checks were collected, resolve profile and baseline before any runs."""
    if config.stash[SESSION_KEY].settings.quick:
        deselected = [item for item in items if item.get_closest_marker("perf_full")]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            items[:] = [item for item in items if not item.get_closest_marker("perf_full")]
    perf_items = [item.nodeid for item in items if "perf" in getattr(item, "fixturenames", ())]
    if perf_items:
        perf_session = config.stash[SESSION_KEY]
        try:
            perf_session.prepare()
        except PerfsuiteError as exc:
            raise pytest.UsageError(str(exc)) from None
        perf_session.set_family(perf_items)


class Perf:
    """The ``perf`` fixture: what a check sees of perfsuite."""

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
    def quick(self) -> bool:
        """Whether the session runs in quick mode."""
        return self._session.settings.quick

    def require(self, target: Target, operation: str = "stream", precision: str = "fp32") -> None:
        """Skip the test, with the reason, when backend, device or precision is not available."""
        reason = skip_reason(target, operation, precision)
        if reason:
            pytest.skip(reason)

    def measure(self, workload: Workload | Callable[[], Workload]) -> Result:
        """Measure, judge and record a workload; fail the test on a floor miss or regression.

        ``workload`` may be a factory: building it (allocating its buffers) then happens
        under the out-of-memory guard, so an OOM fails this check with a clear message and
        the session goes on.
        """
        if RESULT_KEY in self._item.stash:
            raise RuntimeError("perf.measure() can be called once per test")
        try:
            return self._measure(workload() if callable(workload) else workload)
        except Exception as exc:
            if not (isinstance(exc, MemoryError) or type(exc).__name__ in OOM_ERRORS):
                raise
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            message = f"out of memory: {type(exc).__name__}: {first}"
        # Outside the except block, so the report is the one line, not a chained traceback.
        pytest.fail(message, pytrace=False)

    def _measure(self, workload: Workload) -> Result:
        marker = self._item.get_closest_marker("perf")
        kwargs = marker.kwargs if marker else {}
        # Requested only now, so a check that fails before measuring leaves it unused.
        benchmark = self._request.getfixturevalue("benchmark")
        before = noise.snapshot()
        measurement = measure(workload, self._session.settings.policy, BenchmarkRunner(benchmark))
        guards = noise.assess(before, noise.snapshot())
        result = self._session.judge(
            self._item.nodeid,
            workload,
            measurement,
            floor_fraction=kwargs.get("floor"),
            tolerance=kwargs.get("tolerance"),
            noise=guards,
        )
        self._item.stash[RESULT_KEY] = result
        best = stats.best(result.samples, result.higher_is_better)
        # On the item, so every report of the test carries them (JUnit XML reads teardown's).
        self._item.user_properties.extend(
            [
                ("perf_metric", result.metric),
                ("perf_value", best),
                ("perf_unit", result.unit),
                ("perf_floor", result.floor.verdict),
                ("perf_baseline", result.baseline.verdict),
            ]
        )
        benchmark.extra_info.update(
            {
                "perfsuite_metric": result.metric,
                "perfsuite_unit": result.unit,
                "perfsuite_best": best,
                "perfsuite_median": result.summary.median,
                "perfsuite_work": {"amount": result.work.amount, "unit": result.work.unit},
            }
        )
        problems = [f"{e.name}: {e.detail}" for e in workload.expectations if not e.passed]
        floor = result.floor
        if floor.verdict == "fail" and floor.estimated:
            pass  # an estimated peak is shown, never enforced (see README)
        elif floor.verdict == "fail":
            problems.append(
                f"floor: best {floor.value:.4g} {result.unit} is below {floor.threshold:.4g} "
                f"{result.unit} ({floor.fraction:.0%} of {self.profile.name} {floor.figure} "
                f"= {floor.peak:.4g}); reached {floor.fraction_of_peak:.1%} of peak"
            )
        base = result.baseline
        regression = ""
        if base.verdict == "regressed":
            regression = (
                f"regression: median {result.summary.median:.4g} {result.unit} against baseline "
                f"{base.baseline_median:.4g} {result.unit} (ratio {base.ratio:.3f}, "
                f"{base.confidence:.0%} CI [{base.ci_low:.3f}, {base.ci_high:.3f}], "
                f"p={base.p_value:.2g}, tolerance {base.tolerance:.0%}, "
                f"baseline run {base.baseline_run_id})"
            )
        waiver = result.waiver or {}
        if regression and waiver.get("status") != "applied":
            problems.append(regression)
        if problems:
            pytest.fail("; ".join(problems), pytrace=False)
        if regression:
            pytest.xfail(f"waived: {waiver['reason']} ({regression})")
        return result


@pytest.fixture
def perf(request: pytest.FixtureRequest) -> Perf:
    """Measure a workload with perfsuite's core and judge it against profile and baseline."""
    return Perf(request, request.config.stash[SESSION_KEY])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Attach the result, with the test's outcome, to the call-phase report."""
    report = yield
    if call.when == "call" and RESULT_KEY in item.stash:
        message = str(report.longrepr) if report.failed and report.longrepr else ""
        outcome = "xfailed" if hasattr(report, "wasxfail") else report.outcome
        result = item.stash[RESULT_KEY].with_outcome(
            outcome, message or getattr(report, "wasxfail", "")
        )
        report.user_properties.append((RESULT_PROPERTY, result.to_dict()))
    return report


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Controller: write the run record, then the baseline if asked; workers: report facts."""
    config = session.config
    perf_session = config.stash[SESSION_KEY]
    if _is_worker(config):
        config.workeroutput["perfsuite_software"] = environment.software()  # type: ignore[attr-defined]
        return
    if not perf_session.results:
        return
    errors = config.stash[ERRORS_KEY]
    env: dict[str, Any] = environment.fingerprint()
    from_workers: dict[str, Any] = config.stash[WORKER_SOFTWARE_KEY]
    env["software"] = environment.merge_software(env["software"], from_workers)
    record = perf_session.record(env)
    try:
        config.stash[RECORD_KEY] = perf_session.write_record(record)
    except PerfsuiteError as exc:
        errors.append(f"run record not written: {exc}")
    html_path = None
    settings = perf_session.settings
    if settings.html:
        try:
            html_path = config.stash[HTML_KEY] = perf_session.write_html(record)
        except Exception as exc:  # a report must never lose the run record or the verdicts
            errors.append(f"HTML report not written: {type(exc).__name__}: {exc}")
    if settings.markdown:
        try:
            with settings.markdown.open("a", encoding="utf-8") as fh:
                fh.write(render_markdown(record, html_path))
        except OSError as exc:
            errors.append(
                f"{settings.markdown}: Markdown summary not written: {exc.strerror or exc}"
            )
    if settings.save_baseline:
        try:
            perf_session.save_baseline(env)
        except PerfsuiteError as exc:
            errors.append(str(exc))
    if errors and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """One line per check, then where the run record went."""
    if _is_worker(config):
        return
    perf_session = config.stash[SESSION_KEY]
    errors = config.stash[ERRORS_KEY]
    if not perf_session.results and not errors:
        return
    terminalreporter.section("perfsuite")
    if perf_session.results:
        for line in format_result_lines(perf_session.profile, perf_session.results):
            terminalreporter.write_line(line)
    if RECORD_KEY in config.stash:
        terminalreporter.write_line(f"run record: {config.stash[RECORD_KEY]}")
    if HTML_KEY in config.stash:
        terminalreporter.write_line(f"HTML report: {config.stash[HTML_KEY]}")
    if perf_session.settings.save_baseline and not errors:
        path = perf_session.settings.baseline_dir / perf_session.profile.name
        terminalreporter.write_line(f"baseline saved: {path}")
    for error in errors:
        terminalreporter.write_line(f"ERROR: {error}", red=True, bold=True)


class ResultCollector:
    """Controller side: takes results off call reports, whichever process measured them."""

    def __init__(self, config: pytest.Config) -> None:
        """Bind to the controlling config."""
        self._config = config

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Move the full result into the session; JUnit XML keeps the compact properties."""
        if report.when != "call":
            return
        payload = [value for name, value in report.user_properties if name == RESULT_PROPERTY]
        if not payload:
            return
        report.user_properties = [p for p in report.user_properties if p[0] != RESULT_PROPERTY]
        for data in payload:
            self._config.stash[SESSION_KEY].add(Result.from_dict(cast("dict[str, Any]", data)))


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
