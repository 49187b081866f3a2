"""What each task of a fleet run left behind: its status, beside its output.

``perfsuite fleet run`` keeps one status per task in ``DIR/nodes/task-N.json`` (written by
the task itself, or by the launching side for a task that never reported) and the task's
output in ``DIR/nodes/task-N.log``.  ``perfsuite fleet report`` reads them to name the
nodes that failed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from perfsuite.errors import StorageError
from perfsuite.fleet.aggregate import NODES_DIR
from perfsuite.fleet.labels import GRAMMAR, is_label, printable
from perfsuite.store.files import read_text_bounded

STATUS_VERSION = 1


@dataclass(frozen=True)
class NodeStatus:
    """One task's fate: ``failed`` is empty when it wrote its run record."""

    task: int
    label: str
    host: str
    failed: str = ""  # why it produced no record: a timeout, a crash, no status at all
    exit_code: int | None = None  # pytest's, None when it never finished
    seconds: float = 0.0
    log: str = ""  # its output, on the shared directory
    record: str = ""  # the run record it wrote
    output_tail: str = ""
    schema_version: int = STATUS_VERSION

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return asdict(self)

    @property
    def node(self) -> str:
        """The node the task ran on as Slurm names it (its host's short name), else its label.

        Empty when the task never said where it ran.
        """
        return self.host.split(".")[0] if self.host else self.label

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NodeStatus:
        """Rebuild a status; StorageError when it is not one.

        Its label and host must follow hostname grammar (or be empty: a task that never
        said where it ran); its texts are kept with control characters escaped, so that
        what a task said never reaches a terminal or a page raw.
        """
        try:
            task, exit_code = data["task"], data.get("exit_code")
            label, host = data["label"], data["host"]
            seconds = data.get("seconds", 0.0)
            if not _whole(task, 0, MAX_TASKS):
                raise ValueError(f"'task' {str(task)[:20]!r} is not a task index")
            if exit_code is not None and not _whole(exit_code, -(1 << 31), 1 << 31):
                raise ValueError(f"'exit_code' {str(exit_code)[:20]!r} is not an exit status")
            for what, name in (("label", label), ("host", host)):
                if name != "" and not is_label(name):
                    raise ValueError(f"{what} {str(name)[:80]!r} is not a host name: {GRAMMAR}")
            if isinstance(seconds, bool) or not isinstance(seconds, int | float):
                raise ValueError("'seconds' is not a number")
            if not 0 <= seconds < math.inf or seconds > 1e15:  # float() overflows past 1e308
                raise ValueError("'seconds' is not a finite number of seconds")
            return cls(
                task=task,
                label=label,
                host=host,
                failed=_text(data, "failed"),
                exit_code=exit_code,
                seconds=float(seconds),
                log=_text(data, "log"),
                record=_text(data, "record"),
                output_tail=_text(data, "output_tail", keep="\n\t"),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StorageError(f"not a fleet task status: {exc}") from None


# Task indices a fleet run may have (a million nodes, tasks a node included).
MAX_TASKS = 1 << 24


def _whole(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value < high


def _text(data: Mapping[str, Any], key: str, keep: str = "") -> str:
    value = data.get(key, "")
    if not isinstance(value, str):
        raise ValueError(f"{key!r} is not text")
    return printable(value, keep)


def status_path(directory: Path, task: int) -> Path:
    """Where task ``task`` keeps its status."""
    return directory / NODES_DIR / f"task-{task}.json"


def log_path(directory: Path, task: int) -> Path:
    """Where task ``task`` keeps its output."""
    return directory / NODES_DIR / f"task-{task}.log"


def read_statuses(directory: Path) -> list[NodeStatus]:
    """Every task status under ``directory`` (none when it holds no fleet run), by task."""
    out = []
    for path in sorted((directory / NODES_DIR).glob("task-*.json")):
        try:
            data = json.loads(read_text_bounded(path, "fleet task status", 1 << 24))
            if not isinstance(data, dict) or data.get("schema_version") != STATUS_VERSION:
                raise StorageError("not a fleet task status of this perfsuite")
            out.append(NodeStatus.from_dict(data))
        except (ValueError, RecursionError, StorageError) as exc:
            raise StorageError(f"{path}: {exc}") from None
    return sorted(out, key=lambda s: s.task)


def where(status: NodeStatus) -> str:
    """Where a task ran, for a reader: its label and host, or that it never said."""
    if status.host:
        return f"{status.label or 'no label'} on {status.host}"
    return "no host reported: the task never started, or died before it said where it ran"
