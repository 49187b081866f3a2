"""Bad input to ``perfsuite fleet run`` and ``fleet report``, table-driven (issue 63).

One row per case of the issue: the command, the exit status it must give, a fragment of
its one-line message (or of its output, for input it must survive), and the project it runs
in.  After each row: no traceback, no stored file changed, and a refused command created
nothing (no ``DIR/nodes/``, no ``drain.json``, no ``PWNED``).  Cases that need processes
(signals, hung children, a batch script run by a shell) are integration tests below the
table, one per case.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from test_fleet import SCATTER, fleet, result, write_record

from perfsuite import outcome
from perfsuite.cli import build_parser, main
from perfsuite.fleet import aggregate

ROOT = Path(__file__).resolve().parents[1]
Setup = Callable[[Path], None]
Check = Callable[[Path, str], None]
BAD_LABELS = ("node17\nnode03", "node17,node02")


@dataclass(frozen=True)
class Row:
    """One bad input: the command, its exit status, a fragment of what it says."""

    id: str
    args: tuple[str, ...]
    exit: int
    fragment: str
    setup: tuple[Setup, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    check: Check | None = None  # more to hold afterwards: (project, stdout + stderr)

    def __str__(self) -> str:
        return self.id


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
        d = aggregate.digest(record)
        for key, value in fields.items():
            if key in aggregate.COLUMNS:
                d["columns"][key] = [value] * len(d["columns"][key])
            else:
                d[key] = value
        # json.dumps writes NaN as a bare word, as a hostile file would hold it
        aggregate.digest_path(record).write_text(json.dumps(d))

    return setup


def digest_rebuilt(project: Path, output: str) -> None:
    """Every digest left in the fleet is well formed again (made anew from its record)."""
    for path in (project / "fleet" / "records").rglob("*.fleet.json"):
        aggregate.check_digest(json.loads(path.read_text()))


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
    monkeypatch.chdir(tmp_path)
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
