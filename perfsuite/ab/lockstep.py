"""Sides in lockstep: A and B start together and take turns, check by check.

A round of separate processes (A's whole selection, then B's) puts the two readings of a
check tens of seconds apart, and a shared machine drifts over tens of seconds: on a 2-core VM
the spread of a STREAM round's log ratio grew from 8% at 1 s apart to 15% at 40 s
(``lab/stream_modes.py lags``).  In lockstep both sides are fresh processes started at once;
each asks for a turn before every check (its set-up, call and tear-down) and waits, blocked
and idle, until it has one.  The broker here hands the turns out so that the two readings of
each check come back to back, in the order ABBA, BAAB, ... (the round's order for its first
check, then alternating), and only one side ever measures at a time.

The protocol runs over two pipes per side, their descriptors named in ``PERFSUITE_AB_TURNS``
(``GO,ASK``): the side writes ``want NODEID`` and reads one line ``go`` before a check, and
writes ``done NODEID`` after it (``over NODEID`` after its session's last check: it keeps the
turn until it exits).  The broker reads the host's foreign load at each turn's start and
end (:func:`foreign_meter`), so a turn pair's two readings are known to have shared their
conditions or not (:class:`perfsuite.ab.rounds.TurnLoad`).  A side that never asks (an
older perfsuite, or a crash before its first check) runs when the other has ended or is
waiting alone, never beside a check of the other; a side that ends, crashes or is killed
frees its turn.  A side that cannot take turns check by check (its checks run in xdist
workers) asks once for the whole session, ``want *``, and so runs alone.

A check's own samples taken back to back still share one moment of the machine, and on a
shared VM a moment can be slow: single spells of a few tenths of a second read 10-40% off
(``lab/draws.py``).  So by default (``PERFSUITE_AB_GRAIN=samples``) a side also gives the
turn back between its samples of a check and asks again for ``NODEID#2``, ``NODEID#3``, ...;
the same alternation then interleaves the samples, A B B A A B ..., and each side's median
is taken over moments spread across the check's pair instead of one.
"""

from __future__ import annotations

import dataclasses
import os
import selectors
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from perfsuite.ab.forks import WarmSides
from perfsuite.ab.launch import Launch, SideCommand, collect, kill, launch, side_timeout
from perfsuite.ab.rounds import SIDES, RoundRunner, SideRun, TurnLoad
from perfsuite.measure import noise, processes

ENV = "PERFSUITE_AB_TURNS"
# "samples": the sides also take turns between a check's samples (NODEID#2, NODEID#3, ...).
GRAIN_ENV = "PERFSUITE_AB_GRAIN"
# The pid of ``perfsuite ab``: both sides run in its process tree.
ROOT_ENV = "PERFSUITE_AB_ROOT"
WHOLE_SESSION = "*"

# A reading of the machine: (wall seconds, foreign CPU seconds so far).
Meter = Callable[[], tuple[float, float]]


def foreign_meter() -> tuple[float, float]:
    """Now, and the CPU seconds the host spent so far outside this process's tree.

    The host's busy time and steal less this process's tree's (both sides are in it; the
    side waiting for its turn is blocked and idle), as the noise guard counts them.
    """
    busy, steal = noise.cpu_accounting()
    return time.monotonic(), busy + steal - noise.own_cpu_seconds(os.getpid())


def _sample(key: str) -> int:
    """The sample a turn's key names: ``NODEID#3`` is 3, a check's first turn is 1."""
    _, mark, number = key.rpartition("#")
    return int(number) if mark and number.isdigit() else 1


@dataclass
class Broker:
    """Who may measure next (no I/O: the runner feeds it what the sides say).

    ``order`` is the round's order: the first side of the round's first check.  The checks
    alternate from there, and so do the samples within a check, so a side runs twice in a
    row at every pair's boundary (A B | B A | A B ...), and neither side is always first.
    """

    order: tuple[str, str]
    state: dict[str, str] = field(default_factory=lambda: dict.fromkeys(SIDES, "starting"))
    wants: dict[str, str] = field(default_factory=dict)
    started: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SIDES, 0))
    holder: str = ""
    checks: int = 0  # checks both sides started together so far
    granted: list[tuple[str, str]] = field(default_factory=list)  # (side, node id), in order
    # Each granted turn's foreign CPU seconds and wall seconds, as long as ``granted``
    # (None: not measured, or the side ended without saying the turn was done).
    loads: list[tuple[float, float] | None] = field(default_factory=list)

    def want(self, side: str, nodeid: str) -> None:
        """``side`` waits to run ``nodeid`` (a check's first turn, or ``NODEID#k``)."""
        self.state[side] = "waiting"
        self.wants[side] = nodeid
        if _sample(nodeid) == 1:
            self.started[side] += 1

    def release(self, side: str) -> None:
        """``side`` ended its turn."""
        if self.holder == side:
            self.holder = ""
        self.state[side] = "between"

    def exited(self, side: str) -> None:
        """``side``'s process ended (or will say nothing more)."""
        if self.holder == side:
            self.holder = ""
        self.state[side] = "exited"
        self.wants.pop(side, None)

    def next(self) -> str:
        """The side to let run now, or "" to wait for more news."""
        if self.holder:
            return ""
        waiting = [s for s in SIDES if self.state[s] == "waiting"]
        if not waiting:
            return ""
        if len(waiting) == 1:
            other = next(s for s in SIDES if s != waiting[0])
            if self.state[other] != "exited":
                return ""  # the other is starting or between turns: it asks soon
            return self._grant(waiting[0])
        a, b = (self.wants[s] for s in SIDES)
        if a == b:
            sample = _sample(a)
            if sample == 1:
                self.checks += 1
            return self._grant(self.order[(self.checks - 1 + sample - 1) % 2])
        # Asking for different turns: one side is a turn ahead (the other ran its half of
        # the pair last), or one side skipped or failed a check, or their selections
        # differ.  The one behind (fewer checks started, then an earlier sample) goes, so a
        # side that left a check early waits until the other has finished it.
        behind = min(
            SIDES, key=lambda s: (self.started[s], _sample(self.wants[s]), self.order.index(s))
        )
        return self._grant(behind)

    def turn_loads(self) -> dict[str, tuple[TurnLoad, ...]]:
        """Each turn-paired check's turn pairs' loads, in sample order.

        Only checks of :meth:`turn_pairs` whose every turn was measured are listed; the
        others are judged by their whole readings' loads.
        """
        paired = set(self.turn_pairs())
        found: dict[str, dict[int, TurnLoad]] = {}
        broken: set[str] = set()
        for j in range(len(self.granted) - 1):
            (side, key), (other, next_key) = self.granted[j], self.granted[j + 1]
            base = key.rpartition("#")[0] if _sample(key) > 1 else key
            if base not in paired or other == side or next_key != key:
                continue
            first, second = self.loads[j], self.loads[j + 1]
            if first is None or second is None:
                broken.add(base)
                continue
            by_side = {side: first, other: second}
            (fa, wa), (fb, wb) = by_side["A"], by_side["B"]
            found.setdefault(base, {})[_sample(key)] = TurnLoad(
                fa / wa if wa > 0 else 0.0, fb / wb if wb > 0 else 0.0, min(wa, wb)
            )
        return {
            base: tuple(pairs[i] for i in sorted(pairs))
            for base, pairs in found.items()
            if base not in broken and sorted(pairs) == list(range(1, len(pairs) + 1))
        }

    def turn_pairs(self) -> tuple[str, ...]:
        """The checks whose every sample ran a turn apart from the other side's same sample.

        Such a check's i-th samples of A and B were granted one right after the other
        (``NODEID#i`` to one side, then to the other), for every i, and it had two samples
        or more each.  A check a side took whole (a device timer, child ranks, a side in
        xdist workers) or whose turns fell out of step (the sides' selections differed) is
        not among them.
        """
        pairs: dict[str, set[int]] = {}
        taken: dict[tuple[str, str], set[int]] = {}
        j = 0
        while j < len(self.granted):
            side, key = self.granted[j]
            base = key.rpartition("#")[0] if _sample(key) > 1 else key
            taken.setdefault((side, base), set()).add(_sample(key))
            if j + 1 < len(self.granted):
                other, next_key = self.granted[j + 1]
                if other != side and next_key == key:
                    taken.setdefault((other, base), set()).add(_sample(key))
                    pairs.setdefault(base, set()).add(_sample(key))
                    j += 2
                    continue
            j += 1
        return tuple(
            sorted(
                base
                for base, both in pairs.items()
                if len(both) >= 2 and all(taken.get((s, base)) == both for s in SIDES)
            )
        )

    def _grant(self, side: str) -> str:
        self.holder = side
        self.state[side] = "running"
        self.granted.append((side, self.wants.pop(side)))
        self.loads.append(None)
        return side


@dataclass
class _Pipe:
    """The parent's ends of one side's two pipes, and what it said so far."""

    go: int  # the parent writes "go" here
    ask: int  # the side's requests arrive here
    buffer: bytes = b""


def lockstep_runner(
    commands: Mapping[str, SideCommand],
    workdir: Path,
    extra_args: Sequence[str],
    seconds_left: Callable[[], float] | None = None,
    per_sample: bool = True,
    sides: WarmSides | None = None,
    meter: Meter | None = foreign_meter,
) -> RoundRunner:
    """A round runner whose sides start at once and take turns check by check.

    ``per_sample``: they also take turns between a check's samples.  ``sides``: the warm
    interpreters to fork each side from (:mod:`perfsuite.ab.forks`).  ``meter``: reads the
    foreign load at each turn's start and end (None: turns are not measured).
    """
    grain = {GRAIN_ENV: "samples"} if per_sample else {}

    def run_round(
        rnd: int,
        order: tuple[str, str],
        selection: Sequence[str] | None,
        keep: Callable[[SideRun], None],
    ) -> None:
        broker = Broker(order)
        pipes: dict[str, _Pipe] = {}
        launches: dict[str, Launch] = {}
        selector = selectors.DefaultSelector()
        try:
            for side in order:
                go_r, go_w = os.pipe()
                ask_r, ask_w = os.pipe()
                pipes[side] = _Pipe(go_w, ask_r)
                try:
                    launches[side] = launch(
                        commands[side],
                        side,
                        rnd,
                        order.index(side),
                        selection,
                        workdir,
                        extra_args,
                        side_timeout(commands[side], seconds_left),
                        {ROOT_ENV: str(os.getpid()), **grain},
                        {ENV: (go_r, ask_w)},
                        sides.server(side) if sides else None,
                    )
                finally:
                    os.close(go_r)
                    os.close(ask_w)
                selector.register(ask_r, selectors.EVENT_READ, side)
            started_at = time.monotonic()
            turn_times: list[float] = []
            waited = dict.fromkeys(order, 0.0)
            hung = _broker_loop(broker, pipes, selector, launches, turn_times, waited, meter)
            # The turns as handed out, kept beside the sides' folders: when each check ran.
            (workdir / f"round-{rnd:02d}-turns.tsv").write_text(
                "".join(
                    f"{t - started_at:.3f}\t{side}\t{nodeid}\t{_cores(load)}\n"
                    for t, (side, nodeid), load in zip(
                        turn_times, broker.granted, broker.loads, strict=True
                    )
                )
            )
            paired, loads = broker.turn_pairs(), broker.turn_loads()
            for side in order:
                run = collect(launches[side], side in hung, waited[side])
                keep(dataclasses.replace(run, turn_pairs=paired, turn_loads=loads))
        except BaseException:  # an interrupt, or the second side failed to start
            processes.end_many([started.proc for started in launches.values()])
            raise
        finally:
            selector.close()
            for pipe in pipes.values():
                for fd in (pipe.go, pipe.ask):
                    try:
                        os.close(fd)
                    except OSError:
                        pass

    return run_round


def _cores(load: tuple[float, float] | None) -> str:
    """A turn's foreign load in cores, for the turns' file ("" where not measured)."""
    if load is None or load[1] <= 0:
        return ""
    return f"{load[0] / load[1]:.3f}"


@dataclass
class _TurnMeter:
    """Reads the foreign load over each turn, from its grant to its side's word that it ended."""

    broker: Broker
    meter: Meter | None
    started: dict[str, tuple[int, tuple[float, float]]] = field(default_factory=dict)

    def start(self, side: str) -> None:
        """``side`` was just granted the broker's last turn."""
        if self.meter is not None:
            self.started[side] = (len(self.broker.granted) - 1, self.meter())

    def stop(self, side: str) -> None:
        """``side``'s turn ended: its foreign CPU seconds and wall seconds, into the broker."""
        if self.meter is None or side not in self.started:
            return
        j, (wall0, foreign0) = self.started.pop(side)
        wall1, foreign1 = self.meter()
        self.broker.loads[j] = (max(0.0, foreign1 - foreign0), wall1 - wall0)


def _broker_loop(
    broker: Broker,
    pipes: Mapping[str, _Pipe],
    selector: selectors.BaseSelector,
    launches: Mapping[str, Launch],
    turn_times: list[float],
    waited: dict[str, float],
    meter: Meter | None = None,
) -> set[str]:
    """Hand out turns until both sides have ended; kill a side that runs past its timeout.

    A side's time is its own: the time it spent waiting for a turn is not counted, so a side
    that hangs holding the turn is killed at its timeout while the other, which waited, goes
    on.  ``turn_times`` gets the time of each turn handed out, ``waited`` each side's time
    spent waiting.  ``meter`` reads the foreign load when a turn is handed out and when
    its side says it is done, into ``broker.loads``.  Returns the sides killed.
    """
    open_sides = set(pipes)
    waiting_since: dict[str, float] = {}
    hung: set[str] = set()
    turns = _TurnMeter(broker, meter)

    def own_time(side: str, now: float) -> float:
        waiting = now - waiting_since[side] if side in waiting_since else 0.0
        return now - launches[side].started - waited[side] - waiting

    def ended(side: str) -> None:
        selector.unregister(pipes[side].ask)
        open_sides.discard(side)
        waiting_since.pop(side, None)
        broker.exited(side)

    while open_sides:
        now = time.monotonic()
        for side in sorted(open_sides):
            timed_out = own_time(side, now) > launches[side].timeout
            # A process that has ended frees its turn even while a child it forked (a data
            # loader's worker) still holds its end of the pipe open.
            if timed_out or launches[side].proc.poll() is not None:
                if timed_out:
                    kill(launches[side].proc)
                    hung.add(side)
                ended(side)
        # Wake at the earliest moment a side could run out of time (at most a second away).
        for key, _ in selector.select(timeout=1.0) if open_sides else ():
            side = key.data
            pipe = pipes[side]
            chunk = os.read(pipe.ask, 4096)
            if not chunk:
                ended(side)
                continue
            pipe.buffer += chunk
            *lines, pipe.buffer = pipe.buffer.split(b"\n")
            for line in lines:
                word, _, nodeid = line.decode(errors="replace").partition(" ")
                if word == "want":
                    broker.want(side, nodeid)
                    waiting_since[side] = time.monotonic()
                elif word in ("done", "over"):  # over: the side's last check, turn kept
                    turns.stop(side)
                    if word == "done":
                        broker.release(side)
        while side_to_go := broker.next():
            turns.start(side_to_go)
            since = waiting_since.pop(side_to_go, None)
            turn_times.append(time.monotonic())
            if since is not None:
                waited[side_to_go] += time.monotonic() - since
            try:
                os.write(pipes[side_to_go].go, b"go\n")
            except OSError:
                broker.exited(side_to_go)  # it ended between asking and being told
    for side, started in launches.items():
        if side not in hung:
            started.proc.wait()
    return hung


class Turns:
    """A side's end of the protocol (:mod:`perfsuite.ab.side` uses it)."""

    def __init__(self, spec: str) -> None:
        go, ask = (int(fd) for fd in spec.split(","))
        self._go = os.fdopen(go, "rb", buffering=0)
        self._ask = os.fdopen(ask, "wb", buffering=0)
        self.broken = False

    @classmethod
    def from_environment(cls) -> Turns | None:
        """The turns this process was started with, or None (then it runs freely).

        The variable is removed, so the processes a check starts do not take turns.
        """
        spec = os.environ.pop(ENV, "")
        if not spec:
            return None
        try:
            return cls(spec)
        except (ValueError, OSError):
            return None

    def take(self, what: str) -> None:
        """Wait for the turn to run ``what`` (a node id, or the whole session)."""
        if self.broken:
            return
        try:
            self._ask.write(f"want {what}\n".encode())
            if not self._go.readline():
                self.broken = True  # the broker is gone: run on
        except OSError:
            self.broken = True

    def give(self, what: str) -> None:
        """Say ``what`` has ended."""
        self._say(f"done {what}")

    def over(self, what: str) -> None:
        """Say ``what``, the session's last check, has ended; the turn is kept until exit.

        The broker reads the turn's load here, not after the session's own end (its record,
        its summary), which the side runs alone.
        """
        self._say(f"over {what}")

    def _say(self, line: str) -> None:
        if self.broken:
            return
        try:
            self._ask.write(f"{line}\n".encode())
        except OSError:
            self.broken = True
