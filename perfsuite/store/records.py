"""Run records on disk: loading one, and listing a profile's history."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from perfsuite.errors import StorageError
from perfsuite.model import (
    BASELINE_VERDICTS,
    FLOOR_VERDICTS,
    READABLE_VERSIONS,
    Crash,
    NoiseFlag,
    Result,
    RunRecord,
    upgraded,
)
from perfsuite.model.verdicts import CHOOSABLE, ORDER
from perfsuite.store.files import is_plain_name, read_json
from perfsuite.store.validate import (
    bad_samples,
    check_fields,
    check_printable,
    check_timestamp,
    check_value,
)

MAX_RECORD_BYTES = 512 << 20
# A reader's own checks of a record's data, with where it came from (see load_record).
Check = Callable[[Mapping[str, Any], str], None]
# Settings a record's readers act on, with the type each must have.
_SETTINGS_KEYS: dict[str, Any] = {
    "fail_on": tuple[str, ...],
    "policy": Mapping[str, Any],
    "quick": bool,
}
# Fields of a result's free-form maps that perfsuite reads, with the type each must have.
_READ_KEYS: dict[str, dict[str, Any]] = {
    "noise": {"flags": tuple[NoiseFlag, ...], "foreign_cores": float | None},
    "waiver": {"test": str, "reason": str, "status": str, "expires": str | None},
    "source": {"kind": str},
}
# A result's outcome: one of outcome.ORDER; "" before it was judged; pytest's words in the
# records of early versions (the fixtures of this repository hold some).
OUTCOMES = frozenset({*ORDER, "", "passed", "failed"})
# ``incomplete`` holds why a run stopped early ("" for a run that completed).  A yes/no word
# there is a hand edit that meant a flag, and reading it as a reason would call a complete
# run incomplete, or the reverse: it is refused.
_FLAG_WORDS = frozenset({"no", "yes", "true", "false", "0", "1", "n", "y", "none", "on", "off"})


def load_record(path: Path, first: Check | None = None) -> RunRecord:
    """Load and check one run record: every field's type, every sample, the profile's name.

    Anything a later step would trip over is a StorageError naming the file and the entry.
    A record of an earlier version is read in this version's layout (:func:`model.upgraded`).
    ``first``: a reader's own checks, run on that layout before the store's (a fleet names
    what is wrong in its own words).
    """
    data = read_json(path, "run record", READABLE_VERSIONS, max_bytes=MAX_RECORD_BYTES)
    return record_from(data, path, first)


def record_from(data: Mapping[str, Any], path: Path, first: Check | None = None) -> RunRecord:
    """The run record parsed JSON holds (its version already checked), checked whole."""
    data = upgraded(data)
    if first is not None:
        first(data, str(path))
    check_record(data, str(path))
    return RunRecord.from_dict(data)


def check_record(data: Mapping[str, Any], where: str) -> None:
    """Raise StorageError unless ``data`` is a run record perfsuite can use whole.

    ``data`` has this version's field names (see :func:`model.upgraded`).
    """
    check_fields(RunRecord, data, where)
    name = data["hardware_profile"].get("name")
    if not is_plain_name(name):
        raise StorageError(
            f"{where}: run record names hardware profile {name!r}, which is not a plain name"
        )
    if not data["run_id"].strip():
        raise StorageError(f"{where}: run record has an empty run_id")
    check_printable(data["run_id"], f"{where}: run_id")
    check_timestamp(data["created"], f"{where}: created")
    duration = data.get("duration_s")
    if duration is not None and duration < 0:
        raise StorageError(f"{where}: duration_s: expected seconds >= 0, got {duration!r}")
    incomplete = data.get("incomplete", "")
    if incomplete.strip().lower() in _FLAG_WORDS:
        raise StorageError(
            f'{where}: incomplete: expected why the run stopped early, or "" for a run '
            f"that completed, got {incomplete!r}"
        )
    check_value(data.get("crashed", []), tuple[Crash, ...], f"{where}.crashed")
    for i, crash in enumerate(data.get("crashed", [])):
        for key in ("id", "phase"):
            check_printable(crash[key], f"{where}: crashed[{i}].{key}")
    settings = data.get("settings", {})
    for key, hint in _SETTINGS_KEYS.items():
        if key in settings:
            check_value(settings[key], hint, f"{where}.settings.{key}")
    unknown = set(settings.get("fail_on") or ()) - set(CHOOSABLE)
    if unknown:
        raise StorageError(f"{where}.settings.fail_on: unknown outcome(s) {sorted(unknown)}")
    seen: set[str] = set()
    for i, raw in enumerate(data.get("results", [])):
        rid = raw.get("id") if isinstance(raw, dict) else None
        label = f"{where}: result {rid!r}" if isinstance(rid, str) else f"{where}: result {i}"
        check_result(raw, label)
        if raw["id"] in seen:
            raise StorageError(f"{label} appears twice")
        seen.add(raw["id"])


def check_result(raw: Any, where: str) -> None:
    """Raise StorageError unless ``raw`` is one result perfsuite can judge, show and store."""
    check_fields(Result, raw, where)
    for key in ("id", "metric", "unit", "check"):
        if not raw[key].strip():
            raise StorageError(f"{where}: {key!r} is empty")
        check_printable(raw[key], f"{where}: {key}")
    negative = [s for s in raw["seconds"] if s < 0]
    if negative:
        raise StorageError(f"{where}: seconds must be >= 0, got {negative[0]!r}")
    if raw.get("outcome", "") not in OUTCOMES:
        words = ", ".join(sorted(w for w in OUTCOMES if w))
        raise StorageError(
            f'{where}: outcome {raw["outcome"]!r} is unknown (one of {words}, or "")'
        )
    bad = bad_samples(raw["samples"])
    if not raw["samples"] or bad:
        raise StorageError(
            f"{where}: samples must be finite positive numbers, got {(bad or raw['samples'])[:3]!r}"
        )
    if raw["floor"]["verdict"] not in FLOOR_VERDICTS:
        raise StorageError(f"{where}: floor verdict {raw['floor']['verdict']!r} is unknown")
    if raw["baseline"]["verdict"] not in BASELINE_VERDICTS:
        raise StorageError(f"{where}: baseline verdict {raw['baseline']['verdict']!r} is unknown")
    for field, keys in _READ_KEYS.items():
        value = raw.get(field)
        if not isinstance(value, dict):
            continue
        for key, hint in keys.items():
            if key in value:
                check_value(value[key], hint, f"{where}: {field}.{key}")


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

    With ``skip_unreadable`` a corrupt record, or one of another profile, is left out (and
    its error appended to ``problems``); otherwise it is an error naming it.  Run ids begin
    with their UTC time, so sorting the file names sorts the runs.
    """
    paths = sorted((report_dir / profile).glob("*.json"))
    if not paths and not skip_unreadable:
        raise StorageError(f"{report_dir / profile}: no run records for profile {profile!r}")
    runs = []
    for path in paths[-last:] if last else paths:
        try:
            record = load_record(path)
            recorded = record.hardware_profile.get("name")
            if recorded != profile:
                raise StorageError(
                    f"{path}: a run record of profile {recorded!r} in the folder of {profile!r}"
                )
            runs.append(record)
        except StorageError as exc:
            if not skip_unreadable:
                raise
            if problems is not None:
                problems.append(str(exc))
    return sorted(runs, key=lambda r: (r.created, r.run_id))
