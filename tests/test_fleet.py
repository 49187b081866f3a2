"""Fleets: each node judged against its fleet, from run records in the real schema.

The records are built with perfsuite's model and written as the plugin writes them; their
figures are chosen, never timed.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from perfsuite.cli import main
from perfsuite.errors import PerfsuiteError
from perfsuite.fleet import aggregate, judge
from perfsuite.fleet import run as fleet_run
from perfsuite.fleet.node import REPORT_PREFIX
from perfsuite.fleet.status import NodeStatus
from perfsuite.model import BaselineVerdict, FloorVerdict, Result, RunRecord, Summary, Work
from perfsuite.storage import write_json_atomic

# Small, fixed relative scatter of healthy nodes (a few tenths of a percent to 2%).
SCATTER = (0.0, 0.012, -0.008, 0.004, -0.015, 0.009, -0.003, 0.017, -0.011, 0.006)


def result(
    rid: str,
    median: float,
    *,
    higher_is_better: bool = True,
    floor: str = "no-reference",
    baseline: str = "new",
) -> Result:
    """A result as the plugin stores it, with the given summary median."""
    samples = tuple(median * f for f in (0.995, 1.0, 1.0, 1.005, 1.002))
    return Result(
        id=f"suites/test_x.py::{rid}",
        check=rid.split("[")[0],
        params={},
        metric="bandwidth" if higher_is_better else "latency",
        unit="GB/s" if higher_is_better else "us",
        higher_is_better=higher_is_better,
        samples=samples,
        seconds=(0.01,) * 5,
        summary=Summary(median, min(samples), max(samples), median, 5, 0.004),
        work=Work(1e9, "B"),
        floor=FloorVerdict(verdict=floor),
        baseline=BaselineVerdict(verdict=baseline),
        outcome="passed",
    )


def write_record(
    directory: Path,
    label: str,
    results: Sequence[Result],
    profile: str = "cpu-node",
    gpus: list[dict[str, object]] | None = None,
) -> Path:
    """A node's run record under ``directory/records/<label>/<profile>/``."""
    record = RunRecord(
        run_id=f"20261128T000000000Z-{label}",
        created="2026-11-28T00:00:00+00:00",
        hardware_profile={"name": profile, "kind": "cpu"},
        environment={
            "host": {"hostname": label.split("-t")[0], "node_label": label},
            "gpus": gpus if gpus is not None else {"unavailable": "none"},
        },
        results=tuple(results),
    )
    path = directory / "records" / label / profile / f"{record.run_id}.json"
    return write_json_atomic(path, record.to_dict())


def fleet(
    directory: Path,
    n: int,
    slow: dict[int, float] | None = None,
    profile: str = "cpu-node",
    level: float = 100.0,
    prefix: str = "node",
) -> None:
    """``n`` nodes with 3 checks (two throughputs, one latency); ``slow``: node -> factor."""
    slow = slow or {}
    for i in range(n):
        f = math.exp(SCATTER[i % len(SCATTER)]) * slow.get(i, 1.0)
        write_record(
            directory,
            f"{prefix}{i:02d}",
            [
                result("test_triad[numpy]", level * f),
                result("test_gemm[fp32]", 3 * level * f),
                result("test_latency[8B]", 5.0 / f, higher_is_better=False),
            ],
            profile=profile,
        )


def report(directory: Path, *extra: str) -> tuple[int, dict[str, object]]:
    code = main(["fleet", "report", str(directory), "--html", "", *extra])
    drain = json.loads((directory / "drain.json").read_text())
    return code, drain


def drained(drain: dict[str, object]) -> list[str]:
    entries = drain["drain"]
    assert isinstance(entries, list)
    return [e["node"] + (f"/gpu{e['gpu_index']}" if e["gpu_index"] is not None else "")
            for e in entries]  # fmt: skip


def test_one_slow_node_is_named_and_no_other(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet(tmp_path, 8, slow={5: 0.7})
    code, drain = report(tmp_path)
    out = capsys.readouterr().out
    assert code == 1
    assert drained(drain) == ["node05"]
    assert "SLOW, worst first:" in out and "node05" in out
    assert "test_triad[numpy] 0.7" in out  # 0.7 slow, within its node's scatter
    assert out.rstrip().endswith("(1 node slow) of 8 nodes (exit 1)")


def test_a_homogeneous_fleet_flags_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet(tmp_path, 10)
    code, drain = report(tmp_path)
    assert code == 0 and drained(drain) == []
    assert "FLEET OK" in capsys.readouterr().out


def test_profiles_are_judged_apart_never_across(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Half the fleet is another kind, twice as slow: only the slow one of its kind is named."""
    fleet(tmp_path, 5, profile="gpu-a", level=200.0, prefix="a")
    fleet(tmp_path, 5, slow={2: 0.6}, profile="gpu-b", level=100.0, prefix="b")
    code, drain = report(tmp_path)
    out = capsys.readouterr().out
    assert code == 1 and drained(drain) == ["b02"]
    assert drain["drain"][0]["profile"] == "gpu-b"  # type: ignore[index]
    assert "profile gpu-a: 5 nodes" in out and "profile gpu-b: 5 nodes" in out


def test_latency_is_judged_lower_is_better(tmp_path: Path) -> None:
    """A node with a higher latency is slow; one with a lower latency is not."""
    for i in range(6):
        f = math.exp(SCATTER[i])
        latency = {2: 1.5, 4: 0.6}.get(i, 1.0) * 5.0 * f
        write_record(
            tmp_path,
            f"n{i}",
            [result("test_latency[8B]", latency, higher_is_better=False)],
        )
    code, drain = report(tmp_path)
    assert code == 1 and drained(drain) == ["n2"]
    (check,) = drain["drain"][0]["checks"]  # type: ignore[index]
    assert check["higher_is_better"] is False
    assert check["value"] > check["fleet_median"] and check["ratio"] < 0.7


def test_drain_list_names_node_reason_and_figures(tmp_path: Path) -> None:
    fleet(tmp_path, 6, slow={1: 0.5})
    _, drain = report(tmp_path, "--alpha", "0.05", "--tolerance", "0.2")
    assert drain["schema_version"] == 1
    assert drain["rule"] == {  # type: ignore[comparison-overlap]
        "alpha": 0.05,
        "tolerance": 0.2,
        "min_spread": 0.01,
        "correction": "holm",
    }
    (entry,) = drain["drain"]  # type: ignore[misc]
    assert entry["node"] == "node01" and entry["host"] == "node01"
    assert entry["profile"] == "cpu-node" and entry["gpu_index"] is None
    assert entry["reason"].startswith("slow: test_")
    assert entry["reason"].endswith("and 2 more checks")
    assert {c["check"].rsplit("::")[-1] for c in entry["checks"]} == {
        "test_triad[numpy]",
        "test_gemm[fp32]",
        "test_latency[8B]",
    }
    for c in entry["checks"]:
        assert c["ratio"] == pytest.approx(0.5 / math.exp(-0.0005), rel=0.05)
        assert c["z"] < -5
    assert Path(entry["record"]).exists()


def test_each_gpu_is_a_unit_of_its_own(tmp_path: Path) -> None:
    """A GPU result belongs to its GPU: named by index and UUID, compared across the fleet."""
    for i in range(4):
        gpus: list[dict[str, object]] = [
            {"index": g, "uuid": f"GPU-{i}{g}-uuid", "name": "NVIDIA H100"} for g in range(2)
        ]
        results = [
            result(f"test_stream[torch-gpu:{g}-copy]", 3000.0 * math.exp(SCATTER[2 * i + g]))
            for g in range(2)
        ]
        if i == 3:
            results[1] = result("test_stream[torch-gpu:1-copy]", 2000.0)
        write_record(tmp_path, f"gpu-node{i}", results, profile="h100-sxm", gpus=gpus)
    code, drain = report(tmp_path)
    assert code == 1 and drained(drain) == ["gpu-node3/gpu1"]
    entry = drain["drain"][0]  # type: ignore[index]
    assert entry["gpu_serial"] == "GPU-31-uuid"
    assert entry["checks"][0]["check"].endswith("test_stream[torch-gpu:*-copy]")


def test_floors_and_baseline_verdicts_are_shown_per_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet(tmp_path, 4)
    write_record(
        tmp_path,
        "node09",
        [
            result("test_triad[numpy]", 100.0, floor="fail"),
            result("test_gemm[fp32]", 300.0, baseline="regressed"),
        ],
    )
    report(tmp_path)
    out = capsys.readouterr().out
    assert (
        "node09: below its floor at test_triad[numpy]; regressed against its baseline at "
        "test_gemm[fp32]" in out
    )


def test_a_tight_fleet_with_zero_mad_needs_a_material_shortfall(tmp_path: Path) -> None:
    """Identical nodes (MAD 0): 4% slow is within the tolerance; 25% slow is flagged."""
    for i in range(5):
        factor = {1: 0.96, 3: 0.75}.get(i, 1.0)
        write_record(tmp_path, f"same{i}", [result("test_triad[numpy]", 100.0 * factor)])
    code, drain = report(tmp_path)
    assert code == 1 and drained(drain) == ["same3"]


def test_judge_floors_the_mad_and_orients_latency() -> None:
    values = np.array([[10.0, 1.0], [10.0, 1.0], [10.0, 1.0], [10.0, 2.0]])
    j = judge.judge(values, np.array([True, False]))
    assert j.mad_floored.tolist() == [True, True]
    assert j.spread.tolist() == [0.01, 0.01]
    assert j.ratio[3].tolist() == pytest.approx([1.0, 0.5])
    assert j.flagged.tolist() == [[False, False]] * 3 + [[False, True]]
    assert j.median.tolist() == pytest.approx([10.0, 1.0])


def test_a_check_measured_by_too_few_nodes_is_not_judged() -> None:
    values = np.array([[10.0, 1.0], [10.0, np.nan], [5.0, np.nan], [10.0, 3.0]])
    j = judge.judge(values, np.array([True, True]))
    assert j.count.tolist() == [4, 2] and j.family == 4
    assert not j.flagged[:, 1].any()


def test_holm_threshold_steps_down() -> None:
    p = np.array([0.001, 0.02, 0.5, np.nan])
    assert judge.holm_threshold(p, 0.01) == 0.001  # 0.02 > 0.01 / 2
    assert judge.holm_threshold(p, 0.05) == 0.02  # 0.001 <= 0.05/3, 0.02 <= 0.05/2
    assert judge.holm_threshold(np.array([0.5]), 0.05) == -1.0


def test_a_stale_digest_is_not_used(tmp_path: Path) -> None:
    fleet(tmp_path, 4)
    (path,) = (tmp_path / "records" / "node00").rglob("*.json")
    aggregate.write_digest(path)
    digest = json.loads(aggregate.digest_path(path).read_text())
    digest["columns"]["median"][0] = 1.0  # a figure no record holds
    digest["record"]["size"] += 1  # ... from another version of the record
    aggregate.digest_path(path).write_text(json.dumps(digest))
    (m,) = aggregate.load(tmp_path, workers=1)
    assert np.nanmin(m.values) > 1.0


def test_the_page_has_the_heat_map_and_the_strips(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    fleet(tmp_path, 8, slow={3: 0.6})
    assert main(["fleet", "report", str(tmp_path)]) == 1
    page = (tmp_path / "fleet.html").read_text()
    assert page.count("<svg") == 1 + 3  # the heat map, and a strip per flagged check
    assert "node03" in page and "figure / fleet median" in page


# Bad input: each a one-line error, exit 2.


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("perfsuite: error: ") and err.count("\n") == 1, err
    return err


def test_a_fleet_of_one_node_has_nothing_to_compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet(tmp_path, 1)
    err = one_line_error(capsys, ["fleet", "report", str(tmp_path)])
    assert "a fleet of one node (node00): nothing to compare it with" in err


def test_records_of_the_wrong_schema_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet(tmp_path, 4)
    bad = tmp_path / "records" / "node01" / "cpu-node" / "old.json"
    bad.write_text(json.dumps({"schema_version": 99, "run_id": "x"}))
    err = one_line_error(capsys, ["fleet", "report", str(tmp_path)])
    assert f"{bad}: run record has schema_version 99" in err
    bad.write_text(json.dumps({"schema_version": 1, "run_id": "x", "hardware_profile": {}}))
    err = one_line_error(capsys, ["fleet", "report", str(tmp_path)])
    assert "'name' must be non-empty text" in err


def test_two_records_of_one_label_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet(tmp_path, 4)
    fleet(tmp_path / "again", 4)
    err = one_line_error(capsys, ["fleet", "report", str(tmp_path)])
    assert "node 'node00' also has the record" in err


def run_args(tmp_path: Path, *extra: str) -> list[str]:
    return ["fleet", "run", "--dir", str(tmp_path / "fleet"), *extra, "--", "suites/"]


def test_no_slurm_and_no_hostfile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no srun, no sbatch
    err = one_line_error(capsys, run_args(tmp_path, "--nodes", "2"))
    assert "no Slurm here" in err and "no --hostfile" in err


def test_more_nodes_than_the_allocation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "srun").write_text("#!/bin/sh\n")
    (tmp_path / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "2")
    err = one_line_error(capsys, run_args(tmp_path, "--nodes", "4"))
    assert "--nodes 4: the allocation (job 42) has only 2 node(s)" in err


def test_more_nodes_than_the_hostfile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "hosts").write_text("a\nb:4\n# c\n")
    err = one_line_error(
        capsys, run_args(tmp_path, "--hostfile", str(tmp_path / "hosts"), "--nodes", "3")
    )
    assert "names only 2 hosts" in err


def test_a_directory_that_is_not_writable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("")
    argv = ["fleet", "run", "--dir", str(tmp_path / "file" / "fleet"), "--nodes", "2"]
    err = one_line_error(capsys, [*argv, "--", "suites/"])
    assert "--dir: " in err and "not writable" in err


def test_a_directory_that_is_not_shared_names_the_missing_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task says it wrote its record on its own disk; it never arrives here."""
    lost = NodeStatus(1, "far-node", "far", record="/elsewhere/records/far-node/r.json")
    line = REPORT_PREFIX + json.dumps(lost.to_dict())
    fake = fleet_run.Plan("srun", 2, 2, (sys.executable, "-c", f"print({line!r})"))
    monkeypatch.setattr(fleet_run, "plan", lambda options: fake)
    err = one_line_error(capsys, run_args(tmp_path, "--nodes", "2"))
    assert "task 1 on far wrote its record /elsewhere/records/far-node/r.json" in err
    assert "not shared" in err


def test_a_task_that_never_reports_is_failed_not_fatal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = fleet_run.Plan("srun", 1, 1, (sys.executable, "-c", "print('node lost')"))
    monkeypatch.setattr(fleet_run, "plan", lambda options: fake)
    assert main(run_args(tmp_path, "--nodes", "1")) == 1
    out = capsys.readouterr().out
    assert "FAILED task 0 (? on ?): no report from this task (srun exited 0)" in out
    assert "node lost" in out


def test_sbatch_script_runs_one_task_per_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sbatch").write_text("#!/bin/sh\n")
    (tmp_path / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    options = fleet_run.Options(tmp_path / "d", ("suites/", "-k", "gemm"), nodes=3, timeout_s=60)
    p = fleet_run.plan(options)
    assert p.kind == "sbatch" and p.tasks == 3
    script = (tmp_path / "d" / "nodes" / "fleet.sbatch").read_text()
    assert "#SBATCH --nodes=3" in script and "#SBATCH --ntasks=3" in script
    assert "srun --kill-on-bad-exit=0 --ntasks-per-node=1 -N 3 -n 3" in script
    assert "perfsuite.fleet.node" in script and "-- suites/ -k gemm" in script


def test_a_failed_node_is_in_the_drain_list(tmp_path: Path) -> None:
    fleet(tmp_path, 4)
    failed = NodeStatus(4, "node04", "node04", failed="timed out after 60 s (killed)",
                        log="/shared/nodes/task-4.log")  # fmt: skip
    write_json_atomic(tmp_path / "nodes" / "task-4.json", failed.to_dict())
    code, drain = report(tmp_path)
    assert code == 1
    (entry,) = drain["drain"]  # type: ignore[misc]
    assert entry["node"] == "node04" and entry["reason"] == "failed: timed out after 60 s (killed)"


def test_bad_input_errors_are_perfsuite_errors(tmp_path: Path) -> None:
    (tmp_path / "hosts").write_text("# nothing\n")
    with pytest.raises(PerfsuiteError, match="names no host"):
        fleet_run.read_hostfile(tmp_path / "hosts")


def test_a_run_is_labelled_from_perfsuite_node_label() -> None:
    from perfsuite.environment import node_label

    assert node_label({"PERFSUITE_NODE_LABEL": " gpu-node7-t3 "}) == {"node_label": "gpu-node7-t3"}
    assert node_label({}) == {} and node_label({"PERFSUITE_NODE_LABEL": ""}) == {}


def test_a_task_label_is_unique_per_task_on_a_shared_host() -> None:
    from perfsuite.fleet.node import identity

    task, label, host = identity({"SLURM_PROCID": "5", "SLURM_LOCALID": "1"}, tasks_per_node=4)
    assert task == 5 and label.endswith("-t1") and host
    assert identity({"PMI_RANK": "2"}, tasks_per_node=1)[1] == label.rsplit("-t", 1)[0]


def test_a_directory_of_an_earlier_fleet_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its records would stand beside the new ones under the same labels."""
    fleet(tmp_path / "fleet", 3)
    err = one_line_error(capsys, run_args(tmp_path, "--nodes", "2"))
    assert "already holds the records of an earlier fleet run" in err
