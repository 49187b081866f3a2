"""The results store's layout: its tables, its shard files and its schema version.

A store is a folder of shard files (see :mod:`perfsuite.store.db`)::

    STORE/PERFSUITE-STORE              the marker: this folder is a perfsuite results store
    STORE/results/v1-HOST-PID-TOKEN.parquet   one row per result (check) of each run
    STORE/runs/v1-HOST-PID-TOKEN.parquet      one row per run: the shard's commit

Each file's name begins with the schema version its rows are in (``v1-``).  A reader reads
the shards of every version it knows, each through the migration that brings its rows to
this version (:data:`MIGRATIONS`), and refuses a store that holds a shard of a newer version
with one line.  Compaction writes every row in this version's layout, the way a run record
of an earlier version is read in this version's layout and written anew.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from perfsuite.errors import StorageError

# Version 1: the tables below.
SCHEMA_VERSION = 1
MARKER = "PERFSUITE-STORE"
MARKER_TEXT = "perfsuite results store: shards of runs/ and results/, read together\n"
TABLES = ("results", "runs")  # written in this order: a shard's runs file commits it

# The columns of each table, with their DuckDB types, in this version.
RUNS = {
    "run_id": "VARCHAR",
    "profile": "VARCHAR",
    "created": "VARCHAR",  # the record's text: UTC, ISO 8601
    "created_s": "DOUBLE",  # the same instant, seconds since the epoch (for ordering)
    "host": "VARCHAR",  # environment.host.node_label, else hostname ("" when unknown)
    "duration_s": "DOUBLE",
    "incomplete": "VARCHAR",
    "results": "INTEGER",
    "crashed": "INTEGER",
    "record_version": "INTEGER",  # the run record's schema version (model.SCHEMA_VERSION)
    "environment": "VARCHAR",  # JSON: the record's environment
    "record": "VARCHAR",  # JSON: the whole record less its results (environment included)
}
RESULTS = {
    "run_id": "VARCHAR",
    "position": "INTEGER",  # its place among the run's results
    "id": "VARCHAR",
    "check_name": "VARCHAR",
    "metric": "VARCHAR",
    "unit": "VARCHAR",
    "higher_is_better": "BOOLEAN",
    "median": "DOUBLE",
    "min": "DOUBLE",
    "max": "DOUBLE",
    "mean": "DOUBLE",
    "n": "INTEGER",
    "cv": "DOUBLE",
    "samples": "DOUBLE[]",  # the readings
    "floor_verdict": "VARCHAR",
    "baseline_verdict": "VARCHAR",
    "ratio": "DOUBLE",
    "p_value": "DOUBLE",
    "significant": "BOOLEAN",
    "outcome": "VARCHAR",
    "result": "VARCHAR",  # JSON: the whole result, as the run record holds it
}
COLUMNS = {"runs": RUNS, "results": RESULTS}

# How a shard of an earlier version is read in this version's layout: for version N, the
# SELECT list that turns a version-N shard's columns into version N+1's (``*`` keeps them).
# A column added in version N+1 is named here with its value for older rows, e.g.
# ``{1: "*, NULL::VARCHAR AS driver"}``.  Version 1 is the first: nothing to migrate yet.
MIGRATIONS: dict[str, dict[int, str]] = {"runs": {}, "results": {}}

_SHARD = re.compile(r"v([0-9]{1,6})-[A-Za-z0-9._-]{1,200}\.parquet")


@dataclass(frozen=True)
class Shard:
    """One shard file's name, read: its schema version and its name without the folder."""

    version: int
    name: str

    @classmethod
    def parse(cls, name: str) -> Shard | None:
        """A shard from a file name; None for anything else (a temporary, a stray file)."""
        match = _SHARD.fullmatch(name)
        return cls(int(match.group(1)), name) if match else None


def check_versions(where: str, versions: set[int]) -> None:
    """Refuse a store with a shard of a newer schema version than this perfsuite reads."""
    newer = sorted(v for v in versions if v > SCHEMA_VERSION)
    if newer:
        raise StorageError(
            f"{where}: results store holds shards of schema version {newer[-1]}, this "
            f"perfsuite reads versions 1 to {SCHEMA_VERSION}: upgrade perfsuite "
            "(the store is left untouched)"
        )


def migrated(table: str, version: int, source: str) -> str:
    """A SELECT that reads ``source`` (rows of ``version``) in this version's layout.

    ``source`` has a ``file`` column beside the table's (the file each row is read from),
    which is kept.
    """
    query = f"SELECT * FROM {source}"
    for v in range(version, SCHEMA_VERSION):
        query = f"SELECT {MIGRATIONS[table][v]} FROM ({query})"
    columns = ", ".join(f'"{c}"' for c in COLUMNS[table])
    return f"SELECT {columns}, file FROM ({query})"


def create_table(table: str, name: str) -> str:
    """DDL for an empty table of ``table``'s columns in this version."""
    columns = ", ".join(f'"{c}" {t}' for c, t in COLUMNS[table].items())
    return f"CREATE TEMP TABLE {name} ({columns})"
