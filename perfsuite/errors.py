"""Errors that perfsuite reports to the user as one line, without a traceback."""

from __future__ import annotations


def first_line(thing: object) -> str:
    """The first line of ``str(thing)`` (an exception, a warning's message), or ""."""
    text = str(thing).strip()
    return text.splitlines()[0] if text else ""


class PerfsuiteError(Exception):
    """A problem the user can fix; its message says what is wrong and where."""


class ProfileError(PerfsuiteError):
    """A hardware profile is unknown or malformed."""


class StorageError(PerfsuiteError):
    """A baseline or run record cannot be read or written."""


class BaselineMismatchError(StorageError):
    """A baseline belongs to another hardware profile than the one in use."""
