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
from perfsuite.fleet import aggregate, digests, judge
from perfsuite.fleet import run as fleet_run
from perfsuite.fleet.node import REPORT_PREFIX
from perfsuite.fleet.options import MANIFEST, Options
from perfsuite.fleet.status import NodeStatus
from perfsuite.judge import outcome
from perfsuite.model import (
    BaselineVerdict,
    FlagKind,
    FloorVerdict,
    NoiseFlag,
    NoiseReading,
    Result,
    RunRecord,
    Summary,
    Work,
)
from perfsuite.store.files import write_json_atomic

# Small, fixed relative scatter of healthy nodes (a few tenths of a percent to 2%).
SCATTER = (0.0, 0.012, -0.008, 0.004, -0.015, 0.009, -0.003, 0.017, -0.011, 0.006)


def result(
    rid: str,
    median: float,
    *,
    higher_is_better: bool = True,
    floor: str = "no-reference",
    baseline: str = "new",
    noise: dict[str, object] | None = None,
) -> Result:
    """A result as the plugin stores it, with the given summary median.

    ``noise`` holds the guard's facts, its ``flags`` typed (a text is a flag of kind OTHER).
    """
    samples = tuple(median * f for f in (0.995, 1.0, 1.0, 1.005, 1.002))
    facts = dict(noise if noise is not None else quiet())
    raised = facts.pop("flags", [])
    assert isinstance(raised, list)
    flags = tuple(
        f if isinstance(f, NoiseFlag) else NoiseFlag(FlagKind.OTHER, text=str(f)) for f in raised
    )
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
        noise=NoiseReading.read(facts),
        noise_flags=flags,
    )


def quiet() -> dict[str, object]:
    """The noise facts of a check measured on a quiet machine (as noise.assess writes them)."""
    return {"wall_s": 2.0, "foreign_cores": 0.01, "steal_cores": 0.0, "load_average": [],
            "cpu_mhz": [None, None], "governor": "performance", "gpus": [], "flags": [],
            "cv": 0.004}  # fmt: skip


def loaded(cores: float = 1.3) -> dict[str, object]:
    """The noise facts of a check measured beside other work: flagged, as the guard does."""
    return {**quiet(), "foreign_cores": cores,
            "flags": [NoiseFlag(FlagKind.FOREIGN_LOAD, cores=cores)]}  # fmt: skip


def throttled(gpu: int = 0) -> dict[str, object]:
    """The noise facts of a check measured while a GPU's clocks were held down (thermal)."""
    facts = {"index": gpu, "sm_clock_mhz": [1980, 1410], "throttle_reasons": [0, 0x40 | 0x4],
             "throttled": ["hardware thermal slowdown"], "info": ["software power cap"]}  # fmt: skip
    return {**quiet(), "gpus": [facts],
            "flags": [NoiseFlag(FlagKind.GPU_THROTTLED, gpu=gpu,
                                throttled=("hardware thermal slowdown",))]}  # fmt: skip


def write_record(
    directory: Path,
    label: str,
    results: Sequence[Result],
    profile: str = "cpu-node",
    gpus: list[dict[str, object]] | None = None,
) -> Path:
    """A node's run record under ``directory/records/<label>/<profile>/``."""
    record = RunRecord(
        # A rerun (DIR/confirm...) is a new run: a run id of its own.
        run_id=f"20261128T000000000Z-{label}"
        + ("" if not directory.name.startswith("confirm") else f"-{directory.name}"),
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
    noisy: dict[int, dict[str, object]] | None = None,
) -> None:
    """``n`` nodes with 3 checks (two throughputs, one latency); ``slow``: node -> factor.

    ``noisy``: node -> the noise facts every one of its readings was taken under.
    """
    slow = slow or {}
    noisy = noisy or {}
    for i in range(n):
        f = math.exp(SCATTER[i % len(SCATTER)]) * slow.get(i, 1.0)
        facts = noisy.get(i)
        write_record(
            directory,
            f"{prefix}{i:02d}",
            [
                result("test_triad[numpy]", level * f, noise=facts),
                result("test_gemm[fp32]", 3 * level * f, noise=facts),
                result("test_latency[8B]", 5.0 / f, higher_is_better=False, noise=facts),
            ],
            profile=profile,
        )


def report(directory: Path, *extra: str) -> tuple[int, dict[str, object]]:
    code = main(["fleet", "report", str(directory), "--html", "", *extra])
    drain = json.loads((directory / "drain.json").read_text())
    return code, drain


def drained(drain: dict[str, object], key: str = "drain") -> list[str]:
    entries = drain[key]
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
    assert out.rstrip().endswith("(1 unconfirmed slow node) of 8 nodes (exit 1)")


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
    assert entry["reason"].startswith("slow, unconfirmed: test_")
    assert entry["confirmed"] is False
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
    digests.write_digest(path)
    digest = json.loads(digests.digest_path(path).read_text())
    digest["columns"]["median"][0] = 1.0  # a figure no record holds
    digest["record"]["size"] += 1  # ... from another version of the record
    digests.digest_path(path).write_text(json.dumps(digest))
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
    assert main(argv) == outcome.EXIT_USAGE
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
    assert "FAILED task 0 (no host reported: the task never started" in out
    assert "no report from this task (srun exited 0)" in out
    assert "node lost" in out


def test_sbatch_script_runs_one_task_per_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sbatch").write_text("#!/bin/sh\n")
    (tmp_path / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    options = Options(tmp_path / "d", ("suites/", "-k", "gemm"), nodes=3, timeout_s=60)
    p = fleet_run.plan(options)
    assert p.kind == "sbatch" and p.tasks == 3
    assert not (tmp_path / "d").exists()  # written by run, once everything is checked
    script = dict(p.files)[tmp_path / "d" / "nodes" / "fleet.sbatch"]
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
    from perfsuite.measure.environment import node_label

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


# Readings a node's own run flagged (foreign load, throttling): never drained on, never a pass.


def test_a_loaded_slow_node_is_rerun_not_drained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Slow only while its run was flagged under foreign load: listed to rerun, exit 3."""
    fleet(tmp_path, 8, slow={5: 0.6}, noisy={5: loaded(1.3)})
    code, drain = report(tmp_path)
    out = capsys.readouterr().out
    assert code == outcome.EXIT_INCONCLUSIVE
    assert drained(drain) == [] and drained(drain, "rerun") == ["node05"]
    (entry,) = drain["rerun"]  # type: ignore[misc]
    assert entry["reason"].startswith("rerun: test_")
    assert "under foreign load (1.30 cores of other work or steal)" in entry["reason"]
    for c in entry["checks"]:
        assert c["taint"] == ["foreign-load"] and c["foreign_cores"] == 1.3
        assert c["ratio"] == pytest.approx(0.6, rel=0.05)
    assert "SLOW, worst first:" not in out
    assert "RERUN, not drained" in out and "node05" in out
    assert "3 readings flagged by their own runs left out, 1 unit to rerun" in out
    assert out.rstrip().endswith(
        "INCONCLUSIVE (no node flagged, 1 to rerun, slow only at readings their runs "
        "flagged) of 8 nodes (exit 6)"
    )


def test_a_loaded_node_that_reads_like_its_fleet_is_no_rerun(tmp_path: Path) -> None:
    """Foreign load only slows: a flagged reading within the tolerance asks for nothing."""
    fleet(tmp_path, 8, noisy={2: loaded()})
    code, drain = report(tmp_path)
    assert code == 0 and drained(drain) == [] and drained(drain, "rerun") == []


def test_a_clean_slow_node_beside_a_loaded_one_is_still_drained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The flagged node is rerun; the untainted slow one is drained, exit 1."""
    fleet(tmp_path, 8, slow={1: 0.6, 5: 0.55}, noisy={5: loaded()})
    code, drain = report(tmp_path)
    out = capsys.readouterr().out
    assert code == 1
    assert drained(drain) == ["node01"] and drained(drain, "rerun") == ["node05"]
    assert out.rstrip().endswith(
        "NODES TO DRAIN (1 unconfirmed slow node, 1 to rerun, slow only at readings their runs flagged) "
        "of 8 nodes (exit 1)"
    )


def test_a_throttled_gpu_is_rerun_with_its_reason(tmp_path: Path) -> None:
    for i in range(4):
        gpus: list[dict[str, object]] = [{"index": 0, "uuid": f"GPU-{i}-uuid"}]
        slow = i == 2
        write_record(
            tmp_path,
            f"g{i}",
            [result("test_stream[torch-gpu:0-copy]", (1800.0 if slow else 3000.0)
                    * math.exp(SCATTER[i]), noise=throttled(0) if slow else None)],
            profile="h100-sxm",
            gpus=gpus,
        )  # fmt: skip
    code, drain = report(tmp_path)
    assert (
        code == outcome.EXIT_INCONCLUSIVE
        and drained(drain) == []
        and drained(drain, "rerun") == ["g2/gpu0"]
    )
    (check,) = drain["rerun"][0]["checks"]  # type: ignore[index]
    assert check["taint"] == ["gpu-throttled"]
    assert check["throttle_reasons"] == ["hardware thermal slowdown"]
    assert "a GPU throttled (hardware thermal slowdown)" in drain["rerun"][0]["reason"]  # type: ignore[index]


def test_a_tainted_reading_does_not_move_the_fleet() -> None:
    """Median, spread and family are the untainted cells': a loaded node shifts nothing."""
    base = 100.0 * np.exp(np.array(SCATTER[:6]))[:, np.newaxis]
    hib = np.array([True])
    clean = judge.judge(base[:5], hib)
    values = base.copy()
    values[5, 0] = 10.0  # far below its fleet
    tainted = np.zeros(values.shape, dtype=bool)
    tainted[5, 0] = True
    j = judge.judge(values, hib, tainted=tainted)
    assert j.median.tolist() == pytest.approx(clean.median.tolist())
    assert j.spread.tolist() == pytest.approx(clean.spread.tolist())
    assert j.count.tolist() == [5] and j.family == 5
    assert not j.flagged.any()
    assert j.rerun[:, 0].tolist() == [False] * 5 + [True]
    assert j.state[5, 0] == judge.Cell.RERUN and j.state[0, 0] == judge.Cell.OK
    assert j.ratio[5, 0] == pytest.approx(10.0 / clean.median[0])
    # Untainted, the same figures put the low reading in the fleet's median and flag it.
    plain = judge.judge(values, hib)
    assert plain.median[0] != pytest.approx(clean.median[0]) and plain.flagged[5, 0]


def test_loaded_readings_that_leave_too_few_to_judge_are_all_rerun() -> None:
    """Four nodes, two flagged: the check cannot be judged, and the two must run again."""
    values = np.array([[100.0], [101.0], [99.0], [100.5]])
    tainted = np.array([[False], [True], [False], [True]])
    j = judge.judge(values, np.array([True]), tainted=tainted)
    assert j.family == 0 and not j.flagged.any()
    assert j.rerun[:, 0].tolist() == [False, True, False, True]
    assert j.state[:, 0].tolist() == [judge.Cell.UNJUDGED, judge.Cell.RERUN] * 2
    assert [r.unit for r in judge.rerun_units(j)] == [1, 3]
    assert math.isnan(judge.rerun_units(j)[0].worst_ratio)


def test_the_digest_names_the_taint_from_the_noise_facts(tmp_path: Path) -> None:
    """Typed from the guard's facts: foreign load, one flag per throttled GPU, the rest OTHER."""
    both = {**throttled(1), "foreign_cores": 0.9,
            "flags": ["under foreign load", "while gpu:1 was throttled"]}  # fmt: skip
    hooked = {**quiet(), "flags": ["a hook's reading said so"]}
    path = write_record(
        tmp_path,
        "n0",
        [
            result("test_a", 1.0),
            result("test_b", 1.0, noise=loaded(0.4)),
            result("test_c", 1.0, noise=both),
            result("test_d", 1.0, noise=hooked),
            result("test_e", 1.0, noise={**quiet(), "foreign_cores": 3.0}),  # unflagged
        ],
    )
    c = digests.digest(path)["columns"]
    taint = digests.Taint
    assert c["taint"] == [0, taint.FOREIGN_LOAD, taint.FOREIGN_LOAD | taint.GPU_THROTTLED,
                          taint.OTHER, 0]  # fmt: skip
    assert c["foreign_cores"] == [0.01, 0.4, 0.9, 0.01, 3.0]
    assert c["throttle"] == [0, 0, 0x40, 0, 0]


def test_a_malformed_noise_map_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet(tmp_path, 3)
    path = write_record(tmp_path, "node09", [result("test_triad[numpy]", 100.0)])
    data = json.loads(path.read_text(encoding="utf-8"))
    data["results"][0]["noise"]["flags"] = "x"
    path.write_text(json.dumps(data), encoding="utf-8")
    err = one_line_error(capsys, ["fleet", "report", str(tmp_path)])
    assert "noise.flags must be a list of text or flag objects" in err


def test_a_digest_of_an_older_version_is_rebuilt(tmp_path: Path) -> None:
    """A version-2 digest knows no taint: the record is read again, its digest replaced."""
    fleet(tmp_path, 6, slow={4: 0.6}, noisy={4: loaded()})
    (path,) = (tmp_path / "records" / "node04").rglob("*.json")
    digests.write_digest(path)
    old = json.loads(digests.digest_path(path).read_text())
    old["schema_version"] = 2
    for name in ("taint", "foreign_cores", "throttle"):
        del old["columns"][name]
    digests.digest_path(path).write_text(json.dumps(old))
    (m,) = aggregate.load(tmp_path, workers=1)
    row = [u.label for u in m.units].index("node04")
    assert m.tainted[row].all() and not np.delete(m.tainted, row, axis=0).any()
    again = json.loads(digests.digest_path(path).read_text())
    assert again["schema_version"] == digests.DIGEST_VERSION == 3
    assert again["columns"]["taint"] == [int(digests.Taint.FOREIGN_LOAD)] * 3


def test_the_page_marks_tainted_cells_and_lists_the_rerun(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    fleet(tmp_path, 8, slow={3: 0.6, 6: 0.5}, noisy={6: loaded()})
    assert main(["fleet", "report", str(tmp_path)]) == 1
    page = (tmp_path / "fleet.html").read_text()
    assert "grey, hatched: flagged by its own run, left out" in page
    assert "Rerun, not drained" in page and "node06" in page


# Confirmation: one run's flags are candidates; a rerun of them decides.


def rerun(
    directory: Path, i: int, factor: float = 1.0, facts: dict[str, object] | None = None,
    profile: str = "cpu-node", level: float = 100.0,
) -> None:  # fmt: skip
    """Node ``i`` of :func:`fleet` measured again into ``directory`` (its scatter kept)."""
    f = math.exp(SCATTER[i % len(SCATTER)]) * factor
    write_record(
        directory,
        f"node{i:02d}",
        [
            result("test_triad[numpy]", level * f, noise=facts),
            result("test_gemm[fp32]", 3 * level * f, noise=facts),
            result("test_latency[8B]", 5.0 / f, higher_is_better=False, noise=facts),
        ],
        profile=profile,
    )


def confirm_report(directory: Path, *extra: str) -> tuple[int, dict[str, object]]:
    return report(directory, "--confirm", str(directory / "confirm"), *extra)


def test_unconfirmed_flags_say_so_and_print_the_rerun(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --confirm: judged as before, but one run's flags, with the way to confirm them.

    The rerun command has the first run's own options, on the candidates only.
    """
    fleet(tmp_path, 8, slow={2: 0.7, 5: 0.6}, noisy={5: loaded()})
    asked = Options(tmp_path, ("suites/", "-k", "triad or gemm"), timeout_s=600,
                              launcher_args=("--partition=cpu",))  # fmt: skip
    write_json_atomic(tmp_path / "nodes" / MANIFEST, asked.to_dict())
    code, drain = report(tmp_path)
    out = capsys.readouterr().out
    assert code == 1 and drained(drain) == ["node02"] and drained(drain, "rerun") == ["node05"]
    c = drain["confirmation"]
    run_cmd = (
        f"perfsuite fleet run --nodelist node02,node05 --dir {tmp_path}/confirm --timeout 600 "
        "--launcher-arg=--partition=cpu -- suites/ -k 'triad or gemm'"
    )
    report_cmd = f"perfsuite fleet report {tmp_path} --confirm {tmp_path}/confirm"
    assert c == {"confirmed": False, "directories": [], "nodelist": ["node02", "node05"],  # type: ignore[comparison-overlap]
                 "confirm_again": [], "commands": [run_cmd, report_cmd]}  # fmt: skip
    assert "UNCONFIRMED: one run's flags" in out
    assert f"  {run_cmd}\n  {report_cmd}\n" in out
    assert out.rstrip().endswith(
        "NODES TO DRAIN (1 unconfirmed slow node, 1 to rerun, slow only at readings their "
        "runs flagged) of 8 nodes (exit 1)"
    )


def test_a_confirmed_node_is_drained(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fleet(tmp_path, 8, slow={5: 0.7})
    rerun(tmp_path / "confirm", 5, 0.72)
    code, drain = confirm_report(tmp_path)
    out = capsys.readouterr().out
    assert code == 1 and drained(drain) == ["node05"]
    assert drain["not_confirmed"] == [] and drain["rerun"] == []
    (entry,) = drain["drain"]  # type: ignore[misc]
    assert entry["confirmed"] is True
    assert entry["reason"].startswith("slow, confirmed by a rerun: test_")
    assert entry["rerun_record"].startswith(str(tmp_path / "confirm" / "records" / "node05"))
    for check in entry["checks"]:
        assert check["state"] == "confirmed"
        assert check["first"]["ratio"] == pytest.approx(0.7, rel=0.03)
        assert check["rerun"]["ratio"] == pytest.approx(0.72, rel=0.03)
        assert check["rerun"]["z"] < -5 and check["rerun"]["taint"] == []
    assert entry["judged_by"] == {
        "rerun": 1, "directory": str(tmp_path / "confirm"), "confirmations": 1,
    }  # fmt: skip
    # Drained as before; the next rerun, offered, would confirm it a second time.
    again = [f"perfsuite fleet run --nodelist node05 --dir {tmp_path}/confirm-2 -- PYTEST_ARGS",
             f"perfsuite fleet report {tmp_path} --confirm {tmp_path}/confirm "
             f"--confirm {tmp_path}/confirm-2"]  # fmt: skip
    assert drain["confirmation"] == {  # type: ignore[comparison-overlap]
        "confirmed": True, "directories": [str(tmp_path / "confirm")], "nodelist": ["node05"],
        "confirm_again": ["node05"], "commands": again,
    }  # fmt: skip
    assert "to confirm the 1 drained node once more" in out
    assert "SLOW, confirmed by the rerun, worst first:" in out
    assert "test_triad[numpy] 0.71x then 0.73x (z -" in out
    assert out.rstrip().endswith(
        "NODES TO DRAIN (1 node confirmed slow by a rerun) of 8 nodes (exit 1)"
    )


def test_an_unconfirmed_node_is_not_drained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Slow once, like its fleet in the rerun: listed as not confirmed, exit 0."""
    fleet(tmp_path, 8, slow={5: 0.7})
    rerun(tmp_path / "confirm", 5)
    code, drain = confirm_report(tmp_path)
    out = capsys.readouterr().out
    assert code == 0 and drained(drain) == [] and drained(drain, "not_confirmed") == ["node05"]
    (entry,) = drain["not_confirmed"]  # type: ignore[misc]
    assert entry["confirmed"] is False and entry["reason"].startswith("not confirmed: test_")
    assert {c["state"] for c in entry["checks"]} == {"cleared"}
    assert "NOT CONFIRMED, not drained" in out
    assert out.rstrip().endswith("FLEET OK (1 flagged but not confirmed) of 8 nodes (exit 0)")


def test_only_a_check_it_was_flagged_at_confirms_it(tmp_path: Path) -> None:
    """Slow at the triad in the first run, at the latency in the rerun: not the same check."""
    fleet(tmp_path, 8)
    write_record(
        tmp_path,
        "node08",
        [result("test_triad[numpy]", 60.0), result("test_gemm[fp32]", 300.0),
         result("test_latency[8B]", 5.0, higher_is_better=False)],
    )  # fmt: skip
    write_record(
        tmp_path / "confirm",
        "node08",
        [result("test_triad[numpy]", 100.0), result("test_gemm[fp32]", 300.0),
         result("test_latency[8B]", 8.0, higher_is_better=False)],
    )  # fmt: skip
    code, drain = confirm_report(tmp_path)
    assert code == 0 and drained(drain, "not_confirmed") == ["node08"]
    (check,) = drain["not_confirmed"][0]["checks"]  # type: ignore[index]
    assert check["check"].endswith("test_triad[numpy]") and check["state"] == "cleared"


def test_a_tainted_rerun_asks_for_another_and_never_drains(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet(tmp_path, 8, slow={5: 0.7})
    rerun(tmp_path / "confirm", 5, 0.7, loaded(1.3))
    code, drain = confirm_report(tmp_path)
    out = capsys.readouterr().out
    assert (
        code == outcome.EXIT_INCONCLUSIVE
        and drained(drain) == []
        and drained(drain, "rerun") == ["node05"]
    )
    (entry,) = drain["rerun"]  # type: ignore[misc]
    assert entry["reason"].startswith("rerun again: test_")
    assert "under foreign load (1.30 cores of other work or steal)" in entry["reason"]
    for check in entry["checks"]:
        assert check["state"] == "rerun" and check["rerun"]["taint"] == ["foreign-load"]
    assert drain["confirmation"]["nodelist"] == ["node05"]  # type: ignore[index]
    again = f"perfsuite fleet report {tmp_path} --confirm {tmp_path}/confirm --confirm {tmp_path}/confirm-2"
    assert drain["confirmation"]["commands"][1] == again  # type: ignore[index]
    assert "RERUN AGAIN, not drained" in out and "slow again, measured under foreign load" in out
    assert out.rstrip().endswith(
        "INCONCLUSIVE (no node confirmed, 1 to rerun again) of 8 nodes (exit 6)"
    )
    # A second rerun, quiet and slow again, settles what the first left to rerun.
    rerun(tmp_path / "confirm-2", 5, 0.7)
    code, drain = report(tmp_path, "--confirm", str(tmp_path / "confirm"),
                         "--confirm", str(tmp_path / "confirm-2"))  # fmt: skip
    assert code == 1 and drained(drain) == ["node05"]


def test_a_tainted_rerun_within_the_tolerance_clears() -> None:
    """Load only slows: a flagged rerun reading like its fleet's clears, as in the first run."""
    values = 100.0 * np.exp(np.array(SCATTER[:8]))[:, np.newaxis]
    values[5, 0] = 70.0
    hib = np.array([True])
    first = judge.judge(values, hib)
    again = np.full(values.shape, np.nan)
    again[5, 0] = 99.0
    c = judge.confirm(first, again, hib, tainted=np.isfinite(again))
    assert c.state[5, 0] == judge.Recheck.TAINTED and c.family == 0
    assert [(r.unit, r.verdict) for r in judge.rechecked_units(c)] == [(5, judge.Verdict.CLEARED)]


def test_a_candidate_missing_from_the_rerun_is_not_cleared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet(tmp_path, 8, slow={2: 0.7, 5: 0.65})
    rerun(tmp_path / "confirm", 2)
    code, drain = confirm_report(tmp_path)
    out = capsys.readouterr().out
    assert code == outcome.EXIT_INCONCLUSIVE
    assert drained(drain, "not_confirmed") == ["node02"] and drained(drain, "rerun") == ["node05"]
    (entry,) = drain["rerun"]  # type: ignore[misc]
    assert entry["reason"].startswith("rerun again: test_") and "not measured" in entry["reason"]
    assert entry["rerun_record"] == ""
    assert {c["state"] for c in entry["checks"]} == {"missing"}
    assert "not in the rerun" in out
    assert drain["confirmation"]["nodelist"] == ["node05"]  # type: ignore[index]
    assert out.rstrip().endswith(
        "INCONCLUSIVE (no node confirmed, 1 flagged but not confirmed, 1 to rerun again) of 8 "
        "nodes (exit 6)"
    )


def test_a_node_that_failed_in_the_rerun_stays_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every task of the rerun failed: no records there, and the node is drained as failed."""
    fleet(tmp_path, 8, slow={5: 0.7})
    hung = NodeStatus(0, "node05", "node05", failed="timed out after 60 s (killed)",
                      log=str(tmp_path / "confirm" / "nodes" / "task-0.log"))  # fmt: skip
    write_json_atomic(tmp_path / "confirm" / "nodes" / "task-0.json", hung.to_dict())
    code, drain = confirm_report(tmp_path)
    out = capsys.readouterr().out
    assert code == 1 and drained(drain) == ["node05"] and drain["rerun"] == []
    (entry,) = drain["drain"]  # type: ignore[misc]
    assert entry["reason"] == "failed in the rerun: timed out after 60 s (killed)"
    assert "FAILED in the rerun: task 0 (node05 on node05)" in out
    assert out.rstrip().endswith("NODES TO DRAIN (1 failed) of 8 nodes (exit 1)")


def test_a_report_of_the_fleet_never_reads_its_reruns(tmp_path: Path) -> None:
    """DIR/confirm and DIR/confirm-2 hold reruns: not the fleet's records (no duplicate)."""
    fleet(tmp_path, 6)
    rerun(tmp_path / "confirm", 1)
    rerun(tmp_path / "confirm-2", 1)
    (m,) = aggregate.load(tmp_path, workers=1)
    assert len(m.units) == 6


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("empty", "no run records and no fleet task statuses in it"),
        ("absent", "no such directory"),
        ("profile", "node 'node05' ran as profile 'gpu-b', but as 'cpu-node' in"),
        ("stranger", "node 'node42' has no record in"),
        ("itself", "that is the fleet's own run, not a rerun of it"),
    ],
)
def test_a_bad_rerun_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], setup: str, message: str
) -> None:
    fleet(tmp_path, 8, slow={5: 0.7})
    target = tmp_path / "confirm"
    if setup == "empty":
        target.mkdir()
    elif setup == "profile":
        rerun(target, 5, profile="gpu-b")
    elif setup == "stranger":
        rerun(target, 42)
    elif setup == "itself":
        target = tmp_path
    err = one_line_error(capsys, ["fleet", "report", str(tmp_path), "--confirm", str(target)])
    assert message in err


def test_confirm_judges_the_candidates_against_the_first_fleet() -> None:
    """The first run's median and spread place the rerun; Holm spans the candidate cells."""
    rng = np.random.default_rng(3)
    logs = rng.normal(0.0, 0.02, (40, 5))
    logs[7, 2] += math.log(0.7)
    logs[11, :] += math.log(0.75)
    hib = np.array([True, False, True, True, False])
    values = 100.0 * np.exp(np.where(hib, logs, -logs))
    first = judge.judge(values, hib)
    assert sorted(s.unit for s in judge.slow_units(first)) == [7, 11]
    again = values.copy()  # every node measured again, identically
    again[11] = 100.0 * np.exp(np.where(hib, 0.0, -0.0))  # node 11 now reads the fleet's level
    c = judge.confirm(first, again, hib)
    assert c.family == int(first.flagged.sum()) == 6
    assert c.confirmed.sum() == 1 and c.confirmed[7, 2]
    assert c.state[0, 0] == judge.Recheck.NONE  # not a candidate: never judged
    assert c.ratio[7, 2] == pytest.approx(first.ratio[7, 2])
    verdicts = {r.unit: r.verdict for r in judge.rechecked_units(c)}
    assert verdicts == {7: judge.Verdict.CONFIRMED, 11: judge.Verdict.CLEARED}
    with pytest.raises(ValueError, match="shape"):
        judge.confirm(first, again[:5], hib)


def two_reruns() -> tuple[judge.Judgement, np.ndarray, judge.Confirmation]:
    """Nodes 3, 5 and 7 flagged at check 0; the first rerun confirms 3 and 5, clears 7."""
    values = 100.0 * np.exp(np.array(SCATTER))[:, np.newaxis]
    values[[3, 5, 7], 0] = 70.0
    hib = np.array([True])
    first = judge.judge(values, hib)
    assert sorted(s.unit for s in judge.slow_units(first)) == [3, 5, 7]
    again = np.full(values.shape, np.nan)
    again[[3, 5, 7], 0] = (70.0, 70.0, 100.0)
    return first, hib, judge.confirm(first, again, hib)


def test_a_second_rerun_judges_only_the_candidates_left_standing() -> None:
    """Confirmed twice drains, confirmed then cleared does not.

    A cleared node stays cleared, however slow its later rerun, and a node the second rerun
    skipped keeps its verdict.
    """
    first, hib, once = two_reruns()
    assert judge.standing(once)[[3, 5, 7], 0].tolist() == [True, True, False]
    again = np.full(once.state.shape, np.nan)
    again[[3, 7], 0] = (71.0, 60.0)  # node 3 slow again; node 7 slow now; node 5 not rerun
    twice = judge.confirm(first, again, hib, before=once)
    assert twice.family == 1 and twice.reruns == 2
    got = {r.unit: (r.verdict, r.step, r.confirmations) for r in judge.rechecked_units(twice)}
    assert got == {
        3: (judge.Verdict.CONFIRMED, 2, 2),
        5: (judge.Verdict.CONFIRMED, 1, 1),
        7: (judge.Verdict.CLEARED, 1, 0),
    }
    again[[3, 5], 0] = (100.0, 100.0)
    cleared = judge.confirm(first, again, hib, before=once)
    assert {r.unit: (r.verdict, r.step) for r in judge.rechecked_units(cleared)} == {
        3: (judge.Verdict.CLEARED, 2), 5: (judge.Verdict.CLEARED, 2), 7: (judge.Verdict.CLEARED, 1)
    }  # fmt: skip


def test_a_second_rerun_names_the_rerun_that_decided(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Terminal, page and drain list say which rerun confirmed or cleared each candidate."""
    fleet(tmp_path, 8, slow={2: 0.7, 5: 0.65})
    rerun(tmp_path / "confirm", 2, 0.7)
    rerun(tmp_path / "confirm", 5, 0.65)
    rerun(tmp_path / "confirm-2", 2)  # like its fleet: not confirmed a second time
    rerun(tmp_path / "confirm-2", 5, 0.66)
    code, drain = report(tmp_path, "--confirm", str(tmp_path / "confirm"),
                         "--confirm", str(tmp_path / "confirm-2"))  # fmt: skip
    out = capsys.readouterr().out
    assert code == 1 and drained(drain) == ["node05"]
    assert drained(drain, "not_confirmed") == ["node02"]
    (slow,) = drain["drain"]  # type: ignore[misc]
    (cleared,) = drain["not_confirmed"]  # type: ignore[misc]
    assert slow["judged_by"] == {"rerun": 2, "directory": str(tmp_path / "confirm-2"),
                                 "confirmations": 2}  # fmt: skip
    assert cleared["judged_by"]["rerun"] == 2 and cleared["judged_by"]["confirmations"] == 1
    assert drain["confirmation"]["nodelist"] == []  # type: ignore[index]
    assert drain["confirmation"]["commands"] == []  # type: ignore[index]
    assert "rerun 2 (2 confirmations)" in out and "rerun 2 (after 1 confirmation)" in out
    assert f"{tmp_path}/confirm-2 (rerun 2), each rerun judging only" in out
    assert out.rstrip().endswith(
        "NODES TO DRAIN (1 node confirmed slow (1 by 2 reruns), 1 flagged but not confirmed) "
        "of 8 nodes (exit 1)"
    )
    pytest.importorskip("matplotlib")
    main(["fleet", "report", str(tmp_path), "--confirm", str(tmp_path / "confirm"),
          "--confirm", str(tmp_path / "confirm-2")])  # fmt: skip
    page = (tmp_path / "fleet.html").read_text()
    assert "<th>by</th>" in page and "rerun 2 (2 confirmations)" in page


# --nodelist: the candidates run again, and only they.


def test_nodelist_inside_an_allocation_is_srun_w(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "srun").write_text("#!/bin/sh\n")
    (tmp_path / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    env = {"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "64"}
    options = Options(tmp_path / "d", ("suites/",), nodelist=("n03", "n17"))
    p = fleet_run.plan(options, env)
    assert p.nodes == 2 and p.tasks == 2
    assert p.command[:8] == ("srun", "--kill-on-bad-exit=0", "--ntasks-per-node=1", "-N", "2",
                             "-n", "2", "-w") and p.command[8] == "n03,n17"  # fmt: skip


def test_nodelist_outside_one_is_in_the_batch_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sbatch").write_text("#!/bin/sh\n")
    (tmp_path / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    options = Options(tmp_path / "d", ("suites/",), nodelist=("n03", "n17"))
    p = fleet_run.plan(options)
    script = dict(p.files)[tmp_path / "d" / "nodes" / "fleet.sbatch"]
    assert p.nodes == 2 and "#SBATCH --nodes=2" in script
    assert "#SBATCH --nodelist=n03,n17" in script


def test_nodelist_picks_lines_of_the_hostfile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fleet_run, "_mpiexec", lambda: "mpiexec")
    (tmp_path / "hosts").write_text("n01.cluster:4\nn03.cluster\nn17.cluster # gpu\n")
    options = Options(tmp_path / "d", ("suites/",), hostfile=tmp_path / "hosts",
                                nodelist=("n17", "n03.cluster"))  # fmt: skip
    p = fleet_run.plan(options)
    picked = tmp_path / "d" / "nodes" / "hostfile"
    assert dict(p.files)[picked] == "n03.cluster\nn17.cluster\n"
    assert p.command[:7] == ("mpiexec", "-f", str(picked), "-ppn", "1", "-n", "2")
    bad = Options(tmp_path / "d", ("suites/",), hostfile=tmp_path / "hosts",
                            nodelist=("n99",))  # fmt: skip
    with pytest.raises(PerfsuiteError, match="n99 not in the hostfile"):
        fleet_run.plan(bad)


@pytest.mark.parametrize(
    ("nodelist", "message"),
    [("node[01-03]", "scontrol show hostnames"), ("n1,,n2", "separated by commas"),
     ("n1,n1", "names a host twice")],
)  # fmt: skip
def test_a_bad_nodelist_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nodelist: str, message: str
) -> None:
    err = one_line_error(capsys, run_args(tmp_path, "--nodelist", nodelist))
    assert message in err


def test_a_rerun_names_the_report_that_judges_it(tmp_path: Path) -> None:
    fleet(tmp_path, 3)
    status = NodeStatus(0, "node01", "node01", record="r.json")
    result_ = fleet_run.FleetRun(
        fleet_run.Plan("srun", 1, 1, ("srun",)), (status,), 1.0, tmp_path / "confirm"
    )
    last = fleet_run.summary_lines(result_)[-1]
    assert last.endswith(f"next: perfsuite fleet report {tmp_path} --confirm {tmp_path}/confirm")
    (tmp_path / "confirm").mkdir()
    assert fleet_run.next_report(tmp_path / "confirm-2") == [
        "perfsuite", "fleet", "report", str(tmp_path), "--confirm", str(tmp_path / "confirm"),
        "--confirm", str(tmp_path / "confirm-2"),
    ]  # fmt: skip
    assert fleet_run.next_report(tmp_path) == ["perfsuite", "fleet", "report", str(tmp_path)]


def test_the_page_shows_the_confirmation(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    fleet(tmp_path, 8, slow={2: 0.7, 5: 0.6})
    rerun(tmp_path / "confirm", 2)
    rerun(tmp_path / "confirm", 5, 0.6)
    assert main(["fleet", "report", str(tmp_path), "--confirm", str(tmp_path / "confirm")]) == 1
    page = (tmp_path / "fleet.html").read_text()
    assert "<h2>Confirmation by rerun</h2>" in page
    assert "Slow, confirmed by the rerun: drained" in page and "Not confirmed: not drained" in page
    assert "NODES TO DRAIN (1 node confirmed slow by a rerun, 1 flagged but not confirmed)" in page


def test_a_signal_nohup_ignored_stays_ignored_inside_a_fleet_command() -> None:
    """``nohup perfsuite fleet run``: closing the terminal must not interrupt the run."""
    import signal

    from perfsuite.measure import processes

    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with processes.interruptible():
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_IGN, signal.SIG_DFL)
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before)
