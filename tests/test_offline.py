"""The offline commands: compare (A/B), history (trends, change points), baseline accept."""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from perfsuite.cli import main
from perfsuite.judge import outcome
from perfsuite.judge import trends as history
from perfsuite.judge.compare import environment_diff
from perfsuite.store.files import write_json_atomic
from perfsuite.store.records import load_record

FIXTURES = Path(__file__).parent / "fixtures"
A, B, C = (FIXTURES / n for n in ("run-a-tf220.json", "run-b-tf221.json", "run-c-a100.json"))


def test_compare_flags_the_regression_and_the_environment_change(
    capsys: pytest.CaptureFixture[str], repeated_runs: Callable[..., list[str]]
) -> None:
    assert main(["compare", *repeated_runs(A), str(B)]) == 1
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("test_stream")}
    assert rows["test_stream[tensorflow-cpu-triad]"].endswith("regressed")
    assert rows["test_stream[numpy-cpu-triad]"].endswith("ok")
    assert "software.tensorflow.version: '2.20.0' -> '2.21.0'" in out
    assert "variables.XLA_FLAGS: None -> '--xla_cpu_use_thunk_runtime=false'" in out
    assert "1 regressed, 1 pass" in out and "compare: FAILED (1 regressed)" in out


def test_compare_of_a_run_with_its_own_repeats_passes(
    capsys: pytest.CaptureFixture[str], repeated_runs: Callable[..., list[str]]
) -> None:
    *before, again = repeated_runs(A, 4)
    assert main(["compare", *before, again]) == 0
    assert "environment: no changes" in capsys.readouterr().out


def test_a_one_run_baseline_judges_with_a_cautious_spread(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One A run shows no run-to-run spread: the -20% change stays unconfirmed, not red."""
    assert main(["compare", str(A), str(B)]) == outcome.EXIT_INCONCLUSIVE
    out = capsys.readouterr().out
    assert "judged with a cautious run-to-run spread (sd 25%) until the baseline has 3" in out
    assert "compare: INCONCLUSIVE" in out


def test_compare_counts_a_runs_minutes_apart_as_one_session(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    repeated_runs: Callable[..., list[str]],
) -> None:
    """Three A runs saved back to back show one state of the machine: B's -20% is not red."""
    close = []
    for i, path in enumerate(repeated_runs(A)):
        data = json.loads(Path(path).read_text())
        data["created"] = f"2026-11-01T00:{10 * i:02d}:00+00:00"
        close.append(tmp_path / f"close-{i}.json")
        close[-1].write_text(json.dumps(data))
    assert main(["compare", *map(str, close), str(B)]) == outcome.EXIT_INCONCLUSIVE
    out = capsys.readouterr().out
    assert "3 baseline runs from 1 session(s), judged with a cautious run-to-run spread" in out
    assert "have runs from 1 session(s) of the 3" in out and "--baseline-window" in out
    assert main(["compare", "--baseline-window", "0", *map(str, close), str(B)]) == 1
    assert "compare: FAILED (1 regressed)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as bad:
        main(["compare", "--baseline-window", "soon", *map(str, close), str(B)])
    assert bad.value.code == outcome.EXIT_USAGE
    assert "expected a duration of 0 or more (30m, 1800s, 1h), got 'soon'" in (
        capsys.readouterr().err
    )


def test_compare_refuses_different_profiles(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(A), str(C)]) == outcome.EXIT_USAGE
    err = capsys.readouterr().err
    assert "refusing to compare runs of different hardware profiles" in err
    assert "cpu-amd-epyc-2c" in err and "'a100'" in err


def test_compare_reports_a_corrupt_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(A.read_text()[:500])
    assert main(["compare", str(A), str(bad)]) == outcome.EXIT_USAGE
    assert f"{bad}: corrupt or truncated run record" in capsys.readouterr().err


def test_environment_diff_ignores_run_to_run_readings() -> None:
    a = {
        "host": {"load_average": [1, 2, 3], "kernel": "6.1"},
        "gpus": [{"sm_clock_mhz": 1400, "driver": "550"}],
    }
    b = {
        "host": {"load_average": [3, 2, 1], "kernel": "6.2"},
        "gpus": [{"sm_clock_mhz": 1980, "driver": "560"}],
    }
    assert environment_diff(a, b) == [
        ("gpus.0.driver", "550", "560"),
        ("host.kernel", "6.1", "6.2"),
    ]


def test_environment_diff_shows_a_stack_upgrade_and_not_an_idle_pcie_link() -> None:
    def env(driver: str, cuda: str, cudnn: int, nccl: str, gen: int) -> dict:
        return {
            "software": {"torch": {"version": "2.13.0", "cuda_build": cuda,
                                   "cudnn_build": cudnn, "nccl": nccl}},
            "gpus": [{"driver": driver, "cuda_driver": cuda, "pcie_generation": gen,
                      "pcie_max_generation": 5, "ecc_mode": "on", "mig_mode": "off"}],
        }  # fmt: skip

    old, new = env("550.54", "12.4", 90100, "2.21.5", 5), env("570.86", "12.8", 90800, "2.26.2", 1)
    assert environment_diff(old, new) == [
        ("gpus.0.cuda_driver", "12.4", "12.8"),
        ("gpus.0.driver", "550.54", "570.86"),
        ("software.torch.cuda_build", "12.4", "12.8"),
        ("software.torch.cudnn_build", 90100, 90800),
        ("software.torch.nccl", "2.21.5", "2.26.2"),
    ]


def test_environment_diff_compares_the_stack_not_which_checks_ran() -> None:
    """A run that imported TensorFlow against one that did not: only a new version shows."""
    old = {"software": {"tensorflow": {"version": "2.20.0", "loaded": False}}}
    new = {
        "software": {
            "tensorflow": {"version": "2.21.0", "loaded": True, "cuda_build": "12.5"},
        }
    }
    assert environment_diff(old, new) == [("software.tensorflow.version", "2.20.0", "2.21.0")]


def test_variables_are_recorded_as_the_session_found_them(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read at configure, before a backend's import sets its defaults (TF_CPP_MIN_LOG_LEVEL)."""
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    config = pytester.parseconfigure()
    from perfsuite.plugin import VARIABLES_KEY

    assert config.stash[VARIABLES_KEY].get("OMP_NUM_THREADS") == "3"
    assert "TF_CPP_MIN_LOG_LEVEL" not in config.stash[VARIABLES_KEY]


def test_accept_promotes_a_run_and_keeps_the_previous_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base_dir = tmp_path / "baselines"
    assert main(["baseline", "accept", str(A), "--baseline-dir", str(base_dir)]) == 0
    path = base_dir / "cpu-amd-epyc-2c" / "baseline.json"
    first = json.loads(path.read_text())
    assert len(first["entries"]) == 2
    assert (
        main(["baseline", "accept", str(B), "-k", "tensorflow", "--baseline-dir", str(base_dir)])
        == 0
    )
    out = capsys.readouterr().out
    assert "accepted 1 result(s) of run 20261121T010000000Z-node-bbbb" in out
    second = json.loads(path.read_text())
    runs = {
        k.rsplit("::", 1)[1]: [r["run_id"] for r in v["runs"]] for k, v in second["entries"].items()
    }
    assert runs == {
        "test_stream[numpy-cpu-triad]": ["20261120T010000000Z-node-aaaa"],
        "test_stream[tensorflow-cpu-triad]": [
            "20261120T010000000Z-node-aaaa",
            "20261121T010000000Z-node-bbbb",
        ],
    }
    # Each run keeps the time it measured, not the time it was accepted: runs accepted
    # together a day later are still a day apart, two sessions.
    (entry,) = [v for k, v in second["entries"].items() if "tensorflow" in k]
    created = [r["created"] for r in entry["runs"]]
    assert created == [load_record(A).created, load_record(B).created]
    # The environment of each accepted run is kept, so the report's diff still works.
    assert set(second["environments"]) == {
        "20261120T010000000Z-node-aaaa",
        "20261121T010000000Z-node-bbbb",
    }
    (kept,) = (base_dir / "cpu-amd-epyc-2c" / "history").glob("baseline-*.json")
    assert json.loads(kept.read_text())["entries"] == first["entries"]
    assert (
        main(
            ["baseline", "accept", str(A), "-k", "nothing-matches", "--baseline-dir", str(base_dir)]
        )
        == outcome.EXIT_USAGE
    )


def _series_records(tmp_path: Path, levels: list[float]) -> Path:
    record = load_record(A)
    rng = np.random.default_rng(3)
    for i, level in enumerate(levels):
        results = []
        for r in record.results:
            s = tuple(float(x) for x in level * rng.lognormal(0, 0.01, 10))
            summary = replace(r.summary, median=float(np.median(s)))
            results.append(replace(r, samples=s, summary=summary))
        run = replace(
            record,
            run_id=f"run-{i:02d}",
            created=f"2026-11-{i + 1:02d}T00:00:00+00:00",
            results=tuple(results),
        )
        write_json_atomic(
            tmp_path / "reports" / "cpu-amd-epyc-2c" / f"run-{i:02d}.json", run.to_dict()
        )
    return tmp_path / "reports"


def test_history_finds_gradual_drift_no_pairwise_comparison_sees(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 1.2% slower every run: each run is well within 5% of the one before it.
    levels = [40.0 * 0.988**i for i in range(20)]
    assert all(b / a > 0.95 for a, b in itertools.pairwise(levels))
    reports = _series_records(tmp_path, levels)
    assert main(["history", "--report-dir", str(reports)]) == 1
    out = capsys.readouterr().out
    assert "profile cpu-amd-epyc-2c: 20 runs" in out
    assert "drift -" in out or "run " in out


def test_history_of_a_stable_series_flags_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reports = _series_records(tmp_path, [40.0] * 15)
    assert main(["history", "--report-dir", str(reports), "-k", "numpy"]) == 0
    out = capsys.readouterr().out
    assert "test_stream[numpy-cpu-triad]" in out and "tensorflow" not in out


def test_change_point_of_a_step() -> None:
    values = [100.0] * 8 + [88.0] * 8
    values = [
        v * f for v, f in zip(values, np.random.default_rng(1).lognormal(0, 0.01, 16), strict=True)
    ]
    found, drift = history.change_points(values, higher_is_better=True, tolerance=0.05)
    assert [cp.index for cp in found] == [8]
    assert found[0].ratio == pytest.approx(0.88, abs=0.02)
    assert drift is None
    # The same step in a time (lower is better) is an improvement.
    found, _ = history.change_points(values, higher_is_better=False, tolerance=0.05)
    assert found[0].ratio > 1


def test_history_needs_a_profile_when_there_are_several(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("a100", "h100-sxm"):
        (tmp_path / name).mkdir()
        shutil.copy(A, tmp_path / name / "r.json")
    assert main(["history", "--report-dir", str(tmp_path)]) == outcome.EXIT_USAGE
    assert (
        "name one with --profile (run records exist for: a100, h100-sxm)" in capsys.readouterr().err
    )
