"""Node labels, host names and paths, checked once where they are read.

A node's label goes to the terminal, the HTML page, ``drain.json`` and the commands a report
prints, and from ``drain.json`` into a drain loop such as ``scontrol update nodename=...``:
a label ``node17`` + newline + ``node03`` would drain node03, and ``node17,node02`` both.
So every label or host name perfsuite reads (a hostfile, ``--nodelist``, Slurm's
environment, a run record, a digest, a task's status, a ``--confirm`` rerun) must follow
hostname grammar: dot-separated parts of letters, digits and '-', each starting and ending
with a letter or digit, at most 63 characters a part and 253 in all.  A task's suffix
``-tN`` (several tasks on one host) is a part's ending, so it needs no rule of its own.
Anything else is refused where it is read, with the reader's own error, so nothing
downstream ever sees it.

The paths the fleet commands are given reach the same places (and a batch script), so a
line break or escape code in one is refused as it is read (:func:`check_text`), and so is an
empty one (the current directory, by accident).  An output is checked whole before the
first output is written (:func:`check_output`): a report that cannot write its page must
not have written its drain list already.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from perfsuite.errors import PerfsuiteError, StorageError
from perfsuite.store.files import check_target

_PART = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_LABEL = re.compile(rf"{_PART}(?:\.{_PART})*", re.ASCII)
MAX_LABEL = 253
GRAMMAR = "letters, digits, '-' and '.' (hostname grammar, with an optional -tN task suffix)"


def is_label(text: object) -> bool:
    """Whether ``text`` is a node label or host name by hostname grammar."""
    return isinstance(text, str) and len(text) <= MAX_LABEL and _LABEL.fullmatch(text) is not None


def from_host(name: str) -> str:
    """A label made from a host's name as the system gives it: its short name, made valid.

    Runs of characters outside the grammar become one '-'; an empty result is ``host``.
    """
    short = re.sub(r"[^A-Za-z0-9-]+", "-", name.split(".")[0], flags=re.ASCII).strip("-")
    return short[:63].rstrip("-") or "host"


def printable(text: str, keep: str = "") -> str:
    """``text`` with every control or other unprintable character shown escaped.

    For what a task or a file says that is shown as it is (a task's output, a reason):
    an escape code never reaches the terminal.  Characters of ``keep`` (say, a line break
    in a multi-line output) are left as they are.
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in keep else repr(c)[1:-1] for c in text)


class FleetError(PerfsuiteError):
    """A fleet that cannot be started or judged as asked (the message says why).

    One line, whatever a path or a host name in it holds: control characters are escaped.
    """

    def __str__(self) -> str:
        """The message, control characters escaped."""
        return printable(super().__str__())


def check_text(what: str, text: str, *, absolute: bool = False) -> Path:
    """The path ``text`` names; FleetError when it is empty or holds a control character.

    ``absolute``: its absolute path is checked too, for a path that is shown or written
    absolute (a relative ``--dir`` under a current directory whose name holds a line break).
    """
    if not text:
        raise FleetError(f"{what} '': an empty path; name the directory or file")
    if not text.isprintable():
        raise FleetError(
            f"{what} {text!r}: a line break or control character in a path would reach the "
            "batch script, drain.json and the terminal; choose another path"
        )
    path = Path(text)
    full = str(path.absolute())
    if absolute and not full.isprintable():
        raise FleetError(
            f"{what} {text}: its absolute path {full!r} holds a line break or control "
            "character (the current directory's); it would reach the batch script and the "
            "terminal: run from another directory, or give an absolute path"
        )
    return path


def check_creatable(what: str, directory: Path) -> None:
    """Refuse a directory that cannot be made, without making anything.

    The nearest part of the path that exists must be a directory this user may write in.
    """
    existing = _nearest(directory)
    if existing == directory and existing.is_dir():
        return
    if not existing.is_dir():
        raise FleetError(f"{what} {directory}: directory is not writable: {existing} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise FleetError(
            f"{what} {directory}: directory is not writable: {existing} is not writable"
        )


def check_output(what: str, path: Path) -> None:
    """Refuse an output file that cannot be written, before any output is written.

    It must be a regular file or not exist yet (an atomic write replaces a FIFO or a device
    with a regular file), and a file must be creatable beside it: its folder, or the nearest
    one that exists, is tried with a nameless temporary file, which leaves nothing behind
    (``/proc`` takes none, even from root, whom the permission bits would let through).
    """
    folder = _nearest(path.absolute().parent)
    if not folder.is_dir():
        raise FleetError(f"{what} {path}: {folder} is a file, not a folder; name another")
    try:
        check_target(path)
    except StorageError as exc:
        raise FleetError(f"{what} {exc}") from None
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise FleetError(
            f"{what} {path}: files cannot be created in {folder} ({exc.strerror or exc}); "
            "write it elsewhere"
        ) from None


def _nearest(path: Path) -> Path:
    """``path``, or the nearest folder above it that exists."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path
