"""Every process perfsuite starts, how it is ended, and how a signal interrupts a command.

One module for the three places that start processes: a check's child or ranks
(:mod:`perfsuite.measure.sources`), the sides, builds and preflights of ``ab`` and ``bisect``, and a
fleet's launcher and each node's pytest.

* Every child runs in a session of its own (its own process group), so a terminal's Ctrl-C
  reaches only perfsuite, which decides what to keep.  :func:`spawn` starts one and
  registers it until it is ended.
* :func:`end_trees` ends children: SIGTERM to each one's process group and to every
  descendant seen on this host (a launcher's tasks may sit in sessions of their own: MPICH's
  proxies and a task's pytest do, and killing the launcher alone orphans them; an orphaned
  pytest later writes a record for a task already reported failed), new descendants looked
  for while waiting; after the grace, or as soon as all are gone, SIGKILL to whatever is
  left.  One grace for all the children, not one each.
* :func:`interruptible` turns SIGINT, SIGTERM and SIGHUP into :class:`Interrupted` (a
  ``KeyboardInterrupt``, so the rounds' ``except KeyboardInterrupt`` handles all three);
  signals after the first are ignored until the outermost block is left (a second Ctrl-C
  must not cut short the code that ends the children and writes the record), and on leaving
  it every registered child still there is ended.  A signal the parent left ignored
  (``nohup``'s SIGHUP) stays ignored.  Outside the main thread, where no handler can be set,
  only the clean-up is done.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from types import FrameType
from typing import Any, Protocol

import psutil

# The signals that interrupt a command (SIGINT raises KeyboardInterrupt by Python's default).
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# Seconds between SIGTERM and SIGKILL: an A/B side's pytest writes what it measured, and a
# fleet node's task ends its pytest in NODE_GRACE_S; a fleet's launcher gets LAUNCHER_GRACE_S,
# so that its tasks end their own pytests and write their statuses well inside it.
GRACE_S = 5.0
NODE_GRACE_S = 5.0
LAUNCHER_GRACE_S = 15.0
# How long a killed child is waited for, whatever the grace (a timed-out check's ranks).
KILL_WAIT_S = 10.0
_POLL_S = 0.05

_live: dict[int, subprocess.Popen[Any]] = {}


class Child(Protocol):
    """What ending a process needs of it, each the leader of a session of its own.

    A :class:`subprocess.Popen`, or a fork server's child (:class:`perfsuite.ab.forks.Forked`).
    """

    pid: int

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


_received: list[int] = []  # the signals received inside the outermost interruptible()
_depth = [0]


class Interrupted(KeyboardInterrupt):
    """A signal asked the command to stop (the signal's number in ``signum``)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def name(self) -> str:
        """The signal's name: SIGINT, SIGTERM or SIGHUP."""
        return signal.Signals(self.signum).name


def spawn(args: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """Start ``args`` in a new session (its own process group), registered until ended."""
    proc: subprocess.Popen[Any] = subprocess.Popen(list(args), start_new_session=True, **kwargs)
    _live[proc.pid] = proc
    return proc


def run(
    args: Sequence[str], timeout: float | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """:func:`subprocess.run` with text output, in its own group, ended with it on any error.

    A timeout or an interrupt ends the whole group (a ``uv`` and the builds it started), not
    only the process ``subprocess.run`` knows.
    """
    proc = spawn(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        end(proc)
        raise
    reap(proc)
    return subprocess.CompletedProcess(list(args), proc.returncode, out, err)


def live() -> list[subprocess.Popen[Any]]:
    """The registered processes (not yet ended or reaped)."""
    return list(_live.values())


def _descendants(known: dict[int, psutil.Process]) -> None:
    """Add to ``known`` the children of every process in it that still runs."""
    for p in list(known.values()):
        try:
            children = p.children(recursive=True)
        except psutil.Error:
            continue
        for c in children:
            known.setdefault(c.pid, c)


def _running(p: psutil.Process) -> bool:
    try:
        return bool(p.is_running() and p.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _signal(known: dict[int, psutil.Process], groups: Sequence[int], sig: signal.Signals) -> None:
    for pgid in groups:
        with contextlib.suppress(OSError):
            os.killpg(pgid, sig)
    for p in known.values():
        with contextlib.suppress(psutil.Error):
            p.send_signal(sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member we may not signal: still there
        return True
    return True


def end_trees(procs: Sequence[Child], grace_s: float = GRACE_S) -> None:
    """End each of ``procs`` (group leaders: started in sessions of their own) and their trees.

    SIGTERM to their groups and to every descendant (new ones are looked for while
    waiting); then, after ``grace_s`` or as soon as all are gone, SIGKILL to what is left.
    The leaders are reaped and forgotten.
    """
    groups = [proc.pid for proc in procs]
    known: dict[int, psutil.Process] = {}
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            known[proc.pid] = psutil.Process(proc.pid)
    _descendants(known)
    _signal(known, groups, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        for proc in procs:
            proc.poll()  # reap a leader, so that it does not read as running
        before = set(known)
        _descendants(known)
        _signal({pid: p for pid, p in known.items() if pid not in before}, (), signal.SIGTERM)
        if not any(_running(p) for p in known.values()) and not any(map(_group_alive, groups)):
            break
        time.sleep(_POLL_S)
    left = {pid: p for pid, p in known.items() if _running(p)}
    _signal(left, groups, signal.SIGKILL)
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(grace_s, KILL_WAIT_S))
        _live.pop(proc.pid, None)
    psutil.wait_procs(list(left.values()), timeout=max(grace_s, KILL_WAIT_S))


def end_tree(proc: Child, grace_s: float = GRACE_S) -> None:
    """:func:`end_trees` of one process."""
    end_trees([proc], grace_s)


def end(proc: Child, grace: float = GRACE_S) -> None:
    """End ``proc``'s tree; also right after it exited by itself (what it left behind)."""
    end_trees([proc], grace)


def end_many(procs: Sequence[Child], grace: float = GRACE_S) -> None:
    """End several trees at once: one grace for all."""
    end_trees(procs, grace)


def end_group(proc: subprocess.Popen[Any], grace_s: float = NODE_GRACE_S) -> None:
    """What a fleet node's task does to its pytest: :func:`end_tree` with the node's grace."""
    end_trees([proc], grace_s)


def reap(proc: Child) -> None:
    """After ``proc`` has exited by itself: kill what its group still holds, forget it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    _live.pop(proc.pid, None)


def end_all(grace: float = GRACE_S) -> None:
    """End every registered child still there (SIGTERM to all, then SIGKILL)."""
    if _live:
        end_trees(list(_live.values()), grace)


def received() -> int:
    """The first interrupting signal received (0: none)."""
    return _received[0] if _received else 0


def _handler(signum: int, frame: FrameType | None) -> None:
    if _received:  # already interrupted: let the command finish what it does about it
        return
    _received.append(signum)
    raise Interrupted(signum)


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raise :class:`Interrupted` inside; every child ends on leaving."""
    main = threading.current_thread() is threading.main_thread()
    before: dict[int, Any] = {}
    if main:
        for sig in SIGNALS:
            current = signal.getsignal(sig)
            if current is signal.SIG_IGN:
                continue
            before[sig] = current
            signal.signal(sig, _handler)
    _depth[0] += 1
    try:
        yield
    finally:
        _depth[0] -= 1
        try:
            end_all()
        finally:
            for number, old in before.items():
                signal.signal(number, old)
            if _depth[0] == 0:
                _received.clear()
