"""Starting the suite on every node of a fleet, and collecting what became of each task.

Three launchers, chosen by where perfsuite runs:

* inside a Slurm allocation (``SLURM_JOB_ID`` set): ``srun -N N --ntasks-per-node T``;
* on a Slurm cluster outside one: ``sbatch --wait`` with a generated script around that
  ``srun`` (the script and the batch output are kept in ``DIR/nodes/``);
* with ``--hostfile`` (no Slurm): ``mpiexec -f HOSTFILE -ppn T -n N*T`` (MPICH's hydra).

``--nodelist`` runs on the named hosts only (``srun -w``, ``#SBATCH --nodelist``, or the
hostfile's lines for them): how the nodes a report flagged are measured again to confirm
them.  What a fleet run is asked, its checks, and the manifest a report's rerun command is
made from are in :mod:`perfsuite.fleet.options`.

Each task runs :mod:`perfsuite.fleet.node`, which keeps its own timeout and always exits 0,
so one failed node never stops the others; the launcher as a whole is bounded too.  A task
that says it wrote its record, where the record never arrives here, means the directory is
not shared: that is an error naming the task and its host.

Everything is checked before anything is created: a usage error leaves no ``DIR/nodes/``
behind.  Every host name read (a hostfile, ``--nodelist``, Slurm's environment) follows
hostname grammar (:mod:`perfsuite.fleet.labels`), every value written into the batch script
is quoted for the shell, and nothing path-like goes on an ``#SBATCH`` line (sbatch parses
those itself, with quoting rules of its own: the output file is given on its command line).
The launcher's timeout and SIGINT, SIGTERM or SIGHUP end the launcher and every process it
started here (:mod:`perfsuite.measure.processes`); the statuses known so far are written, and
a signal exits with the interrupted status.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.errors import PerfsuiteError, StorageError
from perfsuite.fleet.aggregate import CONFIRM_DIR, NODES_DIR, is_confirm_dir
from perfsuite.fleet.labels import GRAMMAR, check_creatable, is_label, printable
from perfsuite.fleet.labels import FleetError as FleetError  # raised by this module's callers
from perfsuite.fleet.node import RECORDS_DIR, REPORT_PREFIX
from perfsuite.fleet.options import MANIFEST, Options, check_options
from perfsuite.fleet.status import NodeStatus, log_path, status_path, where
from perfsuite.judge import outcome
from perfsuite.measure import processes
from perfsuite.store.files import (
    check_writable,
    read_text_bounded,
    write_json_atomic,
    write_text_atomic,
)

NODE_MODULE = "perfsuite.fleet.node"
# Seconds the launcher gets beyond a node's timeout by default (queueing, start-up).
LAUNCH_GRACE_S = 300.0
MAX_HOSTFILE_BYTES = 16 << 20
# The launcher's output (and, with sbatch, the job's), beside the tasks' statuses.
LAUNCHER_LOG = "launcher.log"


def parse_nodelist(text: str) -> tuple[str, ...]:
    """Comma-separated host names, as a fleet report prints them; FleetError otherwise."""
    names = tuple(n.strip(" ") for n in text.split(","))
    if "[" in text or any(not is_label(n) for n in names):
        bad = next((n for n in names if not is_label(n)), text)
        raise FleetError(
            f"--nodelist {text!r}: {bad!r} is not a host name ({GRAMMAR}); give host names "
            "separated by commas (node03,node17); a Slurm range expands with: "
            "scontrol show hostnames 'node[01-04]' | paste -sd,"
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
    # What the launch needs written first (a batch script, a hostfile): written only once
    # everything has been checked, so that a refused fleet run leaves nothing behind.
    files: tuple[tuple[Path, str], ...] = ()


@dataclass(frozen=True)
class FleetRun:
    """Every task's status, and how the fleet was launched."""

    plan: Plan
    statuses: tuple[NodeStatus, ...]
    seconds: float
    directory: Path
    interrupted: str = ""  # the signal that stopped it (SIGINT, SIGTERM, SIGHUP), or ""
    timed_out: str = ""  # what became of a launcher that ran past its timeout, or ""

    @property
    def failed(self) -> tuple[NodeStatus, ...]:
        """The tasks that wrote no record."""
        return tuple(s for s in self.statuses if s.failed)

    @property
    def exit_status(self) -> int:
        """0 when every task wrote its record, 1 otherwise; interrupted by a signal: its own."""
        if self.interrupted:
            return outcome.EXIT_INTERRUPTED
        return outcome.EXIT_REGRESSED if self.failed else outcome.EXIT_OK


def read_hostfile(path: Path) -> list[str]:
    """The hosts of a hostfile (``host`` or ``host:slots`` a line; ``#`` comments).

    Lines are split as mpiexec splits them (at line feeds only), and every host must follow
    hostname grammar: what mpiexec is given is the list read here, written anew.  A host is
    named once (by its short name too: the tasks' labels are short names), as ``--nodelist``
    names it: ``--tasks-per-node`` sets the tasks on each host, and a line's ``slots`` are
    not used (mpiexec is given ``-ppn``), so a host named twice would run two tasks of one
    label, which the report refuses.
    """
    try:
        text = read_text_bounded(path, "hostfile", MAX_HOSTFILE_BYTES)
    except StorageError as exc:
        raise FleetError(f"--hostfile {exc}") from None
    hosts = []
    seen: dict[str, int] = {}  # short name: its line
    for number, line in enumerate(text.split("\n"), 1):
        body = line.split("#")[0].strip(" \t\r")
        if not body:
            continue
        host, colon, slots = re.split(r"[ \t]+", body)[0].partition(":")
        if not is_label(host) or (colon and not re.fullmatch(r"[0-9]{1,6}", slots)):
            raise FleetError(
                f"--hostfile {path}: line {number}: {body[:80]!r} is not a host name "
                f"({GRAMMAR}), or host:slots"
            )
        if _short(host) in seen:
            raise FleetError(
                f"--hostfile {path}: line {number}: names a host twice ({host!r}, as line "
                f"{seen[_short(host)]} did); name each host once: --tasks-per-node sets the "
                "tasks on each"
            )
        seen[_short(host)] = number
        hosts.append(host)
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
        if chosen:
            hosts = _chosen_hosts(hosts, chosen, options.hostfile)
        # mpiexec reads the hosts as checked here, never the file as given.
        hostfile = options.directory / NODES_DIR / "hostfile"
        n = options.nodes or len(hosts)
        if n > len(hosts):
            raise FleetError(
                f"--nodes {n}: the hostfile {options.hostfile} names only {len(hosts)} hosts"
            )
        mpiexec = _mpiexec()
        command = [mpiexec, "-f", str(hostfile), "-ppn", str(t), "-n", str(n * t)]
        files = ((hostfile, "".join(f"{h}\n" for h in hosts)),)
        return Plan("mpiexec", n, n * t, (*command, *options.launcher_args, *node), files=files)
    # Several tasks per node share its CPUs (several GPUs of a node, or a test on one host):
    # Slurm is told to overcommit rather than to refuse more tasks than CPUs.
    srun = ["srun", "--kill-on-bad-exit=0"]
    srun += ["--ntasks-per-node=1"] if t == 1 else ["--overcommit", "--distribution=block"]
    if env.get("SLURM_JOB_ID"):
        have = _allocation_nodes(env)
        if shutil.which("srun") is None:
            raise FleetError("inside a Slurm allocation, but srun is not on PATH")
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


def _allocation_nodes(env: Mapping[str, str]) -> int:
    """The allocation's node count, its job id and count checked (they reach messages)."""
    job = env["SLURM_JOB_ID"]
    if not re.fullmatch(r"[0-9]{1,12}", job):
        raise FleetError(f"SLURM_JOB_ID {job!r} is not a Slurm job id (digits)")
    count = env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES") or "1"
    if not re.fullmatch(r"[0-9]{1,7}", count) or int(count) < 1:
        raise FleetError(f"SLURM_JOB_NUM_NODES {count!r} is not a node count")
    return int(count)


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
    """The batch script around ``srun``, and the ``sbatch`` command that runs it.

    ``#SBATCH`` lines are parsed by sbatch, not by a shell, and its quoting is not the
    shell's: they hold numbers and checked host names only, and the output file is given on
    sbatch's command line, where sbatch still expands ``%`` patterns and strips backslashes:
    a directory holding either is refused.  The shell lines quote every value (``shlex``).
    """
    nodes_dir = options.directory / NODES_DIR
    script = nodes_dir / "fleet.sbatch"
    output = nodes_dir / "batch.out"
    if "%" in str(output) or "\\" in str(output):
        raise FleetError(
            f"--dir {options.directory}: sbatch reads '%' in its --output file as a pattern "
            "(%j: the job id) and a backslash as 'take it literally, backslashes removed', "
            "so the batch output would land elsewhere; choose a path without '%' or '\\'"
        )
    minutes = math.ceil((options.timeout_s + 120) / 60)
    nodelist = ",".join(options.nodelist)
    text = "\n".join(
        [
            "#!/bin/bash",
            "# Written by perfsuite fleet run: one task per node, each runs the suite once.",
            "# Its output file is given on sbatch's command line (sbatch --output=...).",
            f"#SBATCH --nodes={n}",
            f"#SBATCH --ntasks={n * options.tasks_per_node}",
            *([f"#SBATCH --nodelist={shlex.quote(nodelist)}"] if nodelist else []),
            *(["#SBATCH --overcommit"] if options.tasks_per_node > 1 else []),
            f"#SBATCH --time={minutes}",
            f"cd {shlex.quote(os.getcwd())}",
            shlex.join([*srun, *options.launcher_args, *node]),
            "",
        ]
    )
    command = (
        "sbatch", "--wait", "--parsable", f"--output={output}", *options.launcher_args,
        str(script),
    )  # fmt: skip
    return Plan(
        "sbatch",
        n,
        n * options.tasks_per_node,
        command,
        batch_output=output,
        files=((script, text),),
    )


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
    """Launch the fleet, wait (bounded), and collect every task's status.

    Everything is checked before anything is written.  The launcher's timeout, or SIGINT,
    SIGTERM or SIGHUP, ends the launcher and every process it started here; the statuses
    known then are written, and a signal gives :data:`outcome.EXIT_INTERRUPTED`.
    """
    check_options(options)
    directory = options.directory.absolute()
    options = Options(**{**options.__dict__, "directory": directory})
    nodes = directory / NODES_DIR
    earlier = next((directory / RECORDS_DIR).rglob("*.json"), None)
    if earlier is not None:
        raise FleetError(
            f"--dir {directory} already holds the records of an earlier fleet run (such as "
            f"{earlier}); give each fleet run a directory of its own"
        )
    check_creatable("--dir:", nodes)
    p = plan(options)
    try:
        check_writable(nodes)
    except PerfsuiteError as exc:
        raise FleetError(f"--dir: {exc}") from None
    for stale in nodes.glob("task-*.json"):
        stale.unlink()
    for path, text in p.files:
        write_text_atomic(path, text)
    write_json_atomic(nodes / MANIFEST, options.to_dict())
    limit = options.launch_timeout_s or options.timeout_s + LAUNCH_GRACE_S
    started = time.monotonic()
    log = nodes / LAUNCHER_LOG
    interrupted = ""
    with processes.interruptible():
        # The launcher writes to a file, not a pipe: a task it leaves behind cannot hold a
        # pipe open and stall the reading of what the others said.
        with log.open("wb") as sink:
            proc = subprocess.Popen(
                p.command, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
        timed_out = ""
        try:
            proc.wait(timeout=limit)
            launcher_note = f"{p.kind} exited {proc.returncode}"
        except subprocess.TimeoutExpired:
            _stop(p, proc, log)
            timed_out = launcher_note = (
                f"{p.kind} still running after {limit:g} s, ended with all it started"
            )
        except processes.Interrupted as signalled:
            interrupted = signalled.name
            _stop(p, proc, log)
            launcher_note = f"{p.kind} ended with all it started: perfsuite got {interrupted}"
        out = log.read_text(encoding="utf-8", errors="replace")
        if p.kind == "sbatch" and p.batch_output is not None:
            if p.batch_output.exists():
                out += p.batch_output.read_text(encoding="utf-8", errors="replace")
            elif proc.returncode == 0 and not interrupted:
                raise FleetError(
                    f"--dir {directory}: the batch job ran, but its output {p.batch_output} "
                    "never arrived here: the directory is not shared with the nodes"
                )
        reported = _lines(out)
        statuses = [
            _collect(directory, task, reported.get(task), launcher_note, out, interrupted)
            for task in range(p.tasks)
        ]
    seconds = round(time.monotonic() - started, 1)
    return FleetRun(p, tuple(statuses), seconds, directory, interrupted, timed_out)


def _stop(p: Plan, proc: subprocess.Popen[Any], log: Path) -> None:
    """End the launcher and what it started; a batch job is cancelled as well."""
    if p.kind == "sbatch":
        job = log.read_text(encoding="utf-8", errors="replace").split("\n", 1)[0].strip()
        job = job.split(";")[0]  # --parsable: JOBID or JOBID;CLUSTER
        if re.fullmatch(r"[0-9]{1,12}", job) and shutil.which("scancel"):
            try:
                subprocess.run(["scancel", job], capture_output=True, timeout=30)
            except (OSError, subprocess.SubprocessError):
                pass  # the batch job's own time limit still ends it
    processes.end_tree(proc, processes.LAUNCHER_GRACE_S)


def _collect(
    directory: Path,
    task: int,
    line: NodeStatus | None,
    launcher: str,
    out: str,
    interrupted: str = "",
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
    if line is not None and not line.failed and not interrupted:
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
            tail = s.output_tail.strip().split("\n")[-8:]
            lines += ["    " + printable(line) for line in tail]
        else:
            lines.append(f"ok     task {s.task} ({s.label} on {s.host}): {s.seconds:g} s")
    if result.timed_out:
        lines.append(f"perfsuite fleet run: the launch timed out: {result.timed_out}")
    if result.interrupted:
        lines.append(
            f"perfsuite fleet run: interrupted ({result.interrupted}): the launcher and every "
            "process it started here were ended; the tasks' statuses so far are written"
        )
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
