"""perfsuite's command-line options and ini keys, and their translation into settings.

Every option is also an ini key (``--perf-quick`` is ``perf_quick``), one row each in
:mod:`perfsuite.option_table`; a bad value is a usage error that names the option and says
what it expects.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from perfsuite.judge import outcome, stats
from perfsuite.model.baseline import MAX_WINDOW, MIN_WINDOW
from perfsuite.option_table import MAX_MODEL_FLOPS, MAX_RANKS, MIN_MODEL_FLOPS, OPTIONS
from perfsuite.settings import (
    MAX_SAMPLE_SECONDS,
    MAX_SAMPLES,
    MIN_SAMPLES,
    Settings,
    duration,
)

# Options whose empty value has a message of its own (the others share one).
_OWN_EMPTY_MESSAGE = frozenset({"perf_hw", "perf_baseline_dir", "perf_report_dir"})


def add_options(parser: pytest.Parser) -> None:
    """Add perfsuite's options, each also settable as an ini key."""
    group = parser.getgroup("perfsuite", "perfsuite performance checks")
    for flag, ini, kwargs, ini_type, default in OPTIONS:
        group.addoption(flag, dest=ini, default=None, **kwargs)
        parser.addini(ini, kwargs["help"], type=ini_type, default=default)  # type: ignore[arg-type]


def _parse(flag: str, raw: Any, convert: Callable[[str], Any], expected: str) -> Any:
    try:
        return convert(str(raw).strip())
    except ValueError:
        raise pytest.UsageError(f"{flag}: expected {expected}, got {raw!r}") from None


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 < value < 1:
        raise ValueError(text)
    return value


def _count(minimum: int, maximum: int) -> Callable[[str], int]:
    """A whole number from ``minimum`` to ``maximum`` (a 40-digit one is refused unread)."""

    def convert(text: str) -> int:
        value = int(text) if len(text) <= 24 else maximum + 1
        if not minimum <= value <= maximum:
            raise ValueError(text)
        return value

    return convert


def _counts(text: str) -> tuple[int, ...]:
    values = tuple(_count(2, MAX_RANKS)(part.strip()) for part in text.split(",") if part.strip())
    if not values:
        raise ValueError(text)
    return values


def _model_flops(text: str) -> float:
    value = float(text)
    if not MIN_MODEL_FLOPS <= value <= MAX_MODEL_FLOPS:  # also refuses nan and inf
        raise ValueError(text)
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not 0 < value < 1e6:
        raise ValueError(text)
    return value


def _sample_seconds(text: str) -> float:
    value = _seconds(text)
    if value > MAX_SAMPLE_SECONDS:
        raise ValueError(text)
    return value


def _launcher(text: str) -> str:
    from perfsuite.collectives.launch import Launcher, LauncherError

    try:
        return Launcher.parse(text).template
    except LauncherError as exc:
        raise pytest.UsageError(str(exc)) from None


def _correction(text: str) -> str:
    if text.lower() not in stats.CORRECTIONS:
        raise ValueError(text)
    return text.lower()


def _yes_no(text: str) -> bool:
    if text.lower() not in ("yes", "no"):
        raise ValueError(text)
    return text.lower() == "yes"


def _backend_names(text: str) -> tuple[str, ...]:
    """Backend names, each registered; a usage error lists the registered and installed ones."""
    names = tuple(dict.fromkeys(n.strip().lower() for n in text.split(",") if n.strip()))
    if not text.strip():
        return names  # the default: every backend (an empty option value is refused earlier)
    if not names:
        raise pytest.UsageError(
            f"--perf-backend: no backend named in {text!r}; name one or more, e.g. numpy or "
            "torch,numpy, or leave the option out for every backend"
        )
    if any(not n.strip() for n in text.split(",")):  # a stray comma: a name left out?
        raise pytest.UsageError(
            f"--perf-backend: an empty name in {text!r}; name each backend once, "
            "comma-separated, e.g. torch,numpy"
        )
    known = known_backends()
    unknown = [n for n in names if n not in known]
    if unknown:
        listed = ", ".join(
            f"{n} ({'installed' if ok else 'not installed'})" for n, ok in known.items()
        )
        raise pytest.UsageError(
            f"--perf-backend: {', '.join(map(repr, unknown))} is not a registered backend; "
            f"registered: {listed}"
        )
    return names


def installed(module: str) -> bool:
    """Whether ``module`` can be imported here (an empty name: nothing to install)."""
    import importlib.util

    return not module or importlib.util.find_spec(module) is not None


def known_backends() -> dict[str, bool]:
    """Every backend a check can run on, and whether it is installed here.

    The framework backends of the registry, and the collective libraries the allreduce
    check launches ranks with (MPI, Horovod).
    """
    from perfsuite import backends
    from perfsuite.collectives import LIBRARIES

    known = {n: installed(b.module) for n, b in backends.registry().items()}
    for name, (module, _hint) in LIBRARIES.items():
        known.setdefault(name, installed(module))
    return known


def rank_counts(config: pytest.Config) -> tuple[int, ...]:
    """The ``--perf-ranks`` counts, for parametrizing at collection (a bad value: 2)."""
    raw = config.getoption("perf_ranks")
    try:
        return _counts(str(config.getini("perf_ranks") if raw is None else raw))
    except ValueError:
        return (2,)  # the session's own check of the option reports it as a usage error


def check_benchmark_options(config: pytest.Config) -> None:
    """pytest-benchmark's own habits: refuse what would bypass perfsuite's verdict, with why.

    ``--benchmark-compare-fail`` gates on pytest-benchmark's own comparison (a fixed
    threshold on one statistic, no test) and ends the session with a traceback before
    perfsuite's summary; perfsuite's gate is its verdict.  ``--benchmark-histogram`` needs
    pygal, which the ``histogram`` extra installs.
    """
    if _getoption(config, "benchmark_compare_fail"):
        raise pytest.UsageError(
            "--benchmark-compare-fail is pytest-benchmark's fixed-threshold gate and would "
            "bypass perfsuite's verdict; perfsuite fails a session on statistically "
            "significant regressions against its stored baseline: use --perf-tolerance 0.05 "
            "and --perf-fail-on regressed (the default), or `perfsuite compare A.json B.json` "
            "to compare two runs"
        )
    if _getoption(config, "benchmark_histogram"):
        try:
            import pygal  # noqa: F401
            import pygaljs  # noqa: F401
        except ImportError:
            raise pytest.UsageError(
                "--benchmark-histogram draws with pygal, which is not installed: "
                "pip install 'perfsuite[histogram]'"
            ) from None


def _getoption(config: pytest.Config, name: str) -> Any:
    try:
        return config.getoption(name)
    except ValueError:  # pytest-benchmark is not loaded
        return None


def refuse_empty_values(config: pytest.Config) -> None:
    """An option given an empty value (``--perf-samples=``, an unset CI variable) is refused.

    Its default would be taken silently otherwise, and the run would not be the one asked
    for.  An ini key left empty is its default, as pytest reads it.
    """
    for flag, ini, kwargs, _ini_type, _default in OPTIONS:
        if kwargs.get("action") == "store_const" or ini in _OWN_EMPTY_MESSAGE:
            continue
        value = config.getoption(ini)
        if value is not None and not str(value).strip():
            raise pytest.UsageError(
                f"{flag}: empty value (an unset CI variable?); give one, or leave the option "
                "out for its default"
            )


def settings_from_config(config: pytest.Config) -> Settings:
    """Translate options and ini keys into :class:`Settings`; bad values are usage errors.

    The groups are read in the order of the settings' fields, so the first bad value is
    the one reported.
    """
    check_benchmark_options(config)
    refuse_empty_values(config)
    values = _Values(config)
    return Settings(
        **_where(values),
        **_baseline(values),
        **_measuring(values),
        **_judging(values),
        **_output(values),
        **_inputs(values),
        **_collectives(values),
    )


class _Values:
    """Each option's value: the flag given on the command line, else its ini key."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def __call__(self, ini: str) -> Any:
        value = self.config.getoption(ini)
        return self.config.getini(ini) if value is None else value

    def path(self, ini: str) -> Path:
        """A folder, relative to pytest's root unless absolute; empty is refused."""
        text = str(self(ini)).strip()
        if not text:
            flag = "--" + ini.replace("_", "-")
            raise pytest.UsageError(
                f"{flag}: empty path (an unset CI variable?); name a folder, or leave the "
                "option out for its default"
            )
        p = Path(text)
        return p if p.is_absolute() else self.config.rootpath / p


def _where(option: _Values) -> dict[str, Any]:
    """The hardware profile, and the folders of baselines, run records and profiles."""
    hw = str(option("perf_hw")).strip()
    if not hw:
        raise pytest.UsageError(
            "--hw: empty profile name (an unset CI variable?); name a profile or use --hw=auto"
        )
    profile_dir = option("perf_profile_dir")
    return {
        "hw": hw,
        "baseline_dir": option.path("perf_baseline_dir"),
        "report_dir": option.path("perf_report_dir"),
        "profile_dirs": (option.path("perf_profile_dir"),) if profile_dir else (),
    }


def _baseline(option: _Values) -> dict[str, Any]:
    """Saving to the baseline, its window of runs and its sessions."""
    return {
        "save_baseline": bool(option("perf_save_baseline")),
        "force_baseline": bool(option("perf_force_baseline")),
        "baseline_runs": _parse(
            "--perf-baseline-runs",
            option("perf_baseline_runs"),
            lambda text: _count(MIN_WINDOW, MAX_WINDOW)(text) if text else None,
            f"a whole number from {MIN_WINDOW} to {MAX_WINDOW}",
        ),
        "baseline_window_s": _parse(
            "--perf-baseline-window",
            option("perf_baseline_window"),
            duration,
            "a duration of 0 or more: 30m, 1800s, 1h",
        ),
    }


def _measuring(option: _Values) -> dict[str, Any]:
    """How the checks measure: the allocator, the mode, the backends, the samples."""
    samples_raw = str(option("perf_samples")).strip()
    sample_seconds_raw = str(option("perf_sample_seconds")).strip()
    return {
        "malloc_threshold": _parse(
            "--perf-malloc-threshold",
            option("perf_malloc_threshold"),
            _count(0, 2**62),  # past allocator.MAX_MIB: Settings says why glibc refuses it
            "a whole number of MiB >= 0",
        ),
        "quick": bool(option("perf_quick")),
        "full": bool(option("perf_full")),
        "fidelity": bool(option("perf_fidelity")),
        "backends": _parse(
            "--perf-backend", option("perf_backend"), _backend_names, "registered backend names"
        ),
        "samples": (
            _parse(
                "--perf-samples",
                samples_raw,
                _count(MIN_SAMPLES, MAX_SAMPLES),
                f"a whole number of repetitions from {MIN_SAMPLES} to {MAX_SAMPLES}",
            )
            if samples_raw
            else None
        ),
        "sample_seconds": (
            _parse(
                "--perf-sample-seconds",
                sample_seconds_raw,
                _sample_seconds,
                f"seconds > 0 and <= {MAX_SAMPLE_SECONDS:g}",
            )
            if sample_seconds_raw
            else None
        ),
    }


def _judging(option: _Values) -> dict[str, Any]:
    """The tolerance, the family's significance and correction, what fails the session."""
    return {
        "tolerance": _parse(
            "--perf-tolerance",
            option("perf_tolerance"),
            _fraction,
            "a fraction between 0 and 1 (e.g. 0.05)",
        ),
        "alpha": _parse(
            "--perf-alpha",
            option("perf_alpha"),
            _fraction,
            "a significance level between 0 and 1",
        ),
        "correction": _parse(
            "--perf-correction",
            option("perf_correction"),
            _correction,
            f"one of {', '.join(stats.CORRECTIONS)}",
        ),
        "fail_on": _parse(
            "--perf-fail-on",
            option("perf_fail_on"),
            outcome.parse_fail_on,
            f"a comma-separated list of {', '.join(outcome.CHOOSABLE)}",
        ),
    }


def _output(option: _Values) -> dict[str, Any]:
    """What the session writes and prints, and what it lets pass."""
    markdown = option("perf_markdown")
    return {
        "html": _parse("--perf-html", option("perf_html"), _yes_no, "yes or no"),
        "markdown": Path(markdown) if markdown else None,
        "allow_missing_device": bool(option("perf_allow_missing_device")),
        "allow_empty": bool(option("perf_allow_empty")),
        "benchmark_table": bool(option("perf_benchmark_table")),
    }


def _inputs(option: _Values) -> dict[str, Any]:
    """The input-pipeline checks: the model's FLOPs, its file, the dataset's cache."""
    model_flops = option("perf_model_flops")
    data_dir = option("perf_data_dir")
    model = option("perf_model")
    return {
        "model_flops": (
            _parse(
                "--perf-model-flops",
                model_flops,
                _model_flops,
                f"FLOPs per sample from {MIN_MODEL_FLOPS:g} to {MAX_MODEL_FLOPS:g}",
            )
            if str(model_flops).strip()
            else None
        ),
        "data_dir": Path(str(data_dir)).expanduser() if str(data_dir).strip() else None,
        "model_path": Path(str(model)).expanduser() if str(model).strip() else None,
    }


def _collectives(option: _Values) -> dict[str, Any]:
    """The collective checks: how ranks are launched, how many, for how long."""
    return {
        "launcher": _launcher(str(option("perf_launcher"))),
        "ranks": _parse(
            "--perf-ranks",
            option("perf_ranks"),
            _counts,
            f"rank counts from 2 to {MAX_RANKS}, e.g. 2 or 2,4",
        ),
        "oversubscribe": bool(option("perf_oversubscribe")),
        "launch_timeout": _parse(
            "--perf-launch-timeout", option("perf_launch_timeout"), _seconds, "seconds > 0"
        ),
    }
