"""Ending every process a fleet command started: on a timeout, and on SIGINT, SIGTERM, SIGHUP.

A launcher (``mpiexec``, ``srun``, ``sbatch --wait``) starts tasks that start pytest, and
each may sit in a session of its own (MPICH's proxies and a task's pytest do): killing the
launcher alone orphans them, and an orphaned pytest later writes a record for a task
already reported failed.  So the whole tree is ended: the launcher's process group and
every descendant seen on this host get SIGTERM (the launcher forwards it to remote tasks:
its own kill), and whatever still runs after a grace gets SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

import psutil

# The signals a fleet command turns into Interrupted, to end what it started and exit.
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# Seconds the tree gets between SIGTERM and SIGKILL: a task ends its pytest within its own
# grace (NODE_GRACE_S), and writes its status, well inside this one.
GRACE_S = 15.0
NODE_GRACE_S = 5.0
_POLL_S = 0.05


class Interrupted(Exception):
    """A signal asked the command to stop (the signal's number in ``signum``)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def name(self) -> str:
        """The signal's name: SIGINT, SIGTERM or SIGHUP."""
        return signal.Signals(self.signum).name


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Within the block the first of SIGNALS raises Interrupted; later ones are ignored.

    A signal already ignored when the block starts (``nohup``'s SIGHUP) is left ignored.

    Ignored, because the code that handles the first is ending the processes: a second
    Ctrl-C must not cut that short and orphan them.  Outside the main thread (where no
    handler can be set) the block runs as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    raised = False

    def handler(signum: int, frame: FrameType | None) -> None:
        nonlocal raised
        if not raised:
            raised = True
            raise Interrupted(signum)

    # A signal the parent left ignored (``nohup``'s SIGHUP) stays ignored, as in ``ab``.
    old = {s: signal.signal(s, handler) for s in SIGNALS if signal.getsignal(s) != signal.SIG_IGN}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


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


def _signal(known: dict[int, psutil.Process], pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pgid, sig)
    for p in known.values():
        with contextlib.suppress(psutil.Error):
            p.send_signal(sig)


def end_tree(proc: subprocess.Popen[Any], grace_s: float = GRACE_S) -> None:
    """End ``proc`` (a group leader: start_new_session) and every process it started here.

    SIGTERM to its group and to each descendant (new ones are looked for while waiting),
    then, after ``grace_s`` or as soon as all are gone, SIGKILL to whatever is left; the
    launcher is reaped.
    """
    known: dict[int, psutil.Process] = {}
    with contextlib.suppress(psutil.Error):
        known[proc.pid] = psutil.Process(proc.pid)
    _descendants(known)
    _signal(known, proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        proc.poll()  # reap the launcher, so that it does not read as running
        before = set(known)
        _descendants(known)
        new = {pid: p for pid, p in known.items() if pid not in before}
        _signal(new, proc.pid, signal.SIGTERM)
        if not any(_running(p) for p in known.values()):
            break
        time.sleep(_POLL_S)
    left = {pid: p for pid, p in known.items() if _running(p)}
    _signal(left, proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    psutil.wait_procs(list(left.values()), timeout=grace_s)


def end_group(proc: subprocess.Popen[Any], grace_s: float = NODE_GRACE_S) -> None:
    """What a task does to its pytest: :func:`end_tree` with the task's shorter grace."""
    end_tree(proc, grace_s)
