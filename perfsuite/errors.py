"""Errors that perfsuite reports to the user as one line, without a traceback."""

from __future__ import annotations


def first_line(thing: object) -> str:
    """The first line of ``str(thing)`` (an exception, a warning's message), or ""."""
    text = str(thing).strip()
    return text.splitlines()[0] if text else ""


# A skip reason with this marker is one a person must see even without ``-rs``: the checks
# could have run here, and an installation problem stopped them (e.g. a CPU-only TensorFlow on
# a machine with GPUs).  The plugin lifts the warning into the session's verdict block.
LOUD_SKIP = ". WARNING: "


def with_warning(reason: str, warning: str) -> str:
    """``reason`` marked as a loud skip that carries ``warning``."""
    return f"{reason}{LOUD_SKIP}{warning}"


def loud_skip(reason: str) -> str | None:
    """The warning a skip reason carries (after :data:`LOUD_SKIP`), or None."""
    _, marked, warning = reason.partition(LOUD_SKIP)
    return warning.strip() or None if marked else None


class PerfsuiteError(Exception):
    """A problem the user can fix; its message says what is wrong and where."""


class _OneLine(PerfsuiteError):
    """An error about a file: one line whatever the file put in it.

    A line break or other control character (a key in a hostile file, say) is shown escaped.
    """

    def __str__(self) -> str:
        """The message, control characters escaped."""
        text = super().__str__()
        if text.isprintable():
            return text
        return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


class ProfileError(_OneLine):
    """A hardware profile is unknown or malformed."""


class StorageError(_OneLine):
    """A baseline or run record cannot be read or written."""


class BaselineMismatchError(StorageError):
    """A baseline belongs to another hardware profile than the one in use."""
