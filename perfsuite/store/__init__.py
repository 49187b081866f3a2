"""The results store: every run's readings, environment and verdicts in one database.

The JSON run records stay the interchange format; the store holds them again, as tables a
query reads at once (:mod:`perfsuite.store.db` for the layout on disk, which many writers
share without a lock).  Each pytest session appends its run to the default store,
``<report-dir>/_store``, after writing its record; ``perfsuite store import`` loads records
written before.  This package stores and reads: it judges nothing and reports nothing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite.errors import StorageError, first_line
from perfsuite.model import READABLE_VERSIONS, RunRecord, upgraded
from perfsuite.store.db import Info, Store
from perfsuite.store.files import read_json
from perfsuite.store.query import History, Series, load_from_store, series
from perfsuite.store.rows import host_of
from perfsuite.store.schema import SCHEMA_VERSION

__all__ = [
    "DEFAULT_NAME",
    "SCHEMA_VERSION",
    "History",
    "Imported",
    "Info",
    "Series",
    "Store",
    "append_run",
    "default_path",
    "import_dir",
    "load_runs",
    "series",
]

DEFAULT_NAME = "_store"  # under the report directory; no profile can be named so
BATCH = 256  # records per shard an import writes


def default_path(report_dir: Path) -> Path:
    """Where a session's runs are stored: ``<report_dir>/_store``."""
    return report_dir / DEFAULT_NAME


def append_run(report_dir: Path, record: RunRecord) -> str:
    """Append a session's run to the default store: "" when done, else a one-line warning.

    Called after the run record is written; nothing here may lose it or fail the run.
    """
    path = default_path(report_dir)
    try:
        store = Store.open(path, create=True)
        store.append([record])
        store.tidy()
    except Exception as exc:  # the record is written: a store problem is only a warning
        text = first_line(exc) or type(exc).__name__
        return f"perfsuite: warning: run not added to the results store {path}: {text}"
    return ""


def load_runs(
    source: Path | Store,
    profile: str | None = None,
    run_ids: Sequence[str] | None = None,
    *,
    latest: bool = False,
) -> list[RunRecord]:
    """Run records from a store, a folder of records, or one record file; oldest first.

    ``profile`` keeps that profile's runs; ``run_ids`` those runs, each of which must be
    there; ``latest`` each node's latest run of each profile (a fleet: a node is its fleet
    label, else its host name).  A folder is a report directory (``<profile>/<run>.json``)
    or one profile's folder; its records are read strictly, as
    :func:`perfsuite.store.records.load_record` reads them.
    """
    from perfsuite.store import records

    if isinstance(source, Store) or Store.is_store(source):
        store = source if isinstance(source, Store) else Store.open(source)
        found = load_from_store(store, profile, run_ids, latest)
    elif source.is_file():
        found = [records.load_record(source)]
    elif source.is_dir():
        found = _from_folder(source, profile)
    else:
        raise StorageError(f"{source}: no such store, folder or run record")
    if profile is not None:
        found = [r for r in found if r.hardware_profile.get("name") == profile]
    if latest:
        last = {(r.hardware_profile.get("name"), host_of(r.environment)): r for r in found}
        keep = {id(r) for r in last.values()}
        found = [r for r in found if id(r) in keep]
    if run_ids is None:
        return found
    by_id = {r.run_id: r for r in found}
    missing = [i for i in run_ids if i not in by_id]
    if missing:
        raise StorageError(f"{source}: holds no run {missing[0]!r}")
    return [by_id[i] for i in run_ids]


def _from_folder(folder: Path, profile: str | None) -> list[RunRecord]:
    from perfsuite.store import records

    if any(folder.glob("*.json")):  # one profile's folder
        paths = sorted(folder.glob("*.json"))
        found = [records.load_record(p) for p in paths]
    else:
        names = [profile] if profile is not None else records.profiles(folder)
        found = [r for name in names for r in records.history(folder, name)]
    return sorted(found, key=lambda r: (r.created, r.run_id))


@dataclass
class Imported:
    """What an import did: runs added, runs the store held already, files it could not read."""

    added: int = 0
    already: int = 0
    unreadable: list[str] = field(default_factory=list)  # one line each
    shards: list[str] = field(default_factory=list)


def record_files(directory: Path) -> list[Path]:
    """The run record files under ``directory``, at any depth (not fleet digests)."""
    found = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if d != DEFAULT_NAME)
        found += [
            Path(root, f) for f in sorted(files) if f.endswith(".json")
            and not f.endswith(".fleet.json")
        ]  # fmt: skip
    return found


def import_dir(store: Store, directory: Path) -> Imported:
    """Add the run records under ``directory`` that the store lacks.

    Importing twice adds nothing; a file that is no readable record is listed in one line,
    and skipped.
    """
    if not directory.is_dir():
        raise StorageError(f"{directory}: no such folder")
    known = store.run_ids()
    done = Imported()
    batch: list[dict[str, Any]] = []
    for path in record_files(directory):
        try:
            data = _checked(path)
        except StorageError as exc:
            done.unreadable.append(first_line(exc))
            continue
        if data["run_id"] in known:
            done.already += 1
            continue
        known.add(data["run_id"])
        batch.append(data)
        if len(batch) >= BATCH:
            done.shards.append(store.append_data(batch, prefix="import-"))
            done.added += len(batch)
            batch = []
    if batch:
        done.shards.append(store.append_data(batch, prefix="import-"))
        done.added += len(batch)
    return done


def _checked(path: Path) -> dict[str, Any]:
    """A record file's JSON, in this version's layout, checked as ``load_record`` checks it.

    The store keeps the JSON form: rebuilding the record's objects would only cost time.
    """
    from perfsuite.store import records

    data = read_json(path, "run record", READABLE_VERSIONS, max_bytes=records.MAX_RECORD_BYTES)
    data = upgraded(data)
    records.check_record(data, str(path))
    return data
