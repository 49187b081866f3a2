"""Warm pages: memory a ``perfsuite ab`` side's server keeps resident for its next round.

On a VM whose balloon driver gives free memory back to the host (virtio-balloon's free page
reporting), the pages a process frees are handed back within seconds, and the next process
to touch as much memory waits while the host backs every page again.  On a 2-core VM with a
480 MiB L3, touching a 1.9 GiB array took 3-5 s in a new process, and 0.3-0.9 s where
another process had freed that much a moment before; a STREAM set (three such arrays) took
8 s to fill there, against 1.2 s on pages just freed.  A warm side forks a new process every
round, so each round paid for its set again, inside its turns: 6-18 s a side beside a CPU
burner, more than its STREAM samples.

So a side's server keeps the pages between rounds (:class:`Keeper`).  When a child has
freed its STREAM set, inside its own turn, it asks the server to hold as many bytes
resident (:func:`keep`); the next round's child, about to build its set, asks the server to
free them (:func:`take`), and its own allocation then finds pages the host still backs.
The set is still the child's own private memory, allocated and filled as in any run (a
shared mapping would give the child the kernel's small pages: 11% less copy bandwidth on
that VM than numpy's transparent huge pages); only where its pages come from changes.
Both requests wait for the server's answer, so its work falls in the asking side's turn
and never beside the other side's samples.

The link is two pipes the server makes before each fork (:func:`connect` in the child): a
line ``take N`` or ``keep N`` asks, a line ``ok`` answers.  Outside a warm side, or once
the server fails to answer, both calls do nothing.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import select
import time
from collections.abc import Callable

# How long a child waits for its server's answer before it stops asking.
ANSWER_TIMEOUT_S = 60.0
# The server keeps pages only where they are within this share of the available memory.
# In lockstep the two sides hold their sets at once anyway (their STREAM checks alternate);
# with ``--interleave processes`` kept pages are held beside the other side's set, which a
# single set's run would not do.
KEEP_SHARE = 0.8
PAGE_BYTES = 4096
# madvise(MADV_POPULATE_WRITE), Linux 5.14: fault every page in, writable, in one call.
_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)


class _Link:
    """The child's end: it asks on one pipe and reads the answer on the other."""

    def __init__(self, ask: int, answer: int) -> None:
        self.ask = ask
        self.answer = answer

    def request(self, verb: str, nbytes: int) -> bool:
        """Send ``verb N`` and wait for ``ok``; False when the server did not answer."""
        try:
            os.write(self.ask, f"{verb} {int(nbytes)}\n".encode())
            deadline = time.monotonic() + ANSWER_TIMEOUT_S
            said = b""
            while not said.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.answer], [], [], left)[0]:
                    return False
                data = os.read(self.answer, 64)
                if not data:
                    return False
                said += data
            return said.strip() == b"ok"
        except (OSError, ValueError):
            return False


_link: _Link | None = None


def connect(ask: int, answer: int) -> None:
    """Ask the server through these pipes from now on (the forked side, before its session)."""
    global _link
    _link = _Link(ask, answer)


def connected() -> bool:
    """Whether this process is a warm side whose server keeps pages."""
    return _link is not None


def take(nbytes: int) -> None:
    """About to allocate ``nbytes``: the server frees the pages it kept, for this process."""
    _ask("take", nbytes)


def keep(nbytes: int) -> None:
    """Just freed ``nbytes``: the server keeps as many resident for the next round."""
    _ask("keep", nbytes)


def _ask(verb: str, nbytes: int) -> None:
    global _link
    if _link is not None and nbytes > 0 and not _link.request(verb, nbytes):
        _link = None  # a server that does not answer is not asked again


class Keeper:
    """The server's end: holds one resident mapping between a side's rounds.

    ``note`` gets a line for each thing it does (the server's log).
    """

    def __init__(self, note: Callable[[str], None] = lambda line: None) -> None:
        self.note = note
        self.kept: mmap.mmap | None = None
        self.asked = False  # whether the child of this round asked for anything

    @property
    def kept_bytes(self) -> int:
        return len(self.kept) if self.kept is not None else 0

    def answer(self, line: str) -> str:
        """Carry out one request line; the answer to send back.

        A failure to keep is noted and answered ``ok``: the child builds as it would without
        a server, and the server goes on serving.
        """
        verb, _, count = line.strip().partition(" ")
        if verb not in ("take", "keep") or not count.isdigit():
            return "unknown"
        self.asked = True
        try:
            if verb == "take":
                self.free()
            else:
                self.hold(int(count))
        except Exception as exc:  # a keeper's failure must not end the server
            self.note(f"pages: {verb} failed: {type(exc).__name__}: {exc}")
        return "ok"

    def free(self) -> None:
        """Give the kept pages back (for the child that asked, a moment before it allocates)."""
        if self.kept is not None:
            size = self.kept_bytes
            self.kept.close()
            self.kept = None
            self.note(f"pages: freed {size / 2**30:.2f} GiB for the side's child")

    def hold(self, nbytes: int) -> None:
        """Map ``nbytes`` and fault them in, where memory allows; the old mapping goes first."""
        import psutil

        self.free()
        available = psutil.virtual_memory().available
        if nbytes > KEEP_SHARE * available:
            self.note(
                f"pages: not kept: {nbytes / 2**30:.2f} GiB of {available / 2**30:.2f} GiB "
                "available"
            )
            return
        started = time.monotonic()
        try:
            kept = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        except (OSError, ValueError) as exc:
            self.note(f"pages: not kept: {exc}")
            return
        with contextlib.suppress(OSError, AttributeError):
            kept.madvise(mmap.MADV_HUGEPAGE)  # the huge pages a child's arrays get
        try:
            # A child forked later must not share these pages: they are freed for it.
            kept.madvise(mmap.MADV_DONTFORK)
            _fault_in(kept)
        except (OSError, AttributeError) as exc:
            kept.close()
            self.note(f"pages: not kept: {exc}")
            return
        self.kept = kept
        self.note(
            f"pages: kept {nbytes / 2**30:.2f} GiB resident "
            f"({time.monotonic() - started:.2f} s to fault in)"
        )

    def round_ended(self) -> None:
        """A round is over (both sides ended): pages its child did not ask about are not wanted.

        Called between rounds, not when the child exits: the other side may still measure.
        """
        if not self.asked:
            self.free()
        self.asked = False


def _fault_in(mapping: mmap.mmap) -> None:
    """Fault every page of ``mapping`` in, writable: one call, else one write per page.

    The writes only where the kernel does not know the call (before Linux 5.14): a call that
    failed for want of memory raises, where writes would wake the OOM killer.
    """
    try:
        mapping.madvise(_POPULATE_WRITE)
        return
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
    for offset in range(0, len(mapping), PAGE_BYTES):
        mapping[offset] = 1
