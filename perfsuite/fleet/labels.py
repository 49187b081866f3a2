"""Node labels and host names, checked once where they are read.

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
"""

from __future__ import annotations

import re

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
