"""Starting the suite on every node of a fleet, and collecting what became of each task.

Three launchers, chosen by where perfsuite runs:

* inside a Slurm allocation (``SLURM_JOB_ID`` set): ``srun -N N --ntasks-per-node T``;
* on a Slurm cluster outside one: ``sbatch --wait`` with a generated script around that
  ``srun`` (the script and the batch output are kept in ``DIR/nodes/``);
* with ``--hostfile`` (no Slurm): ``mpiexec -f HOSTFILE -ppn T -n N*T`` (MPICH's hydra).

``--nodelist`` runs on the named hosts only (``srun -w``, ``#SBATCH --nodelist``, or the
hostfile's lines for them): how the nodes a report flagged are measured again to confirm
them.  What each fleet run was asked is kept in ``DIR/nodes/fleet-run.json``, so that the
report can print the exact command that reruns its flagged nodes.

Each task runs :mod:`perfsuite.fleet.node`, which keeps its own timeout and always exits 0,
so one failed node never stops the others; the launcher as a whole is bounded too.  A task
that says it wrote its record, where the record never arrives here, means the directory is
not shared: that is an error naming the task and its host.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite import outcome
from perfsuite.errors import PerfsuiteError
from perfsuite.fleet.aggregate import CONFIRM_DIR, NODES_DIR, is_confirm_dir
from perfsuite.fleet.node import RECORDS_DIR, REPORT_PREFIX
from perfsuite.fleet.status import NodeStatus, log_path, status_path, where
from perfsuite.storage import check_writable, write_json_atomic, write_text_atomic

NODE_MODULE = "perfsuite.fleet.node"
# Seconds the launcher gets beyond a node's timeout by default (queueing, start-up).
LAUNCH_GRACE_S = 300.0
DEFAULT_TIMEOUT_S = 1800.0
# What a fleet run was asked, kept beside the tasks' statuses.
MANIFEST = "fleet-run.json"
MANIFEST_VERSION = 1


class FleetError(PerfsuiteError):
    """A fleet that cannot be started, or whose directory is not shared (the message says)."""


@dataclass(frozen=True)
class Options:
    """What ``perfsuite fleet run`` was asked."""

    directory: Path
    pytest_args: tuple[str, ...]
    nodes: int | None = None
    tasks_per_node: int = 1
    hostfile: Path | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    launch_timeout_s: float | None = None
    launcher_args: tuple[str, ...] = ()
    nodelist: tuple[str, ...] = ()  # only these hosts (short or full names); () for all

    def to_dict(self) -> dict[str, Any]:
        """What ``DIR/nodes/fleet-run.json`` keeps: enough to run the same on other nodes."""
        return {
            "schema_version": MANIFEST_VERSION,
            "pytest_args": list(self.pytest_args),
            "tasks_per_node": self.tasks_per_node,
            "hostfile": None if self.hostfile is None else str(self.hostfile.absolute()),
            "timeout_s": self.timeout_s,
            "launcher_args": list(self.launcher_args),
            "nodelist": list(self.nodelist),
        }


def read_manifest(directory: Path) -> Options | None:
    """What the fleet run in ``directory`` was asked; None when it kept no (readable) record."""
    try:
        d = json.loads((directory / NODES_DIR / MANIFEST).read_text(encoding="utf-8"))
        if not isinstance(d, dict) or d.get("schema_version") != MANIFEST_VERSION:
            return None
        return Options(
            directory=directory,
            pytest_args=tuple(str(a) for a in d["pytest_args"]),
            tasks_per_node=int(d["tasks_per_node"]),
            hostfile=None if d.get("hostfile") is None else Path(str(d["hostfile"])),
            timeout_s=float(d["timeout_s"]),
            launcher_args=tuple(str(a) for a in d.get("launcher_args", [])),
            nodelist=tuple(str(h) for h in d.get("nodelist", [])),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def parse_nodelist(text: str) -> tuple[str, ...]:
    """Comma-separated host names, as a fleet report prints them; FleetError otherwise."""
    names = tuple(n.strip() for n in text.split(","))
    if "[" in text or any(not n or any(c.isspace() for c in n) for n in names):
        raise FleetError(
            f"--nodelist {text!r}: give host names separated by commas (node03,node17); "
            "a Slurm range expands with: scontrol show hostnames 'node[01-04]' | paste -sd,"
        )
    if len(set(names)) != len(names):
        raise FleetError(f"--nodelist {text!r}: names a host twice")
    return names


def _short(host: str) -> str:
    return host.split(".")[0]


@dataclass(frozen=True)
class Plan:
    """How the fleet is launched: the kind, the nodes, the command."""

    kind: str  # srun, sbatch or mpiexec
    nodes: int
    tasks: int
    command: tuple[str, ...]
    batch_output: Path | None = None  # sbatch: where the tasks' lines land


@dataclass(frozen=True)
class FleetRun:
    """Every task's status, and how the fleet was launched."""

    plan: Plan
    statuses: tuple[NodeStatus, ...]
    seconds: float
    directory: Path

    @property
    def failed(self) -> tuple[NodeStatus, ...]:
        """The tasks that wrote no record."""
        return tuple(s for s in self.statuses if s.failed)

    @property
    def exit_status(self) -> int:
        """0 when every task wrote its record, 1 otherwise."""
        return outcome.EXIT_REGRESSED if self.failed else outcome.EXIT_OK


def read_hostfile(path: Path) -> list[str]:
    """The hosts of a hostfile (``host`` or ``host:slots`` a line; ``#`` comments)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise FleetError(f"--hostfile {path}: cannot read: {exc.strerror or exc}") from None
    hosts = [line.split("#")[0].split()[0].split(":")[0] for line in text.splitlines()
             if line.split("#")[0].strip()]  # fmt: skip
    if not hosts:
        raise FleetError(f"--hostfile {path}: names no host")
    return hosts


def _slurm_nodes() -> int | None:
    """Nodes of the Slurm cluster (``sinfo``), or None when it cannot say."""
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None
    names = {line.strip() for line in out.stdout.splitlines() if line.strip()}
    return len(names) if out.returncode == 0 and names else None


def _node_command(options: Options) -> list[str]:
    return [
        sys.executable,
        "-m",
        NODE_MODULE,
        "--dir",
        str(options.directory),
        "--timeout",
        f"{options.timeout_s:g}",
        "--tasks-per-node",
        str(options.tasks_per_node),
        "--",
        *options.pytest_args,
    ]


def plan(options: Options, environ: Mapping[str, str] | None = None) -> Plan:
    """Choose the launcher and check the node count against what is there."""
    env = os.environ if environ is None else environ
    t = options.tasks_per_node
    node = _node_command(options)
    chosen = options.nodelist
    if chosen and options.nodes is not None and options.nodes != len(chosen):
        raise FleetError(f"--nodes {options.nodes}, but --nodelist names {len(chosen)} hosts")
    if options.hostfile is not None:
        hosts = read_hostfile(options.hostfile)
        hostfile = options.hostfile
        if chosen:
            hosts = _chosen_hosts(hosts, chosen, options.hostfile)
            hostfile = options.directory / NODES_DIR / "hostfile"
            write_text_atomic(hostfile, "".join(f"{h}\n" for h in hosts))
        n = options.nodes or len(hosts)
        if n > len(hosts):
            raise FleetError(
                f"--nodes {n}: the hostfile {options.hostfile} names only {len(hosts)} hosts"
            )
        mpiexec = _mpiexec()
        command = [mpiexec, "-f", str(hostfile), "-ppn", str(t), "-n", str(n * t)]
        return Plan("mpiexec", n, n * t, (*command, *options.launcher_args, *node))
    # Several tasks per node share its CPUs (several GPUs of a node, or a test on one host):
    # Slurm is told to overcommit rather than to refuse more tasks than CPUs.
    srun = ["srun", "--kill-on-bad-exit=0"]
    srun += ["--ntasks-per-node=1"] if t == 1 else ["--overcommit", "--distribution=block"]
    if env.get("SLURM_JOB_ID"):
        if shutil.which("srun") is None:
            raise FleetError("inside a Slurm allocation, but srun is not on PATH")
        have = int(env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES") or 1)
        n = len(chosen) or options.nodes or have
        if n > have:
            raise FleetError(
                f"--nodes {n}: the allocation (job {env['SLURM_JOB_ID']}) has only {have} node(s)"
            )
        where = ["-w", ",".join(chosen)] if chosen else []
        command = [*srun, "-N", str(n), "-n", str(n * t), *where, *options.launcher_args, *node]
        return Plan("srun", n, n * t, tuple(command))
    if shutil.which("sbatch") is not None:
        if options.nodes is None and not chosen:
            raise FleetError(
                "outside a Slurm allocation: say how many nodes with --nodes N, or which with "
                "--nodelist (or run inside salloc/sbatch)"
            )
        n = len(chosen) or options.nodes or 0
        cluster = _slurm_nodes()
        if cluster is not None and n > cluster:
            raise FleetError(f"--nodes {n}: the Slurm cluster has only {cluster} node(s)")
        return _sbatch_plan(options, n, [*srun, "-N", str(n), "-n", str(n * t)], node)
    raise FleetError(
        "no Slurm here (not inside an allocation, no sbatch on PATH) and no --hostfile: "
        "give a hostfile for mpiexec, or run on a Slurm cluster"
    )


def _chosen_hosts(hosts: list[str], chosen: tuple[str, ...], hostfile: Path) -> list[str]:
    """The hostfile's hosts that ``--nodelist`` names (by full or short name), in its order."""
    names = set(chosen)
    picked = [h for h in dict.fromkeys(hosts) if h in names or _short(h) in names]
    known = set(hosts) | {_short(h) for h in hosts}
    unknown = [c for c in chosen if c not in known]
    if unknown:
        raise FleetError(f"--nodelist: {', '.join(unknown)} not in the hostfile {hostfile}")
    return picked


def _mpiexec() -> str:
    beside = Path(sys.executable).with_name("mpiexec")
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if not found:
        raise FleetError(
            "--hostfile needs mpiexec (not beside this Python, not on PATH): "
            "pip install 'perfsuite[mpi]'"
        )
    return found


def _sbatch_plan(options: Options, n: int, srun: list[str], node: list[str]) -> Plan:
    nodes_dir = options.directory / NODES_DIR
    script = nodes_dir / "fleet.sbatch"
    output = nodes_dir / "batch.out"
    minutes = math.ceil((options.timeout_s + 120) / 60)
    text = "\n".join(
        [
            "#!/bin/bash",
            "# Written by perfsuite fleet run: one task per node, each runs the suite once.",
            f"#SBATCH --nodes={n}",
            f"#SBATCH --ntasks={n * options.tasks_per_node}",
            *([f"#SBATCH --nodelist={','.join(options.nodelist)}"] if options.nodelist else []),
            *(["#SBATCH --overcommit"] if options.tasks_per_node > 1 else []),
            f"#SBATCH --time={minutes}",
            f"#SBATCH --output={output}",
            f"cd {shlex.quote(os.getcwd())}",
            shlex.join([*srun, *options.launcher_args, *node]),
            "",
        ]
    )
    write_text_atomic(script, text)
    command = ("sbatch", "--wait", "--parsable", *options.launcher_args, str(script))
    return Plan("sbatch", n, n * options.tasks_per_node, command, batch_output=output)


def _lines(text: str) -> dict[int, NodeStatus]:
    """The tasks' status lines in the launcher's output (a prefix such as srun's is allowed)."""
    found = {}
    for line in text.splitlines():
        _, marker, rest = line.partition(REPORT_PREFIX)
        if not marker:
            continue
        try:
            status = NodeStatus.from_dict(json.loads(rest))
        except (ValueError, PerfsuiteError):
            continue
        found[status.task] = status
    return found


def run(options: Options) -> FleetRun:
    """Launch the fleet, wait (bounded), and collect every task's status."""
    directory = options.directory.absolute()
    options = Options(**{**options.__dict__, "directory": directory})
    try:
        check_writable(directory / NODES_DIR)
    except PerfsuiteError as exc:
        raise FleetError(f"--dir: {exc}") from None
    earlier = next((directory / RECORDS_DIR).rglob("*.json"), None)
    if earlier is not None:
        raise FleetError(
            f"--dir {directory} already holds the records of an earlier fleet run (such as "
            f"{earlier}); give each fleet run a directory of its own"
        )
    for stale in (directory / NODES_DIR).glob("task-*.json"):
        stale.unlink()
    p = plan(options)
    write_json_atomic(directory / NODES_DIR / MANIFEST, options.to_dict())
    limit = options.launch_timeout_s or options.timeout_s + LAUNCH_GRACE_S
    started = time.monotonic()
    proc = subprocess.Popen(
        p.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=limit)
        launcher_note = f"{p.kind} exited {proc.returncode}"
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        launcher_note = f"{p.kind} still running after {limit:g} s, killed"
    if p.kind == "sbatch" and p.batch_output is not None:
        if p.batch_output.exists():
            out += p.batch_output.read_text(encoding="utf-8", errors="replace")
        elif proc.returncode == 0:
            raise FleetError(
                f"--dir {directory}: the batch job ran, but its output {p.batch_output} never "
                "arrived here: the directory is not shared with the nodes"
            )
    reported = _lines(out)
    statuses = [
        _collect(directory, task, reported.get(task), launcher_note, out) for task in range(p.tasks)
    ]
    return FleetRun(p, tuple(statuses), round(time.monotonic() - started, 1), directory)


def _collect(
    directory: Path, task: int, line: NodeStatus | None, launcher: str, out: str
) -> NodeStatus:
    """One task's status as this side sees it; a missing one is written here."""
    path = status_path(directory, task)
    if path.exists():
        try:
            here = NodeStatus.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, PerfsuiteError):
            here = None
        if here is not None:
            if here.record and not Path(here.record).exists():
                raise FleetError(
                    f"--dir {directory}: task {task} on {here.host} wrote its record "
                    f"{here.record}, which never arrived here: the directory is not shared"
                )
            return here
    if line is not None and not line.failed:
        raise FleetError(
            f"--dir {directory}: task {task} on {line.host} wrote its record {line.record}, "
            "which never arrived here: the directory is not shared with that node"
        )
    status = line or NodeStatus(
        task,
        label="",
        host="",
        failed=f"no report from this task ({launcher})",
        log=str(log_path(directory, task)),
        output_tail=out[-4000:],
    )
    write_json_atomic(path, status.to_dict())
    return status


def summary_lines(result: FleetRun) -> list[str]:
    """What the terminal shows after the fleet ran."""
    p = result.plan
    lines = [f"fleet: {p.nodes} node(s), {p.tasks} task(s) by {p.kind}: {shlex.join(p.command)}"]
    for s in result.statuses:
        if s.failed:
            lines.append(f"FAILED task {s.task} ({where(s)}): {s.failed}; output: {s.log}")
            lines += ["    " + line for line in s.output_tail.strip().splitlines()[-8:]]
        else:
            lines.append(f"ok     task {s.task} ({s.label} on {s.host}): {s.seconds:g} s")
    lines.append(
        f"perfsuite fleet run: {len(result.statuses) - len(result.failed)} of "
        f"{len(result.statuses)} tasks wrote their records in {result.seconds:g} s; next: "
        + shlex.join(next_report(result.directory))
    )
    return lines


def next_report(directory: Path) -> list[str]:
    """The report that judges a fleet run: of its fleet, with every rerun so far, when a rerun.

    A rerun lives in ``FLEET/confirm`` or ``FLEET/confirm-N``: the report judges ``FLEET``
    with ``confirm``, ``confirm-2``, ... up to this one, those that exist, oldest first.
    """
    d, first = directory, directory.parent
    if not is_confirm_dir(d.name) or not (first / RECORDS_DIR).is_dir():
        return ["perfsuite", "fleet", "report", str(d)]
    last = int(d.name.rpartition("-")[2]) if d.name != CONFIRM_DIR else 1
    earlier = [first / (CONFIRM_DIR if k == 1 else f"{CONFIRM_DIR}-{k}") for k in range(1, last)]
    command = ["perfsuite", "fleet", "report", str(first)]
    for rerun in [e for e in earlier if e.is_dir()] + [d]:
        command += ["--confirm", str(rerun)]
    return command
