"""Run records on disk: loading one, and listing a profile's history."""

from __future__ import annotations

from pathlib import Path

from perfsuite.errors import StorageError
from perfsuite.model import SCHEMA_VERSION, RunRecord
from perfsuite.storage import is_plain_name, not_finite_positive, read_json


def load_record(path: Path) -> RunRecord:
    """Load and check one run record: fields, sample values and the profile's name."""
    data = read_json(path, "run record", SCHEMA_VERSION)
    try:
        record = RunRecord.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise StorageError(f"{path}: corrupt run record: bad or missing field ({exc})") from None
    name = record.hardware_profile.get("name")
    if not is_plain_name(name):
        raise StorageError(
            f"{path}: run record names hardware profile {name!r}, which is not a plain name"
        )
    for result in record.results:
        bad = not_finite_positive(result.samples)
        if not result.samples or bad:
            raise StorageError(
                f"{path}: result {result.id!r}: samples must be finite positive numbers, got "
                f"{list(result.samples)[:5] if not bad else bad[:3]!r}"
            )
    return record


def profiles(report_dir: Path) -> list[str]:
    """Profiles that have run records under a report directory."""
    if not report_dir.is_dir():
        return []
    return sorted(p.name for p in report_dir.iterdir() if p.is_dir() and any(p.glob("*.json")))


def history(
    report_dir: Path,
    profile: str,
    *,
    last: int | None = None,
    skip_unreadable: bool = False,
    problems: list[str] | None = None,
) -> list[RunRecord]:
    """The run records of a profile (the ``last`` ones by run id), oldest first.

    With ``skip_unreadable`` a corrupt record is left out (and its error appended to
    ``problems``); otherwise it is an error naming it.  Run ids begin with their UTC time,
    so sorting the file names sorts the runs.
    """
    paths = sorted((report_dir / profile).glob("*.json"))
    if not paths and not skip_unreadable:
        raise StorageError(f"{report_dir / profile}: no run records for profile {profile!r}")
    runs = []
    for path in paths[-last:] if last else paths:
        try:
            runs.append(load_record(path))
        except StorageError as exc:
            if not skip_unreadable:
                raise
            if problems is not None:
                problems.append(str(exc))
    return sorted(runs, key=lambda r: (r.created, r.run_id))
