"""The processes ``perfsuite ab`` and ``perfsuite bisect`` start, and how they are ended.

Every side, every environment build and every preflight runs in a session of its own (its
own process group), so a side's workers, ranks and forks can be ended together, and a
terminal's Ctrl-C reaches only ``perfsuite`` itself, which decides what to keep.

* :func:`spawn` starts a process in a new session and registers it; :func:`end` ends its
  whole group, SIGTERM first (a pytest writes what it measured), then SIGKILL after
  :data:`GRACE_S`; :func:`end_all` ends every registered one still there.
* :func:`interruptible` turns SIGTERM and SIGHUP into the KeyboardInterrupt SIGINT raises,
  so one path (the rounds' ``except KeyboardInterrupt``) handles all three: the children
  are ended, what is known is written, the exit status is ``EXIT_INTERRUPTED``.  Signals
  after the first are ignored until the command has written its record: a second Ctrl-C
  must not cut the record it is writing in half.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from types import FrameType
from typing import Any

# How long a process group gets between SIGTERM and SIGKILL.
GRACE_S = 5.0
# The signals that interrupt a command (SIGINT raises KeyboardInterrupt by Python's default).
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_live: dict[int, subprocess.Popen[Any]] = {}
_received: list[int] = []  # the signals received inside the outermost interruptible()
_depth = [0]


def spawn(args: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """Start ``args`` in a new session (its own process group), registered until ended."""
    proc: subprocess.Popen[Any] = subprocess.Popen(list(args), start_new_session=True, **kwargs)
    _live[proc.pid] = proc
    return proc


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member we may not signal: still there
        return True
    return True


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def end(proc: subprocess.Popen[Any], grace: float = GRACE_S) -> None:
    """End ``proc``'s whole process group: SIGTERM, then SIGKILL to what is left after ``grace``.

    The group's leader is reaped; members it left behind (a worker that ignores SIGTERM, a
    fork still sleeping) are killed too.  Also right after a leader has exited by itself:
    nothing a side started outlives the side.
    """
    pgid = proc.pid
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if proc.poll() is not None and not _group_alive(pgid):
            break
        time.sleep(0.05)
    _signal_group(pgid, signal.SIGKILL)
    proc.wait()
    _live.pop(proc.pid, None)


def reap(proc: subprocess.Popen[Any]) -> None:
    """After ``proc`` has exited by itself: kill what its group still holds, forget it."""
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()
    _live.pop(proc.pid, None)


def end_all(grace: float = GRACE_S) -> None:
    """End every registered process group still there (SIGTERM to all, then SIGKILL)."""
    end_many(list(_live.values()), grace)


def end_many(procs: Sequence[subprocess.Popen[Any]], grace: float = GRACE_S) -> None:
    """End several process groups at once: one grace for all, not one each."""
    for proc in procs:
        _signal_group(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(
        proc.poll() is None or _group_alive(proc.pid) for proc in procs
    ):
        time.sleep(0.05)
    for proc in procs:
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()
        _live.pop(proc.pid, None)


def live() -> list[subprocess.Popen[Any]]:
    """The registered processes (not yet ended or reaped)."""
    return list(_live.values())


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


def received() -> int:
    """The first interrupting signal received (0: none)."""
    return _received[0] if _received else 0


def _handler(signum: int, frame: FrameType | None) -> None:
    if _received:  # already interrupted: let the command finish writing what it knows
        return
    _received.append(signum)
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt inside; every child ends on leaving.

    A signal the caller's parent left ignored (``nohup``'s SIGHUP) stays ignored.  Outside
    the main thread (no handlers can be set there) only the clean-up is done.
    """
    import threading

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
