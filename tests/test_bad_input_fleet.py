"""Bad input to ``perfsuite fleet run`` and ``fleet report``, table-driven (issue 63).

One row per case of the issue: the command, the exit status it must give, a fragment of
its one-line message (or of its output, for input it must survive), and the project it runs
in.  After each row: no traceback, no stored file changed, and a refused command created
nothing (no ``DIR/nodes/``, no ``drain.json``, no ``PWNED``).  Cases that need processes
(signals, hung children, a batch script run by a shell) are integration tests below the
table, one per case.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
from test_bad_input import Row as BadInputRow
from test_bad_input import fifo
from test_fleet import SCATTER, fleet, result, write_record

from perfsuite.cli import build_parser, main
from perfsuite.fleet import digests
from perfsuite.judge import outcome

ROOT = Path(__file__).resolve().parents[1]
Setup = Callable[[Path], None]
Check = Callable[[Path, str], None]
BAD_LABELS = ("node17\nnode03", "node17,node02")


@dataclass(frozen=True)
class Row(BadInputRow):
    """The bad-input suite's row, with the environment it runs in and a check afterwards."""

    env: Mapping[str, str] = field(default_factory=dict)
    check: Check | None = None  # more to hold afterwards: (project, stdout + stderr)
    cwd: str = ""  # where it runs, relative to the project (made by the test)


# ----------------------------------------------------------------------------- projects


def healthy(root: Path) -> None:
    """A fleet of 4 healthy nodes in ``fleet/``."""
    fleet(root / "fleet", 4)


def slow_fleet(root: Path) -> None:
    """A fleet of 8 nodes in ``fleet/``, node07 at 60%."""
    fleet(root / "fleet", 8, slow={7: 0.6})


def labelled(label: str, key: str = "node_label") -> Setup:
    """A healthy fleet and one more record whose host facts give ``key`` = ``label``."""

    def setup(root: Path) -> None:
        healthy(root)
        path = write_record(root / "fleet", "node09", [result("test_triad[numpy]", 100.0)])
        data = json.loads(path.read_text())
        host = {"hostname": "node09", "node_label": "node09"}
        host[key] = label
        if key == "hostname":
            del host["node_label"]
        data["environment"]["host"] = host
        path.write_text(json.dumps(data))

    return setup


def status_labelled(label: str) -> Setup:
    """A healthy fleet and a failed task whose status gives ``label``."""

    def setup(root: Path) -> None:
        healthy(root)
        status = {"schema_version": 1, "task": 4, "label": label, "host": "node04",
                  "failed": "timed out"}  # fmt: skip
        (root / "fleet" / "nodes").mkdir(parents=True)
        (root / "fleet" / "nodes" / "task-4.json").write_text(json.dumps(status))

    return setup


def poisoned_digest(**fields: Any) -> Setup:
    """A healthy fleet whose node01 has a fresh (pinned) digest with ``fields`` changed."""

    def setup(root: Path) -> None:
        healthy(root)
        (record,) = (root / "fleet" / "records" / "node01").rglob("*[0-9].json")
        d = digests.digest(record)
        for key, value in fields.items():
            if key in digests.COLUMNS:
                d["columns"][key] = [value] * len(d["columns"][key])
            else:
                d[key] = value
        # json.dumps writes NaN as a bare word, as a hostile file would hold it
        digests.digest_path(record).write_text(json.dumps(d))

    return setup


def digest_rebuilt(project: Path, output: str) -> None:
    """Every digest left in the fleet is well formed again (made anew from its record)."""
    for path in (project / "fleet" / "records").rglob("*.fleet.json"):
        digests.check_digest(json.loads(path.read_text()))


def text(name: str, content: str | bytes) -> Setup:
    def setup(root: Path) -> None:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            (root / name).write_bytes(content)
        else:
            (root / name).write_text(content)

    return setup


def stand_in(*names: str) -> Setup:
    """Executables on PATH (``bin/``) that do nothing: Slurm is not what is tested."""

    def setup(root: Path) -> None:
        (root / "bin").mkdir(exist_ok=True)
        for name in names:
            (root / "bin" / name).write_text("#!/bin/sh\nexit 0\n")
            (root / "bin" / name).chmod(0o755)

    return setup


def rerun_of(*nodes: int, into: str = "fleet/confirm", slow: float = 0.6) -> Setup:
    """``nodes`` of the slow fleet measured again (slow again) into ``into``, a new run."""

    def setup(root: Path) -> None:
        for i in nodes:
            f = math.exp(SCATTER[i % len(SCATTER)]) * slow
            results = [
                result("test_triad[numpy]", 100.0 * f),
                result("test_gemm[fp32]", 300.0 * f),
                result("test_latency[8B]", 5.0 / f, higher_is_better=False),
            ]
            write_record(root / into, f"node{i:02d}", results)

    return setup


def copy_of(source: str, target: str) -> Setup:
    def setup(root: Path) -> None:
        shutil.copytree(root / source, root / target)

    return setup


def gpu_fleet(root: Path) -> None:
    """Six GPU nodes of 4 GPUs; node gpu-node5 has 3 GPUs at 60%."""
    for i in range(6):
        gpus: list[dict[str, object]] = [
            {"index": g, "uuid": f"GPU-{i}{g}", "name": "NVIDIA H100"} for g in range(4)
        ]
        results = [
            result(
                f"test_stream[torch-gpu:{g}-copy]",
                3000.0
                * math.exp(SCATTER[(4 * i + g) % len(SCATTER)])
                * (0.6 if i == 5 and g else 1),
            )
            for g in range(4)
        ]
        write_record(root / "fleet", f"gpu-node{i}", results, profile="h100-sxm", gpus=gpus)


def nothing_created(*names: str) -> Check:
    """Nothing named ``names`` (relative to the project) exists afterwards."""

    def check(project: Path, output: str) -> None:
        made = [n for n in names if (project / n).exists() or (project / n).is_symlink()]
        assert not made, f"a refused command created {made}"
        assert not list(project.rglob("PWNED"))

    return check


def ran_on(hostfile: str) -> Setup:
    """A healthy fleet whose fleet-run.json names ``hostfile`` as the hosts it ran on."""

    def setup(root: Path) -> None:
        healthy(root)
        (root / hostfile).write_text("node00\nnode01\nnode02\nnode03\n")
        manifest = {"schema_version": 1, "pytest_args": ["suites/"], "tasks_per_node": 1,
                    "hostfile": str(root / hostfile), "timeout_s": 60, "launcher_args": [],
                    "nodelist": []}  # fmt: skip
        (root / "fleet" / "nodes").mkdir(parents=True)
        (root / "fleet" / "nodes" / "fleet-run.json").write_text(json.dumps(manifest))

    return setup


def fleet_in(name: str) -> Setup:
    def setup(root: Path) -> None:
        fleet(root / name, 4)

    return setup


def all_failed(root: Path) -> None:
    """A fleet run of two tasks, both failed: no record at all."""
    (root / "fleet" / "nodes").mkdir(parents=True)
    for task, host in enumerate(("node03", "node04")):
        status = {"schema_version": 1, "task": task, "label": host, "host": host,
                  "failed": "timed out after 60 s (killed)"}  # fmt: skip
        (root / "fleet" / "nodes" / f"task-{task}.json").write_text(json.dumps(status))


def both_drained(project: Path, output: str) -> None:
    drain = json.loads((project / "fleet" / "drain.json").read_text())
    assert [e["node"] for e in drain["drain"]] == ["node03", "node04"], drain
    assert "FAILED: task 0 (node03 on node03)" in output, output


def two_tasks_a_host(root: Path) -> None:
    """Six hosts, two tasks each (labels host-t0, host-t1); both tasks of node05 at 60%."""
    for i in range(6):
        for t in range(2):
            f = math.exp(SCATTER[(2 * i + t) % len(SCATTER)]) * (0.6 if i == 5 else 1.0)
            results = [
                result("test_triad[numpy]", 100.0 * f),
                result("test_gemm[fp32]", 300.0 * f),
                result("test_latency[8B]", 5.0 / f, higher_is_better=False),
            ]
            write_record(root / "fleet", f"node{i:02d}-t{t}", results)


def drained_by_host(project: Path, output: str) -> None:
    """drain.json's ``node`` is the host scontrol knows; ``label`` keeps the task's."""
    drain = json.loads((project / "fleet" / "drain.json").read_text())
    assert {e["node"] for e in drain["drain"]} == {"node05"}, drain["drain"]
    assert sorted(e["label"] for e in drain["drain"]) == ["node05-t0", "node05-t1"]
    assert drain["confirmation"]["nodelist"] == ["node05"]
    assert "6 nodes (12 tasks) with records" in output, output


def one_confirmation(project: Path, output: str) -> None:
    drain = json.loads((project / "fleet" / "drain.json").read_text())
    assert len(drain["confirmation"]["directories"]) == 1, drain["confirmation"]


USAGE, OK, SLOW = outcome.EXIT_USAGE, outcome.EXIT_OK, outcome.EXIT_REGRESSED
NOT_A_HOST = "is not a host name"
NO_DRAIN = nothing_created("fleet/drain.json", "fleet/fleet.html")
SLURM_OFF = {"SLURM_JOB_ID": ""}
SECONDS = "expected a number of seconds above 0 and at most 604800"
RUN = ("fleet", "run", "--dir", "fleet")
REPORT = ("fleet", "report", "fleet", "--html", "")

ROWS = [
    # 1: a node label is validated where it is read; nothing else reaches drain.json.
    Row("case01-record-label-newline", ("fleet", "report", "fleet"), USAGE, NOT_A_HOST,
        (labelled("node17\nnode03"),), check=NO_DRAIN),
    Row("case01-record-hostname-comma", ("fleet", "report", "fleet"), USAGE, NOT_A_HOST,
        (labelled("node17,node02", key="hostname"),), check=NO_DRAIN),
    Row("case01-record-label-escape", ("fleet", "report", "fleet"), USAGE, NOT_A_HOST,
        (labelled("\x1b[31mnode9"),), check=NO_DRAIN),
    Row("case01-record-label-markup", ("fleet", "report", "fleet"), USAGE, NOT_A_HOST,
        (labelled("<b>node9</b>"),), check=NO_DRAIN),
    Row("case01-record-label-list", ("fleet", "report", "fleet"), USAGE, NOT_A_HOST,
        (labelled(["node9"]),), check=NO_DRAIN),  # type: ignore[arg-type]
    Row("case01-status-label-newline", ("fleet", "report", "fleet"), USAGE, NOT_A_HOST,
        (status_labelled("node17\nnode03"),), check=NO_DRAIN),
    Row("case01-digest-label-rebuilt", REPORT, OK, "FLEET OK",
        (poisoned_digest(label="node17\nnode03"),), check=digest_rebuilt),
    Row("case01-confirm-label-comma", (*REPORT, "--confirm", "fleet/confirm"), USAGE,
        NOT_A_HOST, (slow_fleet, labelled("node07,node02"), rerun_of(7)), check=NO_DRAIN),
    Row("case01-hostfile-comma", (*RUN, "--hostfile", "hosts", "--", "x"), USAGE, NOT_A_HOST,
        (text("hosts", "node01\nnode17,node02\n"),), check=nothing_created("fleet")),
    Row("case01-hostfile-vertical-tab", (*RUN, "--hostfile", "hosts", "--", "x"), USAGE,
        NOT_A_HOST, (text("hosts", "node17\x0bnode03\n"),), check=nothing_created("fleet")),
    Row("case01-nodelist-newline", (*RUN, "--nodelist", "node17\nnode03", "--", "x"), USAGE,
        NOT_A_HOST, check=nothing_created("fleet")),
    Row("case01-slurm-job-id", (*RUN, "--", "x"), USAGE, "is not a Slurm job id",
        (stand_in("srun"),), {"SLURM_JOB_ID": "42\nrm"}, nothing_created("fleet")),
    Row("case01-slurm-node-count", (*RUN, "--", "x"), USAGE, "is not a node count",
        (stand_in("srun"),), {"SLURM_JOB_ID": "42", "SLURM_JOB_NUM_NODES": "2(x2)"},
        nothing_created("fleet")),
    # 2: a newline in a path would reach the batch script: refused, nothing made.
    Row("case02-dir-newline", ("fleet", "run", "--nodes", "2", "--dir", "out\ntouch PWNED #",
        "--", "x"), USAGE, "line break or control character", (stand_in("sbatch", "sinfo"),),
        SLURM_OFF, nothing_created("out\ntouch PWNED #", "out")),
    Row("case02-launcher-arg-newline", (*RUN, "--nodes", "2", "--launcher-arg",
        "-p\ntouch PWNED", "--", "x"), USAGE, "line break or control character",
        (stand_in("sbatch", "sinfo"),), SLURM_OFF, nothing_created("fleet")),
    # 3: an empty path is a usage error; a usage error leaves no DIR/nodes/.
    Row("case03-run-dir-empty", ("fleet", "run", "--dir", "", "--", "x"), USAGE,
        "an empty path", check=nothing_created("nodes")),
    Row("case03-report-dir-empty", ("fleet", "report", ""), USAGE, "an empty path",
        check=nothing_created("drain.json", "fleet.html")),
    Row("case03-confirm-empty", ("fleet", "report", "fleet", "--confirm", ""), USAGE,
        "an empty path", (healthy,), check=NO_DRAIN),
    Row("case03-hostfile-empty", (*RUN, "--hostfile", "", "--", "x"), USAGE, "an empty path",
        check=nothing_created("fleet")),
    Row("case03-drain-empty", ("fleet", "report", "fleet", "--drain", ""), USAGE,
        "an empty path", (healthy,), check=NO_DRAIN),
    Row("case03-nodelist-empty", (*RUN, "--nodelist", "", "--", "x"), USAGE, "--nodelist ''",
        check=nothing_created("fleet")),
    Row("case03-usage-error-leaves-no-nodes", (*RUN, "--hostfile", "hosts", "--nodes", "3",
        "--", "x"), USAGE, "names only 2 hosts", (text("hosts", "a\nb\n"),),
        check=nothing_created("fleet")),
    # 4: an output over an input, or over the other output.
    Row("case04-drain-over-record", ("fleet", "report", "fleet", "--drain",
        "fleet/records/node01/cpu-node/20261128T000000000Z-node01.json"), USAGE,
        "an input of this report", (healthy,), check=NO_DRAIN),
    Row("case04-html-over-record", ("fleet", "report", "fleet", "--html",
        "fleet/records/node01/cpu-node/20261128T000000000Z-node01.json"), USAGE,
        "an input of this report", (healthy,), check=NO_DRAIN),
    Row("case04-drain-read-back-as-record", ("fleet", "report", "fleet", "--drain",
        "fleet/today.json"), USAGE, "where the report reads every .json file", (healthy,),
        check=nothing_created("fleet/today.json", "fleet/drain.json")),
    Row("case04-drain-linked-to-record", ("fleet", "report", "fleet", "--drain", "out.json"),
        USAGE, "an input of this report",
        (healthy, lambda root: (root / "out.json").symlink_to(next((root / "fleet").rglob(
            "*node02.json")))), check=NO_DRAIN),
    Row("case04-drain-is-html", ("fleet", "report", "fleet", "--drain", "x.out", "--html",
        "x.out"), USAGE, "name the same file", (healthy,), check=nothing_created("x.out")),
    Row("case04-drain-into-confirm", (*REPORT, "--confirm", "fleet/confirm", "--drain",
        "fleet/confirm/drain.json"), USAGE, "where the report reads every .json file",
        (slow_fleet, rerun_of(7)), check=nothing_created("fleet/confirm/drain.json")),
    # 14: a malformed digest is a cache: made again from its record, never a traceback.
    Row("case14-digest-gpus-string", REPORT, OK, "FLEET OK", (poisoned_digest(gpus="GPU-0"),),
        check=digest_rebuilt),
    Row("case14-digest-int-id", REPORT, OK, "FLEET OK", (poisoned_digest(id=7),),
        check=digest_rebuilt),
    Row("case14-digest-huge-floor", REPORT, OK, "FLEET OK", (poisoned_digest(floor=10**30),),
        check=digest_rebuilt),
    Row("case14-digest-nan-median", REPORT, OK, "FLEET OK",
        (poisoned_digest(median=float("nan")),), check=digest_rebuilt),
    Row("case14-digest-empty-label", REPORT, OK, "FLEET OK", (poisoned_digest(label=""),),
        check=digest_rebuilt),
    Row("case14-digest-list-label", REPORT, OK, "FLEET OK", (poisoned_digest(label=["n"]),),
        check=digest_rebuilt),
    # 15: the fleet's own records are no rerun; one rerun named twice counts once.
    Row("case15-confirm-own-records", (*REPORT, "--confirm", "fleet/records"), USAGE,
        "already read from", (slow_fleet,), check=NO_DRAIN),
    Row("case15-confirm-copy-of-records", (*REPORT, "--confirm", "copy"), USAGE,
        "already read from", (slow_fleet, copy_of("fleet/records", "copy")), check=NO_DRAIN),
    Row("case15-confirm-named-twice", (*REPORT, "--confirm", "fleet/confirm", "--confirm",
        "fleet/../fleet/confirm"), SLOW, "1 node confirmed slow by a rerun",
        (slow_fleet, rerun_of(7)), check=one_confirmation),
    # 16: slow nodes are counted as nodes, as the candidate list counts them.
    Row("case16-three-slow-gpus-one-node", REPORT, SLOW, "(1 unconfirmed slow node) of",
        (gpu_fleet,)),
    # 17: timeouts: finite seconds above 0, at most a week.
    *[Row(f"case17-timeout-{v}", (*RUN, "--timeout", v, "--", "x"), USAGE, SECONDS,
          check=nothing_created("fleet")) for v in ("nan", "inf", "1e400", "0", "-1", "x")],
    *[Row(f"case17-launch-timeout-{v}", (*RUN, "--launch-timeout", v, "--", "x"), USAGE,
          SECONDS, check=nothing_created("fleet")) for v in ("nan", "inf", "1e400", "0", "-1")],
    # 18: a hostfile that is not text.
    Row("case18-binary-hostfile", (*RUN, "--hostfile", "hosts", "--", "x"), USAGE,
        "not UTF-8 text", (text("hosts", b"\xff\xfe\x00\x81node\n"),),
        check=nothing_created("fleet")),
    # The review of the first round (REVIEW1.md).
    # D1: both outputs are checked before either is written.
    Row("review-D1-html-fifo", ("fleet", "report", "fleet", "--html", "page.html"), USAGE,
        "is a FIFO, not a regular file", (healthy, fifo("page.html")), check=NO_DRAIN),
    Row("review-D1-html-char-device", ("fleet", "report", "fleet", "--html", "/dev/null"),
        USAGE, "is a character device, not a regular file", (healthy,), check=NO_DRAIN),
    Row("review-D1-html-parent-is-a-file", ("fleet", "report", "fleet", "--html",
        "afile/x.html"), USAGE, "afile is a file, not a folder", (healthy, text("afile", "")),
        check=NO_DRAIN),
    Row("review-D1-html-in-proc", ("fleet", "report", "fleet", "--html", "/proc/version"),
        USAGE, "files cannot be created in /proc", (healthy,), check=NO_DRAIN),
    Row("review-D1-drain-fifo", ("fleet", "report", "fleet", "--drain", "d.out"), USAGE,
        "is a FIFO, not a regular file", (healthy, fifo("d.out")), check=NO_DRAIN),
    # D2: the hostfile the fleet ran on is an input (the rerun command names it).
    Row("review-D2-drain-over-hostfile", (*REPORT, "--drain", "hosts"), USAGE,
        "an input of this report", (ran_on("hosts"),), check=NO_DRAIN),
    # D3: a relative --dir is checked as the absolute path it becomes.
    Row("review-D3-cwd-newline", ("fleet", "run", "--nodes", "2", "--dir", "fl", "--", "x"),
        USAGE, "holds a line break or control character (the current directory's)",
        (stand_in("sbatch", "sinfo"), text("c\n#SBATCH --wrap=touch PWNED\n$(touch PWNED)/.keep",
        "")), SLURM_OFF, nothing_created("c\n#SBATCH --wrap=touch PWNED\n$(touch PWNED)/fl"),
        cwd="c\n#SBATCH --wrap=touch PWNED\n$(touch PWNED)"),
    # D4: the report's paths are checked as fleet run's are.
    Row("review-D4-report-dir-escape", ("fleet", "report", "fl\x1b[2Jeet"), USAGE,
        "line break or control character", (fleet_in("fl\x1b[2Jeet"),),
        check=nothing_created("fl\x1b[2Jeet/drain.json", "fl\x1b[2Jeet/fleet.html")),
    Row("review-D4-report-html-escape", (*REPORT[:3], "--html", "p\x1b[2J.html"), USAGE,
        "line break or control character", (healthy,),
        check=nothing_created("p\x1b[2J.html", "fleet/drain.json")),
    # D5: a fleet whose every task failed has nodes to drain, not "no records".
    Row("review-D5-every-task-failed", REPORT, SLOW, "NODES TO DRAIN (2 failed) of 2 nodes",
        (all_failed,), check=both_drained),
    # D6: a host is named once; --tasks-per-node sets its tasks.
    Row("review-D6-hostfile-host-twice", (*RUN, "--hostfile", "hosts", "--", "x"), USAGE,
        "line 2: names a host twice", (text("hosts", "localhost\nlocalhost\n"),),
        check=nothing_created("fleet")),
    Row("review-D6-hostfile-short-name-twice", (*RUN, "--hostfile", "hosts", "--", "x"),
        USAGE, "line 3: names a host twice", (text("hosts", "n1:4\n# x\nn1.cluster:4\n"),),
        check=nothing_created("fleet")),
    # D7: a node is its host: the tasks of one host are one node to drain.
    Row("review-D7-tasks-of-one-host", REPORT, SLOW, "(1 unconfirmed slow node) of 6 nodes",
        (two_tasks_a_host,), check=drained_by_host),
    # D16: sbatch expands '%' in --output=, and strips backslashes.
    Row("review-D16-dir-percent", ("fleet", "run", "--nodes", "2", "--dir", "out%j", "--",
        "x"), USAGE, "sbatch reads '%' in its --output file as a pattern",
        (stand_in("sbatch", "sinfo"),), SLURM_OFF, nothing_created("out%j", "out")),
    Row("review-D16-dir-backslash", ("fleet", "run", "--nodes", "2", "--dir", "out\\x", "--",
        "x"), USAGE, "sbatch reads '%' in its --output file as a pattern",
        (stand_in("sbatch", "sinfo"),), SLURM_OFF, nothing_created("out\\x", "outx")),
]  # fmt: skip


def _hashes(root: Path) -> dict[Path, str]:
    return {
        p.relative_to(root): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file() and not p.name.endswith(".fleet.json")  # digests: a cache
    }


@pytest.mark.parametrize("row", ROWS, ids=str)
def test_fleet_refuses_bad_input(
    row: Row, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for setup in row.setup:
        setup(tmp_path)
    monkeypatch.chdir(tmp_path / row.cwd)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    for name, value in row.env.items():
        monkeypatch.setenv(name, value)
    before = _hashes(tmp_path)
    try:
        status = main(list(row.args))
    except SystemExit as exc:  # argparse's own refusals
        status = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert status == row.exit, out + err
    assert row.fragment in (err if status == USAGE else out), out + err
    assert "Traceback" not in out + err
    if status == USAGE:  # one line (argparse's refusals: after its usage lines)
        said = [line for line in err.splitlines() if "error:" in line]
        assert len(said) == 1 and row.fragment in said[0], err
        assert err.startswith("usage:") or err.count("\n") == 1, err
    after = _hashes(tmp_path)
    assert not [p for p, h in before.items() if after.get(p) != h], "a stored file changed"
    if row.check is not None:
        row.check(tmp_path, out + err)


@pytest.mark.parametrize("label", BAD_LABELS)
def test_case01_bad_labels_never_reach_drain_json(
    label: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through a record, a task status and a digest: no drain.json names the label."""
    for n, setup in enumerate((labelled(label), status_labelled(label))):
        project = tmp_path / str(n)
        setup(project)
        assert main(["fleet", "report", str(project / "fleet")]) == USAGE
        assert not (project / "fleet" / "drain.json").exists()
    project = tmp_path / "digest"
    poisoned_digest(label=label, host=label)(project)
    assert main([*REPORT[:2], str(project / "fleet"), "--html", ""]) == OK
    drain = (project / "fleet" / "drain.json").read_text()
    assert "node17" not in drain and "node17" not in json.dumps(json.loads(drain))


def test_case01_a_hostile_manifest_is_not_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fleet-run.json whose --nodelist holds a line break is treated as absent."""
    slow_fleet(tmp_path)
    manifest = {"schema_version": 1, "pytest_args": ["suites/"], "tasks_per_node": 1,
                "hostfile": None, "timeout_s": 60, "launcher_args": [],
                "nodelist": ["node17\nnode03"]}  # fmt: skip
    (tmp_path / "fleet" / "nodes").mkdir(parents=True)
    (tmp_path / "fleet" / "nodes" / "fleet-run.json").write_text(json.dumps(manifest))
    assert main([*REPORT[:2], str(tmp_path / "fleet"), "--html", ""]) == SLOW
    out = capsys.readouterr().out
    assert "node17" not in out and "-- PYTEST_ARGS" in out


def test_every_fleet_argument_has_help_with_its_default() -> None:
    """``fleet``, ``fleet run`` and ``fleet report``: help on each, a default where optional."""
    parser = build_parser()
    fleet_parser = _subparser(parser, "fleet")
    assert fleet_parser.description
    for name in ("run", "report"):
        sub = _subparser(fleet_parser, name)
        assert sub.description and "Exit status" in sub.description
        for action in sub._actions:
            if action.dest == "help":
                continue
            assert action.help, f"fleet {name} {action.dest}: no help"
            optional = bool(action.option_strings) and not action.required
            assert not optional or "default" in action.help, f"{action.dest}: no default"


def _subparser(parser: Any, name: str) -> Any:
    for action in parser._actions:
        if getattr(action, "choices", None) and name in action.choices:
            return action.choices[name]
    raise AssertionError(name)


# ----------------------------------------------------------------------------- processes

HOSTILE_DIRS = ("out $(touch PWNED)", "out`touch PWNED`", "out'; touch PWNED; '",
                'out"; touch PWNED; "', "out;touch PWNED #", "out && touch PWNED")  # fmt: skip
SBATCH = """#!/bin/bash
# A stand-in sbatch: runs the script with bash, its output where --output says.
out=""
for a in "$@"; do case "$a" in --output=*) out="${a#--output=}";; esac; script="$a"; done
echo 4242
bash -n "$script" || exit 9
bash "$script" > "$out" 2>&1
"""
SRUN = """#!/bin/bash
# A stand-in srun: keeps its arguments, NUL-separated, and starts nothing.
printf '%s\\0' "$@" > "$SRUN_ARGS"
"""


def _executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


@pytest.mark.integration
@pytest.mark.parametrize("hostile", HOSTILE_DIRS)
def test_case02_the_batch_script_quotes_every_value_for_the_shell(
    hostile: str, tmp_path: Path
) -> None:
    """The generated script, run by bash, gives srun the exact values, and runs nothing else.

    sbatch and srun are stand-ins (Slurm is not what is tested): sbatch runs the script
    with bash, after ``bash -n``; srun keeps its arguments.
    """
    _executable(tmp_path / "bin" / "sbatch", SBATCH)
    _executable(tmp_path / "bin" / "srun", SRUN)
    _executable(tmp_path / "bin" / "sinfo", "#!/bin/sh\nexit 1\n")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(ROOT), "SRUN_ARGS": str(tmp_path / "srun.args")}  # fmt: skip
    env.pop("SLURM_JOB_ID", None)
    work = tmp_path / "work $(touch PWNED)"
    work.mkdir()
    args = ["--launcher-arg", "--comment=$(touch PWNED)", "--", "-k", "a;touch PWNED", "x`y`"]
    command = [sys.executable, "-m", "perfsuite", "fleet", "run", "--nodes", "2", "--dir",
               hostile, "--timeout", "60", *args]  # fmt: skip
    ran = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == outcome.EXIT_REGRESSED, ran.stdout + ran.stderr  # no task ran
    assert not list(tmp_path.rglob("PWNED")), "the script ran a command from a value"
    script = (work / hostile / "nodes" / "fleet.sbatch").read_text()
    assert all(hostile not in line for line in script.splitlines() if line.startswith("#"))
    subprocess.run(["bash", "-n", str(work / hostile / "nodes" / "fleet.sbatch")], check=True)
    srun = (tmp_path / "srun.args").read_text().split("\0")[:-1]
    assert srun[srun.index("--dir") + 1] == str(work / hostile)
    assert "--comment=$(touch PWNED)" in srun
    assert srun[-3:] == ["-k", "a;touch PWNED", "x`y`"]


HANG = """
import os, pathlib, time

def test_hang():
    pathlib.Path(os.environ["FLEET_HANG_MARK"]).write_text(str(os.getpid()))
    time.sleep(600)
"""


def _marked(mark: str) -> list[psutil.Process]:
    """The live processes whose environment carries ``mark``: all a test started."""
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("FLEET_TEST_MARK") == mark and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.Error:
            continue
    return found


def _wait_for(condition: Callable[[], bool], seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


def _hung_fleet(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], str, Path, Path]:
    """``fleet run`` through mpiexec on this host, its one task's pytest hung (a sleep)."""
    mpiexec = Path(sys.executable).with_name("mpiexec")
    if not mpiexec.exists() and not shutil.which("mpiexec"):
        pytest.skip("no mpiexec (pip install 'perfsuite[mpi]')")
    (tmp_path / "hang").mkdir()
    (tmp_path / "hang" / "test_hang.py").write_text(HANG)
    (tmp_path / "hosts").write_text("localhost\n")
    (tmp_path / "tmp").mkdir()
    mark = uuid.uuid4().hex
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FLEET_TEST_MARK": mark,
           "FLEET_HANG_MARK": str(tmp_path / "started"), "TMPDIR": str(tmp_path / "tmp")}  # fmt: skip
    env.pop("SLURM_JOB_ID", None)
    directory = tmp_path / "fleet"
    command = [sys.executable, "-m", "perfsuite", "fleet", "run", "--dir", str(directory),
               "--hostfile", str(tmp_path / "hosts"), *extra, "--",
               str(tmp_path / "hang" / "test_hang.py"), "-q", "-p", "no:cacheprovider"]  # fmt: skip
    # As a terminal's job: a test run under nohup must not pass its ignored SIGHUP on.
    proc = subprocess.Popen(command, cwd=tmp_path, env=env, text=True, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            preexec_fn=_signals_as_at_a_terminal)  # fmt: skip
    return proc, mark, directory, tmp_path / "tmp"


def _signals_as_at_a_terminal() -> None:
    """SIGINT and SIGHUP at their defaults in the child, whatever the test run ignores."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _cleanup(proc: subprocess.Popen[str], mark: str) -> None:
    """Whatever a failed test left: ended, so that it fails alone."""
    for p in _marked(mark):
        with contextlib.suppress(psutil.Error):
            p.kill()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def _nothing_left(mark: str, directory: Path, tmp: Path, before: int) -> str:
    """Assert no process and no temporary file is left; the counts, for the record."""
    _wait_for(lambda: not _marked(mark), 30)
    left = _marked(mark)
    assert not left, f"left running: {[(p.pid, p.name(), p.cmdline()[:4]) for p in left]}"
    leftover = [p for p in (*tmp.rglob("*"), *directory.rglob("*.tmp"), *directory.rglob(".*"))]
    assert not leftover, f"temporary files left: {leftover}"
    status = json.loads((directory / "nodes" / "task-0.json").read_text())
    assert status["failed"], status
    return f"processes before {before}, after {len(left)}; temporary files after {len(leftover)}"


@pytest.mark.smoke
@pytest.mark.integration
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=str)
def test_case06_a_signal_ends_every_process_fleet_run_started(
    sig: signal.Signals, tmp_path: Path
) -> None:
    proc, mark, directory, tmp = _hung_fleet(tmp_path, "--timeout", "600")
    try:
        assert _wait_for((tmp_path / "started").exists, 240), "the task's pytest never started"
        before = len(_marked(mark))
        assert before >= 4  # perfsuite, mpiexec, its proxy, the task, its pytest
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == outcome.EXIT_INTERRUPTED, out
        assert f"interrupted ({sig.name})" in out and "Traceback" not in out, out
        print(f"case06 {sig.name}: {_nothing_left(mark, directory, tmp, before)}")
    finally:
        _cleanup(proc, mark)


@pytest.mark.integration
def test_case06_the_launch_timeout_ends_every_process_fleet_run_started(tmp_path: Path) -> None:
    proc, mark, directory, tmp = _hung_fleet(tmp_path, "--timeout", "600", "--launch-timeout", "45")
    try:
        assert _wait_for((tmp_path / "started").exists, 40), "the task's pytest never started"
        before = len(_marked(mark))
        assert before >= 4
        out, _ = proc.communicate(timeout=180)
        assert proc.returncode == outcome.EXIT_REGRESSED, out
        assert "still running after 45 s, ended with all it started" in out, out
        print(f"case06 launch timeout: {_nothing_left(mark, directory, tmp, before)}")
    finally:
        _cleanup(proc, mark)
