"""perfsuite's command-line options and ini keys: one row each, the one table of them.

A row is the flag, its ini key (``--perf-quick`` is ``perf_quick``), argparse's keywords
(metavar and help), the ini type and the default.  :mod:`perfsuite.options` adds the rows to
pytest and reads their values into settings; the documentation's options page is generated
from this table.
"""

from __future__ import annotations

from typing import Any

from perfsuite.judge import outcome, stats
from perfsuite.measure import allocator
from perfsuite.model.baseline import DEFAULT_WINDOW, MAX_WINDOW, MIN_WINDOW
from perfsuite.settings import DEFAULT_TOLERANCE, MAX_SAMPLE_SECONDS, MAX_SAMPLES, MIN_SAMPLES

# Training FLOPs per sample a model may have: from a toy to far past today's largest.
MIN_MODEL_FLOPS, MAX_MODEL_FLOPS = 1.0, 1e20
MAX_RANKS = 65_536  # ranks a collective check launches


def _flag(help_text: str) -> dict[str, Any]:
    return {"action": "store_const", "const": True, "help": help_text}


# (flag, ini key, argparse kwargs, ini type, default)
OPTIONS: list[tuple[str, str, dict[str, Any], str, Any]] = [
    (
        "--hw",
        "perf_hw",
        {"metavar": "NAME|auto", "help": "hardware profile to judge against (default: auto)"},
        "string",
        "auto",
    ),
    (
        "--perf-backend",
        "perf_backend",
        {
            "metavar": "NAMES",
            "help": "run only these backends, comma-separated, e.g. torch or numpy,tensorflow "
            "(default: every registered backend; `perfsuite backends` lists them)",
        },
        "string",
        "",
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
        _flag(
            "add this run to the baseline (failed, regressed, loaded and quick-mode results "
            "are refused)"
        ),
        "bool",
        False,
    ),
    (
        "--perf-force-baseline",
        "perf_force_baseline",
        _flag("with --perf-save-baseline: also save results it would refuse"),
        "bool",
        False,
    ),
    (
        "--perf-baseline-runs",
        "perf_baseline_runs",
        {
            "metavar": "K",
            "help": f"accepted runs a baseline keeps per check, {MIN_WINDOW} to {MAX_WINDOW} "
            f"(default: the window the baseline was written with, {DEFAULT_WINDOW} for a "
            "new one)",
        },
        "string",
        "",
    ),
    (
        "--perf-baseline-window",
        "perf_baseline_window",
        {
            "metavar": "DURATION",
            "help": "baseline runs accepted within this time of each other (30m, 1800s, 1h) "
            "count as one session, and a baseline is judged with a cautious run-to-run spread "
            f"until it has runs from {stats.MIN_RUNS} sessions; 0 counts each run as its own "
            "(default: 30m)",
        },
        "string",
        "30m",
    ),
    (
        "--perf-malloc-threshold",
        "perf_malloc_threshold",
        {
            "metavar": "MIB",
            "help": "pin glibc's mmap threshold to this many MiB in every pytest process, so "
            "framework temporaries are allocated alike in every run (0: glibc's own policy; "
            f"default: {allocator.DEFAULT_MIB})",
        },
        "string",
        str(allocator.DEFAULT_MIB),
    ),
    (
        "--perf-quick",
        "perf_quick",
        _flag("quick mode: a smoke of every check, fewer repetitions and cases"),
        "bool",
        False,
    ),
    (
        "--perf-full",
        "perf_full",
        _flag(
            "full mode: every size, shape and layer of each sweep, each beside its bare "
            "reference (default: one representative of each family, no bare references)"
        ),
        "bool",
        False,
    ),
    (
        "--perf-fidelity",
        "perf_fidelity",
        _flag(
            "sample each check's bare reference beside it in quick and default mode too "
            "(full mode always does): the fidelity section, at about twice the time per check"
        ),
        "bool",
        False,
    ),
    (
        "--perf-samples",
        "perf_samples",
        {
            "metavar": "N",
            "help": (
                f"repetitions per check, fixed, {MIN_SAMPLES} to {MAX_SAMPLES} (default: the "
                "mode's, raised where the baseline needs more)"
            ),
        },
        "string",
        "",
    ),
    (
        "--perf-sample-seconds",
        "perf_sample_seconds",
        {
            "metavar": "SECONDS",
            "help": (
                "each sample repeats the operation (up to 100,000 calls) to last at least "
                f"this long, more than 0 and at most {MAX_SAMPLE_SECONDS:g} (default: the "
                "mode's, 0.2 s, quick 0.1 s); longer samples may average over a GPU's power "
                "management, at the cost of time"
            ),
        },
        "string",
        "",
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
            "help": "significance level of a run's regression tests (default: 0.05)",
        },
        "string",
        "0.05",
    ),
    (
        "--perf-correction",
        "perf_correction",
        {
            "metavar": "fdr|holm",
            "help": "correction for a run's many comparisons: fdr (Benjamini-Hochberg, false "
            "discovery rate <= alpha) or holm (family-wise error <= alpha) (default: fdr)",
        },
        "string",
        "fdr",
    ),
    (
        "--perf-fail-on",
        "perf_fail_on",
        {
            "metavar": "OUTCOMES",
            "help": (
                "outcomes that fail the session, comma-separated from "
                f"{', '.join(outcome.CHOOSABLE)} (default: fail,regressed)"
            ),
        },
        "string",
        "fail,regressed",
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
        "--perf-allow-missing-device",
        "perf_allow_missing_device",
        _flag("judge against a named GPU profile even when no GPU is visible"),
        "bool",
        False,
    ),
    (
        "--perf-allow-empty",
        "perf_allow_empty",
        _flag("let a session pass when perf checks were selected but none measured"),
        "bool",
        False,
    ),
    (
        "--perf-launcher",
        "perf_launcher",
        {
            "metavar": "COMMAND",
            "help": "how collective checks start ranks; {ranks} is the rank count "
            "(default: 'mpiexec -n {ranks}'; e.g. 'srun -n {ranks} --mpi=pmi2')",
        },
        "string",
        "mpiexec -n {ranks}",
    ),
    (
        "--perf-ranks",
        "perf_ranks",
        {
            "metavar": "N[,N...]",
            "help": f"rank counts for collective checks, each 2 to {MAX_RANKS} (default: 2)",
        },
        "string",
        "2",
    ),
    (
        "--perf-oversubscribe",
        "perf_oversubscribe",
        _flag("allow more local ranks than CPUs (latencies then include scheduling)"),
        "bool",
        False,
    ),
    (
        "--perf-launch-timeout",
        "perf_launch_timeout",
        {
            "metavar": "SECONDS",
            "help": "kill a launch (all its ranks) after this long, more than 0 and less "
            "than 1e6 (default: 300)",
        },
        "string",
        "300",
    ),
    (
        "--perf-model-flops",
        "perf_model_flops",
        {
            "metavar": "FLOP",
            "help": "training FLOPs per sample of your model, for the input-pipeline compute "
            f"limit, {MIN_MODEL_FLOPS:g} to {MAX_MODEL_FLOPS:g} (default: ResNet-50 at "
            "224x224, 2.46e10)",
        },
        "string",
        "",
    ),
    (
        "--perf-model",
        "perf_model",
        {
            "metavar": "FILE.keras",
            "help": "a saved Keras model whose training FLOPs (3 x forward, counted) set the "
            "input-pipeline compute limit",
        },
        "string",
        "",
    ),
    (
        "--perf-data-dir",
        "perf_data_dir",
        {
            "metavar": "DIR",
            "help": "cache of the input-pipeline dataset (default: ~/.cache/perfsuite/datasets)",
        },
        "string",
        "",
    ),
    (
        "--perf-benchmark-table",
        "perf_benchmark_table",
        _flag("also print pytest-benchmark's own timing table (hidden by default)"),
        "bool",
        False,
    ),
    (
        "--perf-profile-dir",
        "perf_profile_dir",
        {
            "metavar": "DIR",
            "help": "extra directory of hardware profile TOML files (default: none)",
        },
        "string",
        "",
    ),
]
