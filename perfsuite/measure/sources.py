"""Where samples come from: the in-process clock, child processes or ranks, device events.

Every source yields raw durations in seconds, one per repetition; the check's
:class:`~perfsuite.measure.workload.Workload` turns each into its metric, and the same statistics
judge them whichever source they came from.  The source is recorded with each result.

* :class:`ClockSource`: ``time.perf_counter`` around each repetition in this process, with
  the device synchronised before the clock is read (the default); :class:`MarkedClock`
  also reads it where each repetition's first phase ends, and :func:`first_call` times one
  cold call, before any warm-up;
* :class:`ChildSource`: a command (a worker module, or ranks started by ``mpiexec`` or
  ``srun``) that prints its samples as JSON lines; this process never becomes a rank;
* :class:`EventSource`: device event timers (CUDA events and the like), recorded on the
  device's stream around each repetition.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from perfsuite.errors import PerfsuiteError
from perfsuite.measure import processes


def nothing() -> None:
    """A synchronisation with nothing to wait for (a host-only operation's)."""
    return None


class SourceError(PerfsuiteError):
    """A sample source could not produce its samples (the message says why)."""


class Source(Protocol):
    """Produces one duration in seconds per timed repetition."""

    kind: str

    def durations(
        self, step: Callable[[], None], presync: Callable[[], None], warmup: int, rounds: int
    ) -> list[float]:
        """Run ``warmup`` discarded and ``rounds`` timed repetitions; return their durations."""
        ...

    def describe(self) -> dict[str, Any]:
        """What the run record says about this source."""
        ...


class ClockSource:
    """The repetition loop on ``time.perf_counter``, in this process."""

    kind = "clock"

    def durations(
        self, step: Callable[[], None], presync: Callable[[], None], warmup: int, rounds: int
    ) -> list[float]:
        """Warm up, then time each repetition between device synchronisations."""
        for _ in range(warmup):
            presync()
            step()
        out = []
        for _ in range(rounds):
            presync()
            out.append(self._timed(step))
        return out

    def _timed(self, step: Callable[[], None]) -> float:
        """One repetition's seconds: the clock read right before and right after it."""
        start = time.perf_counter()
        step()
        return time.perf_counter() - start

    def describe(self) -> dict[str, Any]:
        """Clock name and resolution."""
        info = time.get_clock_info("perf_counter")
        return {"kind": self.kind, "clock": "perf_counter", "resolution_s": info.resolution}


class MarkedClock(ClockSource):
    """The in-process clock, each repetition also read at a mark its step sets.

    A step in two phases (a training step: wait for the next batch, then compute on it)
    calls :meth:`mark` where its first phase ends; ``marks`` holds, per timed repetition,
    the seconds from its start to that mark (its whole duration where the step set none).
    The durations are the :class:`ClockSource`'s.
    """

    kind = "clock-marked"

    def __init__(self) -> None:
        """A clock with no marks yet."""
        self.marks: list[float] = []
        self._marked: float | None = None

    def mark(self) -> None:
        """Read the clock where the step's first phase ends."""
        self._marked = time.perf_counter()

    def _timed(self, step: Callable[[], None]) -> float:
        self._marked = None
        start = time.perf_counter()
        step()
        end = time.perf_counter()
        self.marks.append((end if self._marked is None else self._marked) - start)
        return end - start


def first_call(call: Callable[[], object]) -> float:
    """Seconds of one call timed alone, with nothing run before it: what warm-up hides.

    The measuring loop warms a workload up and calibrates it before its first sample, as a
    rate needs.  What a first call costs (a pipeline's first batch, which ``tfds.benchmark``
    times apart from the rest) is one cold call: it is timed here, on the same clock.
    """

    def step() -> None:
        call()

    return ClockSource().durations(step, nothing, 0, 1)[0]


class Event(Protocol):
    """A device event: ``torch.cuda.Event(enable_timing=True)`` has this interface."""

    def record(self) -> None:
        """Enqueue the event on the current stream."""

    def synchronize(self) -> None:
        """Wait until the event has happened."""

    def elapsed_time(self, end: Any) -> float:
        """Milliseconds from this event to ``end``."""
        ...


@dataclass
class EventSource:
    """Device event timers around each repetition; ``make_event`` builds one event."""

    make_event: Callable[[], Event]
    device: str = ""
    kind: str = "device-events"

    def durations(
        self, step: Callable[[], None], presync: Callable[[], None], warmup: int, rounds: int
    ) -> list[float]:
        """Record an event pair around each repetition; read them all after the last one."""
        for _ in range(warmup):
            step()
        presync()
        pairs = [(self.make_event(), self.make_event()) for _ in range(rounds)]  # not timed
        for start, end in pairs:
            start.record()
            step()
            end.record()
        pairs[-1][1].synchronize()
        return [start.elapsed_time(end) / 1e3 for start, end in pairs]

    def describe(self) -> dict[str, Any]:
        """The device whose events timed the work."""
        return {"kind": self.kind, "device": self.device}


@dataclass
class ChildSource:
    """A child command (or a set of ranks) that prints its samples as JSON lines.

    Each line that is a JSON object with a ``"seconds"`` key is one sample (a duration);
    ``"rank"`` says which rank measured it (every rank's samples are kept), and its other
    numeric keys are kept per sample (``"max_seconds"``, for instance).  Lines without
    ``"seconds"`` are kept as facts (``"layout"``, for instance); other lines are ignored.
    With ``rounds_flag`` the planned sample count is passed to the command as that option.
    The command runs in its own process group with a timeout; on timeout or failure the
    whole group is killed and the error carries the tail of its stderr.
    """

    command: Sequence[str]
    timeout_s: float = 300.0
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    kind: str = "child-jsonl"
    rounds_flag: str = ""
    facts: list[dict[str, Any]] = field(default_factory=list)
    per_sample: dict[str, list[float]] = field(default_factory=dict)
    ranks: int = 0

    def durations(
        self, step: Callable[[], None], presync: Callable[[], None], warmup: int, rounds: int
    ) -> list[float]:
        """Run the command once; the child does its own warm-up and repetitions."""
        command = [*self.command, *([self.rounds_flag, str(rounds)] if self.rounds_flag else [])]
        self.command = command
        lines, _ = run_child(command, self.timeout_s, self.env, self.cwd)
        samples: list[float] = []
        ranks: set[Any] = set()
        for obj in lines:
            if "seconds" in obj:
                value = obj["seconds"]
                if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                    raise SourceError(f"child sample is not a positive duration: {obj!r}")
                samples.append(float(value))
                ranks.add(obj.get("rank"))
                for key, extra in obj.items():
                    if key not in ("seconds", "rank") and isinstance(extra, int | float):
                        self.per_sample.setdefault(key, []).append(float(extra))
            else:
                self.facts.append(obj)
        if not samples:
            raise SourceError(f"{command_text(self.command)}: printed no samples")
        self.ranks = len(ranks)
        return samples

    def describe(self) -> dict[str, Any]:
        """The command, the ranks that reported, the facts they printed, and their timer.

        A child that says how it timed its samples (a ``layout`` fact's ``timer``: the MPI
        worker's C loop, or mpi4py's calls where no C loop could be built) gives the
        measurement its timer, so a baseline timed another way is known to be unlike it.
        """
        described: dict[str, Any] = {
            "kind": self.kind,
            "command": list(self.command),
            "ranks": self.ranks,
            "facts": self.facts[:20],
            "per_sample": self.per_sample,
        }
        timers = [
            str(fact["layout"]["timer"])
            for fact in self.facts
            if isinstance(fact.get("layout"), dict) and fact["layout"].get("timer")
        ]
        if timers:
            described["timer"] = timers[0].split(" (", 1)[0]
        return described


def run_child(
    command: Sequence[str],
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> tuple[list[dict[str, Any]], str]:
    """Run a command in its own process group; return its JSON-object lines and stderr.

    A timeout or a non-zero exit kills the whole group and raises :class:`SourceError` with
    the tail of stderr.
    """
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                list(command),
                stdout=subprocess.PIPE,
                stderr=err,
                env=None if env is None else {**os.environ, **env},
                cwd=cwd,
                start_new_session=True,
            )
        except OSError as exc:
            raise SourceError(f"cannot start {command[0]!r}: {exc.strerror or exc}") from None
        with proc:
            try:
                out, _ = proc.communicate(timeout=timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                timed_out = True
                out = b""
            finally:
                # Ranks included, and a launcher's proxies in sessions of their own.
                processes.end_tree(proc, grace_s=0)
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    tail = "\n".join(stderr.strip().splitlines()[-15:])
    if timed_out:
        raise SourceError(
            f"{command_text(command)}: no result within {timeout_s:g} s; killed its process group"
            + (f"; stderr ends:\n{tail}" if tail else "")
        )
    if proc.returncode != 0:
        raise SourceError(
            f"{command_text(command)}: exited with status {proc.returncode}"
            + (f"; stderr ends:\n{tail}" if tail else "")
        )
    lines = []
    for raw in out.decode(errors="replace").splitlines():
        raw = raw.strip()
        if raw.startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                obj = json.loads(raw)
                if isinstance(obj, dict):
                    lines.append(obj)
    return lines, stderr


def command_text(command: Sequence[str], width: int = 160) -> str:
    """A command as one shell-quoted line, shortened for messages."""
    text = shlex.join(command).replace("\n", " ")
    return text if len(text) <= width else text[: width - 3] + "..."
