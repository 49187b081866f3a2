"""One task of a fleet run, on its node: run the suite, keep its record, report back.

Started by the launcher (``srun``, ``mpiexec``) as ``python -m perfsuite.fleet.node --dir DIR
--timeout S [--tasks-per-node T] -- PYTEST ARGS``.  It labels the run (its host name, with
the task's index on the host when several tasks share one), runs pytest in a fresh process
with the record going to ``DIR/records/<label>/``, kills it after ``--timeout``, writes the
record's digest and its own status into ``DIR/nodes/``, and prints one line the launching
side reads even when ``DIR`` is not shared.  It always exits 0: a failed node must never
make the launcher stop the others.

On SIGTERM, SIGINT or SIGHUP (the launcher forwards its own: a timeout, a Ctrl-C) it ends its
pytest and everything that started, writes its status as interrupted, and exits: no pytest
of a task outlives it to write a record for a task already reported failed.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from perfsuite.errors import PerfsuiteError, StorageError
from perfsuite.fleet.digests import DIGEST_SUFFIX, write_digest
from perfsuite.fleet.labels import from_host, is_label
from perfsuite.fleet.status import NodeStatus, log_path, status_path
from perfsuite.measure import processes
from perfsuite.measure.environment import NODE_LABEL_ENV
from perfsuite.store.files import write_json_atomic

# The line a task prints for the launching side, followed by its status as JSON.
REPORT_PREFIX = "perfsuite-fleet-node: "
RECORDS_DIR = "records"
TAIL_CHARS = 4000
_RANK_VARS = ("SLURM_PROCID", "PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK")
_LOCAL_VARS = ("SLURM_LOCALID", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK")


def _first_int(environ: Mapping[str, str], names: Sequence[str]) -> int | None:
    for name in names:
        value = environ.get(name, "")
        if value.isascii() and value.isdigit() and len(value) < 10:
            return int(value)
    return None


def identity(environ: Mapping[str, str], tasks_per_node: int) -> tuple[int, str, str]:
    """The task's index in the fleet, its label and its host name.

    The label is the host's short name, plus ``-t<local index>`` when several tasks share a
    host, so that it is unique per task; both follow hostname grammar (a host name outside
    it is made valid: :func:`perfsuite.fleet.labels.from_host`).
    """
    host = socket.gethostname()
    task = _first_int(environ, _RANK_VARS) or 0
    local = _first_int(environ, _LOCAL_VARS)
    short = from_host(host)
    host = host if is_label(host) else short
    if tasks_per_node > 1:
        short = f"{short}-t{local if local is not None else task}"
    return task, short, host


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - TAIL_CHARS))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _newest_record(folder: Path) -> Path | None:
    found = [p for p in folder.rglob("*.json") if not p.name.endswith(DIGEST_SUFFIX)]
    return max(found, key=lambda p: p.stat().st_mtime_ns) if found else None


def run_task(
    directory: Path, pytest_args: Sequence[str], timeout_s: float, tasks: int
) -> NodeStatus:
    """Run the suite once on this node; the status says what became of it."""
    task, label, host = identity(os.environ, tasks)
    log = log_path(directory, task)
    records = directory / RECORDS_DIR / label
    started = time.monotonic()
    try:
        records.mkdir(parents=True, exist_ok=True)
        log.parent.mkdir(parents=True, exist_ok=True)
        out = log.open("wb")
    except OSError as exc:
        return NodeStatus(task, label, host, failed=f"cannot write to {directory}: {exc}")
    command = [sys.executable, "-m", "pytest", *pytest_args, "--perf-report-dir", str(records)]
    env = {**os.environ, NODE_LABEL_ENV: label}
    failed, code = "", None
    with out:
        out.write(f"$ {' '.join(command)}\n".encode())
        out.flush()
        try:
            proc = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        except OSError as exc:
            return NodeStatus(task, label, host, failed=f"cannot start pytest: {exc}", log=str(log))
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            processes.end_group(proc)
            failed = f"timed out after {timeout_s:g} s (killed)"
        except processes.Interrupted as signalled:
            processes.end_group(proc)
            failed = f"interrupted ({signalled.name}): its pytest was ended"
    record = _newest_record(records)
    if not failed and record is None:
        failed = f"pytest exited {code} without a run record"
    if record is not None and not failed:
        try:
            write_digest(record)
        except StorageError as exc:
            failed = f"its run record is unreadable: {exc}"
    return NodeStatus(
        task,
        label,
        host,
        failed=failed,
        exit_code=code,
        seconds=round(time.monotonic() - started, 1),
        log=str(log),
        record=str(record) if record and not failed else "",
        output_tail=_tail(log) if failed else "",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run this node's task; print its status line; exit 0 whatever became of it."""
    ap = argparse.ArgumentParser(prog="python -m perfsuite.fleet.node")
    ap.add_argument("--dir", required=True, type=Path, help="the fleet's shared directory")
    ap.add_argument(
        "--timeout", type=float, default=1800.0, help="seconds before pytest is killed (1800)"
    )
    ap.add_argument("--tasks-per-node", type=int, default=1, help="tasks per host (1)")
    ap.add_argument("pytest_args", nargs="*", help="the suite's pytest arguments")
    args = ap.parse_args(argv)
    if not 0 < args.timeout < float("inf") or args.tasks_per_node < 1:
        ap.error("--timeout must be finite and above 0, --tasks-per-node 1 or more")
    with processes.interruptible():
        try:
            status = run_task(
                args.dir.absolute(), args.pytest_args, args.timeout, args.tasks_per_node
            )
        except processes.Interrupted as signalled:  # before or after its pytest ran
            task, label, host = identity(os.environ, args.tasks_per_node)
            status = NodeStatus(task, label, host, failed=f"interrupted ({signalled.name})")
        try:
            write_json_atomic(status_path(args.dir, status.task), status.to_dict())
        except (OSError, PerfsuiteError):
            pass  # the launching side learns of it from the line below
        print(REPORT_PREFIX + json.dumps(status.to_dict()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
