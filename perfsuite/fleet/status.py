"""What each task of a fleet run left behind: its status, beside its output.

``perfsuite fleet run`` keeps one status per task in ``DIR/nodes/task-N.json`` (written by
the task itself, or by the launching side for a task that never reported) and the task's
output in ``DIR/nodes/task-N.log``.  ``perfsuite fleet report`` reads them to name the
nodes that failed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from perfsuite.errors import StorageError
from perfsuite.fleet.aggregate import NODES_DIR

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

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NodeStatus:
        """Rebuild a status; StorageError when it is not one."""
        try:
            return cls(
                task=int(data["task"]),
                label=str(data["label"]),
                host=str(data["host"]),
                failed=str(data.get("failed", "")),
                exit_code=None if data.get("exit_code") is None else int(data["exit_code"]),
                seconds=float(data.get("seconds", 0.0)),
                log=str(data.get("log", "")),
                record=str(data.get("record", "")),
                output_tail=str(data.get("output_tail", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise StorageError(f"not a fleet task status: {exc}") from None


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
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or data.get("schema_version") != STATUS_VERSION:
                raise StorageError("not a fleet task status of this perfsuite")
            out.append(NodeStatus.from_dict(data))
        except (OSError, ValueError, StorageError) as exc:
            raise StorageError(f"{path}: {exc}") from None
    return sorted(out, key=lambda s: s.task)


def where(status: NodeStatus) -> str:
    """Where a task ran, for a reader: its label and host, or that it never said."""
    if status.host:
        return f"{status.label or 'no label'} on {status.host}"
    return "no host reported: the task never started, or died before it said where it ran"
