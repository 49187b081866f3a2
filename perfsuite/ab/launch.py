"""Each side's process: its command, its launch and time limit, and what it left behind.

A side runs as a fresh ``python -m pytest`` in a folder of its own per round, its output to
a log and a trace of the checks it started and ended; once it ends (or is killed at its
limit), its folder is read into a :class:`~perfsuite.ab.rounds.SideRun`: its run record's
readings, else the checks its trace shows it died in.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.ab.forks import Forked, Server, ServerGone, WarmSides
from perfsuite.ab.rounds import Reading, SideRun, SideRunner, readings_of
from perfsuite.measure import processes
from perfsuite.store.records import load_record

# The end of a side's output kept in the record when it failed.
TAIL_LINES = 30
# The file a side appends each check's start and end to (:mod:`perfsuite.ab.side`).
TRACE_ENV = "PERFSUITE_AB_TRACE"
TRACE_FILE = "trace.jsonl"


def unfinished(text: str) -> tuple[str, ...]:
    """The checks a side's trace shows started and never ended, in the order they started.

    The trace is the side's own output, one JSON object a line, ``{"start": NODEID}`` or
    ``{"end": NODEID}``; a line that is not one of those (a side killed mid-write) is passed
    over.  Never raises: a trace that says nothing names no check.
    """
    open_: dict[str, None] = {}
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict) or len(event) != 1:
            continue
        ((kind, nodeid),) = event.items()
        if not isinstance(nodeid, str) or not nodeid or not nodeid.isprintable():
            continue  # a node id is printed: nothing that could drive a terminal
        if kind == "start":
            open_[nodeid] = None
        elif kind == "end":
            open_.pop(nodeid, None)
    return tuple(open_)


def death_words(returncode: int | None, out_of_memory: bool = False) -> str:
    """How a side's process ended, for its failure: ``killed by SIGSEGV``, ``exited 1``.

    ``out_of_memory``: the kernel's out-of-memory killer killed a process while the side ran
    (:func:`oom_kills` rose), which a SIGKILL then names.
    """
    if returncode is not None and returncode < 0:
        try:
            words = f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            words = f"killed by signal {-returncode}"
        if out_of_memory and returncode == -signal.SIGKILL:
            words += " (the kernel's out-of-memory killer: the host ran out of memory)"
        return words
    return f"exited {returncode}"


def oom_kills(vmstat: Path = Path("/proc/vmstat")) -> int | None:
    """Processes the kernel's out-of-memory killer has killed since boot (None: not Linux)."""
    try:
        for line in vmstat.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        pass
    return None


def _read(path: Path) -> str:
    """A side's file as text ("" when it is not there)."""
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _tail(text: str, lines: int = TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


@dataclass(frozen=True)
class SideCommand:
    """How to start one side: its interpreter, the pytest arguments and its variables."""

    python: str
    pytest_args: tuple[str, ...]
    env: Mapping[str, str]
    timeout_s: float


# A side may run this long past the budget before it is killed: the round it belongs to was
# started inside the budget, and a side killed mid-check gives no evidence at all.
BUDGET_GRACE_S = 120.0


def side_timeout(command: SideCommand, seconds_left: Callable[[], float] | None) -> float:
    """A side's time limit: its own timeout, or the budget's end plus the grace if earlier."""
    if seconds_left is None:
        return command.timeout_s
    return min(command.timeout_s, max(BUDGET_GRACE_S, seconds_left() + BUDGET_GRACE_S))


@dataclass
class Launch:
    """A side's process, started, and where its output goes."""

    side: str
    round: int
    position: int
    selection: Sequence[str] | None
    where: Path
    log: Path
    proc: processes.Child
    started: float
    timeout: float
    oom_kills: int | None = None  # the kernel's count when the side started


def launch(
    command: SideCommand,
    side: str,
    rnd: int,
    position: int,
    selection: Sequence[str] | None,
    workdir: Path,
    extra_args: Sequence[str],
    timeout: float,
    env: Mapping[str, str] | None = None,
    fd_env: Mapping[str, Sequence[int]] | None = None,
    server: Server | None = None,
) -> Launch:
    """Start one side, its output to a log file.

    The side is a fresh ``python -m pytest`` process, or with ``server`` a fresh fork of that
    side's warm interpreter (:mod:`perfsuite.ab.forks`); a server that has died is left for
    a fresh process.  ``fd_env``: variables naming descriptors the side inherits, each the
    comma-joined list of its descriptors (the turns' pipes).
    """
    where = workdir / f"round-{rnd:02d}-{side}"
    where.mkdir(parents=True, exist_ok=True)
    args = [command.python, "-m", "pytest", *command.pytest_args, *extra_args]
    args += ["--perf-report-dir", str(where / "records")]
    trace = where / TRACE_FILE
    trace.unlink(missing_ok=True)
    if selection is not None:
        select = where / "selection.txt"
        select.write_text("".join(f"{c}\n" for c in selection))
        args += ["--perf-ab-select", str(select)]
    log = where / "output.log"
    environ = {**os.environ, **command.env, **(env or {}), TRACE_ENV: str(trace)}
    fd_env = fd_env or {}
    fds = [fd for which in fd_env.values() for fd in which]
    if server is not None and not server.gone:
        # The variables name the descriptors by their place in ``fds``: the child gets its
        # own numbers for them.
        places = {fd: i for i, fd in enumerate(fds)}
        try:
            forked = server.fork(
                args[3:],
                environ,
                str(log),
                fds,
                {name: [places[fd] for fd in which] for name, which in fd_env.items()},
            )
            now = time.monotonic()
            return Launch(
                side, rnd, position, selection, where, log, forked, now, timeout, oom_kills()
            )
        except ServerGone:
            pass
    environ.update({name: ",".join(map(str, which)) for name, which in fd_env.items()})
    with log.open("w") as out:
        proc = processes.spawn(
            args, stdout=out, stderr=subprocess.STDOUT, env=environ, pass_fds=tuple(fds)
        )
    started = time.monotonic()
    return Launch(side, rnd, position, selection, where, log, proc, started, timeout, oom_kills())


@dataclass(frozen=True)
class SideReading:
    """What a side's files say: why it gave no evidence ("" when it did), and its evidence."""

    failed: str
    readings: Mapping[str, Reading]
    crashed: tuple[str, ...]
    record: str  # the run record read ("" when there was none)
    environment: Mapping[str, Any]


def read_side(
    where: Path, returncode: int | None, hung: bool, timeout: float, out_of_memory: bool = False
) -> SideReading:
    """Read a side's folder after its process ended: its run record, else its trace.

    ``returncode`` None: it was killed at ``timeout``.  ``out_of_memory``: the kernel's
    out-of-memory killer killed a process while the side ran.  Whatever the side wrote (a record
    cut short, one another version wrote, a trace of garbage), the answer is a reading: a
    record that cannot be read or judged is the side's failure, never an exception here.
    """
    records = sorted((where / "records").glob("*/*.json"))
    record_path = str(records[-1]) if records else ""
    if hung or not records:
        # No run record: the trace names the checks it died in (a hang, a segfault).
        crashed = unfinished(_read(where / TRACE_FILE))
        at = f" in {', '.join(crashed)}" if crashed else ""
        if hung:
            failed = f"no result within {timeout:.0f} s (killed){at}"
        else:
            failed = f"{death_words(returncode, out_of_memory)}{at}, without a run record"
        return SideReading(failed, {}, crashed, record_path, {})
    try:
        record = load_record(records[-1])
        readings = readings_of(record)
        crashed = tuple(str(c.id) for c in record.crashed)
        environment = record.environment if isinstance(record.environment, Mapping) else {}
    except Exception as exc:  # a side's record is input: whatever is wrong, the side failed
        return SideReading(
            f"its run record could not be read: {_one_line(exc)}", {}, (), record_path, {}
        )
    failed = ""
    if record.incomplete:
        failed = f"incomplete: {_one_line(record.incomplete)}"
    elif not readings:
        failed = f"exited {returncode} with no measured check"
    return SideReading(failed, {} if failed else readings, crashed, record_path, environment)


def _one_line(what: object, limit: int = 300) -> str:
    """``what`` as one printable line of at most ``limit`` characters."""
    text = " ".join("".join(c if c.isprintable() else " " for c in str(what)).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def collect(started: Launch, hung: bool, waited: float = 0.0) -> SideRun:
    """The side's run, from its exit, its log and its run record (:func:`read_side`).

    ``waited``: the time it spent waiting for turns.
    """
    returncode = None if hung else started.proc.wait()
    if not hung:
        processes.reap(started.proc)  # what the side left running (a forked worker) ends with it
    seconds = time.monotonic() - started.started
    output = _read(started.log)
    now = oom_kills()
    out_of_memory = None not in (now, started.oom_kills) and now != started.oom_kills
    got = read_side(started.where, returncode, hung, started.timeout, out_of_memory)
    return SideRun(
        started.round,
        started.side,
        started.position,
        seconds,
        returncode,
        got.failed,
        got.readings,
        got.crashed,
        got.record,
        str(started.log),
        _tail(output) if got.failed else "",
        got.environment,
        len(started.selection) if started.selection is not None else 0,
        waited,
        isinstance(started.proc, Forked),
    )


def process_runner(
    commands: Mapping[str, SideCommand],
    workdir: Path,
    extra_args: Sequence[str],
    seconds_left: Callable[[], float] | None = None,
    sides: WarmSides | None = None,
) -> SideRunner:
    """A side runner that starts each side as a fresh process (a fork of its warm ``sides``).

    ``seconds_left()`` is the budget left: a side is killed at the earlier of its own timeout
    and the budget's end plus :data:`BUDGET_GRACE_S`, so one hang cannot stretch a budget of
    minutes into the side timeout's half hour.
    """

    def run_side(side: str, rnd: int, position: int, selection: Sequence[str] | None) -> SideRun:
        command = commands[side]
        timeout = side_timeout(command, seconds_left)
        started = launch(
            command,
            side,
            rnd,
            position,
            selection,
            workdir,
            extra_args,
            timeout,
            server=sides.server(side) if sides else None,
        )
        try:
            started.proc.wait(timeout=timeout)
            hung = False
        except subprocess.TimeoutExpired:
            kill(started.proc)
            hung = True
        except KeyboardInterrupt:
            kill(started.proc)
            raise
        return collect(started, hung)

    return run_side


def kill(proc: processes.Child) -> None:
    """Stop a side and everything it started (ranks, workers): SIGTERM, then SIGKILL."""
    processes.end(proc)
