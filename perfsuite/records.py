"""Run records on disk: loading one, and listing a profile's history."""

from __future__ import annotations

from pathlib import Path

from perfsuite.errors import StorageError
from perfsuite.model import SCHEMA_VERSION, RunRecord
from perfsuite.storage import read_json


def load_record(path: Path) -> RunRecord:
    """Load and check one run record."""
    data = read_json(path, "run record", SCHEMA_VERSION)
    try:
        return RunRecord.from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise StorageError(f"{path}: corrupt run record: bad or missing field ({exc})") from None


def profiles(report_dir: Path) -> list[str]:
    """Profiles that have run records under a report directory."""
    if not report_dir.is_dir():
        return []
    return sorted(p.name for p in report_dir.iterdir() if p.is_dir() and any(p.glob("*.json")))


def history(
    report_dir: Path, profile: str, *, last: int | None = None, skip_unreadable: bool = False
) -> list[RunRecord]:
    """The run records of a profile (the ``last`` ones by run id), oldest first.

    With ``skip_unreadable`` a corrupt record is left out; otherwise it is an error naming it.
    Run ids begin with their UTC time, so sorting the file names sorts the runs.
    """
    paths = sorted((report_dir / profile).glob("*.json"))
    if not paths and not skip_unreadable:
        raise StorageError(f"{report_dir / profile}: no run records for profile {profile!r}")
    runs = []
    for path in paths[-last:] if last else paths:
        try:
            runs.append(load_record(path))
        except StorageError:
            if not skip_unreadable:
                raise
    return sorted(runs, key=lambda r: (r.created, r.run_id))
