"""The results store on disk: shard files written by many writers, read as one database.

Every writer (a pytest session, an import, a compaction) writes its own shard: a Parquet
file per table, named by schema version, host, process and a random token, written under a
temporary name, flushed to disk and renamed into place.  Its results file goes first and its
runs file last: a shard counts from the rename of its runs file, so a reader never sees half
of one, and a writer killed at any point leaves at most a temporary or a results file that
nothing reads (compaction removes them once they are an hour old).  No writer takes a lock
or changes a file another wrote, so writers on many hosts can share a folder on NFS.

A reader reads every shard in one DuckDB query.  A run stored twice (two imports of one
record at once) is read once.  Compaction merges the shards into one, atomically the same
way, then removes the shards it merged.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import secrets
import socket
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from perfsuite.errors import StorageError, first_line
from perfsuite.model import RunRecord
from perfsuite.store import rows, schema
from perfsuite.store.files import _fsync_directory as _fsync
from perfsuite.store.files import clean_stale_temporaries, write_text_atomic

if TYPE_CHECKING:
    import duckdb

T = TypeVar("T")
STALE_S = 3600.0  # a temporary, or a results file without its runs file, older than this
# A read that met a shard removed by a compaction under it is read again, after a pause
# that grows to half a second, jittered: under a loaded CI runner, with 8 writers merging
# tiers and a compaction in a loop, 5 tries (0.5 s in all) were not always enough.
RETRIES = 20
# Rows per Parquet row group: a writer holds about one per thread, and a result's row holds
# its samples and JSON (DuckDB's default of 122,880 took a compaction of 10^6 results to
# 1.6 GB; this, with two threads, to a third of that).
ROW_GROUP = 16_384
# tidy(): shards are merged FANOUT at a time, those of one size tier together (a tier spans
# a factor FANOUT of bytes, from TIER_BYTES up).
FANOUT = 8
TIER_BYTES = 64 << 10


def _duckdb() -> Any:
    try:
        import duckdb
    except ImportError:
        raise StorageError(
            "the results store needs DuckDB, which is not installed: pip install duckdb"
        ) from None
    return duckdb


def _literal(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _token() -> str:
    host = "".join(c if c.isalnum() or c in "._-" else "_" for c in socket.gethostname())
    return f"{host[:60] or 'host'}-{os.getpid()}-{secrets.token_hex(6)}"


@dataclass(frozen=True)
class Info:
    """What a store holds: runs and results, shard files and their versions, bytes."""

    runs: int
    results: int
    profiles: tuple[tuple[str, int], ...]  # each profile and its runs
    shards: int  # committed shards
    versions: tuple[int, ...]  # the schema versions of the shards
    bytes: int


class Store:
    """A results store: a folder of shards (see the module's doc)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @staticmethod
    def is_store(path: Path) -> bool:
        """Whether ``path`` is a results store's folder (it holds the marker file)."""
        return (path / schema.MARKER).is_file()

    @classmethod
    def open(cls, path: Path, *, create: bool = False) -> Store:
        """The store at ``path``; with ``create`` one is made there if there is none."""
        if cls.is_store(path):
            store = cls(path)
            store.shards("runs")  # refuses a newer version now, with one line
            return store
        if not create:
            what = "no results store" if not path.exists() else "not a results store"
            raise StorageError(f"{path}: {what} (its {schema.MARKER} file is missing)")
        if path.exists() and not path.is_dir():
            raise StorageError(f"{path}: not a folder, cannot hold a results store")
        for table in schema.TABLES:
            try:
                (path / table).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StorageError(f"{path}: cannot make a results store: {exc.strerror}") from None
        if not cls.is_store(path):  # writers racing to make it write the same text
            write_text_atomic(path / schema.MARKER, schema.MARKER_TEXT)
        return cls(path)

    def shards(self, table: str) -> list[schema.Shard]:
        """The table's committed-or-not shard files, by name; a newer version is refused."""
        try:
            names = sorted(os.listdir(self.path / table))
        except OSError as exc:
            raise StorageError(f"{self.path / table}: cannot list: {exc.strerror}") from None
        found = [s for s in map(schema.Shard.parse, names) if s is not None]
        schema.check_versions(str(self.path), {s.version for s in found})
        return found

    # Writing -----------------------------------------------------------------------------

    def append(self, records: Sequence[RunRecord], *, prefix: str = "") -> str:
        """Write ``records`` as one new shard; its name ("" when there was nothing)."""
        return self.append_data([r.to_dict() for r in records], prefix=prefix)

    def append_data(self, records: Sequence[Mapping[str, Any]], *, prefix: str = "") -> str:
        """Write run records in their JSON layout, each checked (``records.check_record``)."""
        if not records:
            return ""
        runs = rows.Columns(schema.RUNS)
        results = rows.Columns(schema.RESULTS)
        for data in records:
            runs.add(rows.run_row(data))
            for row in rows.result_rows(data):
                results.add(row)
        name = f"v{schema.SCHEMA_VERSION}-{prefix}{_token()}.parquet"
        self._write("results", name, results)
        self._write("runs", name, runs)
        return name

    def _write(self, table: str, name: str, columns: rows.Columns) -> None:
        types = schema.COLUMNS[table]
        arrays = columns.arrays()
        with self.connection(views=False) as con:
            con.execute(schema.create_table(table, "shard"))
            if len(columns):
                con.register("incoming", arrays)
                cols = ", ".join(f'"{c}"' for c in types)
                con.execute(
                    f"INSERT INTO shard ({cols}) SELECT {rows.select_list(types)} FROM incoming"
                )
            self._copy(con, "shard", self.path / table / name)

    def _copy(self, con: duckdb.DuckDBPyConnection, source: str, target: Path) -> None:
        """Write ``source`` (a table or a query) to ``target`` as Parquet, atomically."""
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            con.execute(
                f"COPY {source} TO {_literal(tmp)} (FORMAT parquet, COMPRESSION zstd, "
                f"ROW_GROUP_SIZE {ROW_GROUP})"
            )
            _fsync(tmp)  # a file or a folder alike
            os.replace(tmp, target)
            _fsync(target.parent)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            if isinstance(exc, OSError):
                raise StorageError(f"{target}: cannot write: {exc.strerror or exc}") from None
            duckdb = _duckdb()
            # A shard merged away under a merge's read: ``read`` runs the merge again.
            if isinstance(exc, duckdb.Error) and not isinstance(exc, duckdb.IOException):
                raise StorageError(f"{target}: cannot write: {first_line(exc)}") from None
            raise

    # Reading -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def connection(self, *, views: bool = True) -> Iterator[duckdb.DuckDBPyConnection]:
        """An in-memory DuckDB connection; with ``views`` the store's tables as views.

        ``runs`` holds each run once (from the first shard, by name, that holds it), with its
        ``shard`` and the ``results_file`` that holds its results; ``results`` holds those
        results, with their run's ``shard``.  Every row is in this version's layout.
        """
        con = _duckdb().connect(":memory:")
        try:
            con.execute("SET enable_progress_bar = false")
            if views:
                self._views(con)
            yield con
        finally:
            con.close()

    def _views(self, con: duckdb.DuckDBPyConnection) -> None:
        for table in ("runs", "results"):
            con.execute(f"CREATE TEMP VIEW all_{table} AS {self._read(table)}")
        results_dir = str(self.path / "results").replace("'", "''")
        con.execute(
            "CREATE TEMP VIEW runs AS SELECT * EXCLUDE (rank_, file), "
            f"'{results_dir}/' || shard AS results_file FROM (SELECT *, row_number() OVER "
            "(PARTITION BY run_id ORDER BY shard) AS rank_ FROM (SELECT *, "
            "regexp_extract(file, '[^/]+$') AS shard FROM all_runs)) WHERE rank_ = 1"
        )
        # The results of the runs read, from the shard each run is read from: joined on the
        # results' file as read (no text made per row).
        con.execute(
            "CREATE TEMP VIEW results AS SELECT r.* EXCLUDE (file), u.shard FROM all_results r "
            "JOIN runs u ON r.run_id = u.run_id AND r.file = u.results_file"
        )

    def _read(self, table: str) -> str:
        """A query of every shard file of ``table``, each version migrated to this one."""
        versions = sorted({s.version for s in self.shards(table)})
        parts = []
        for v in versions:
            pattern = _literal(self.path / table / f"v{v}-*.parquet")
            source = (
                f"(SELECT * EXCLUDE (filename), filename AS file FROM "
                f"read_parquet({pattern}, filename = true, union_by_name = true))"
            )
            parts.append(schema.migrated(table, v, source))
        if not parts:
            columns = ", ".join(f'NULL::{t} AS "{c}"' for c, t in schema.COLUMNS[table].items())
            return f"SELECT {columns}, NULL::VARCHAR AS file WHERE false"
        return " UNION ALL BY NAME ".join(f"({p})" for p in parts)

    def read(self, work: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        """``work`` run on a connection with the store's views.

        A compaction may remove shards while a query reads them: the query is run again on
        the shards there are then.
        """
        duckdb = _duckdb()
        for attempt in range(RETRIES):
            try:
                with self.connection() as con:
                    return work(con)
            except duckdb.IOException as exc:
                if attempt == RETRIES - 1:
                    raise StorageError(f"{self.path}: results store: {first_line(exc)}") from None
                time.sleep(min(0.5, 0.05 * (attempt + 1)) * random.uniform(0.5, 1.5))
            except duckdb.Error as exc:
                first = first_line(exc) or type(exc).__name__
                raise StorageError(f"{self.path}: corrupt results store: {first}") from None
        raise AssertionError("unreachable")

    def run_ids(self) -> set[str]:
        """The ids of the runs the store holds."""
        return self.read(
            lambda con: {r[0] for r in con.execute("SELECT run_id FROM runs").fetchall()}
        )

    def info(self) -> Info:
        """What the store holds (see :class:`Info`)."""

        def count(con: duckdb.DuckDBPyConnection) -> tuple[int, int, list[tuple[str, int]]]:
            (runs,) = con.execute("SELECT count(*) FROM runs").fetchone() or (0,)
            (results,) = con.execute("SELECT count(*) FROM results").fetchone() or (0,)
            profiles = con.execute(
                "SELECT profile, count(*) FROM runs GROUP BY profile ORDER BY profile"
            ).fetchall()
            return int(runs), int(results), [(str(p), int(n)) for p, n in profiles]

        runs, results, profiles = self.read(count)
        committed = self.shards("runs")
        size = sum(
            f.stat().st_size for t in schema.TABLES for f in (self.path / t).glob("v*.parquet")
        )
        return Info(
            runs, results, tuple(profiles), len(committed),
            tuple(sorted({s.version for s in committed})), size,
        )  # fmt: skip

    # Compaction --------------------------------------------------------------------------

    def compact(self) -> tuple[int, str]:
        """Merge every committed shard into one, in this version's layout.

        Returns the shards merged and the new shard's name ("" when there was one shard or
        none of this version, and nothing to do).  The merged shard is committed before any
        shard it replaces is removed: a reader sees every run throughout.
        """
        runs = self.shards("runs")
        self._clean({s.name for s in runs}, self.shards("results"))
        if len(runs) <= 1 and all(s.version == schema.SCHEMA_VERSION for s in runs):
            return 0, ""
        merged = [s.name for s in runs]
        return len(merged), self._merge(merged)

    def tidy(self) -> tuple[int, str]:
        """Merge the shards of one size tier once it holds FANOUT of them (after an append).

        Each session adds a shard; merged FANOUT at a time, tier by tier, a store of N runs
        keeps at most about FANOUT x log(N) / log(FANOUT) shards, and each run is rewritten
        about log(N) / log(FANOUT) times over its life.  Returns what :meth:`compact` does.
        """
        tiers: dict[int, list[str]] = {}
        for shard in self.shards("runs"):
            try:
                size = sum((self.path / t / shard.name).stat().st_size for t in schema.TABLES)
            except OSError:  # merged away meanwhile, or not committed whole
                continue
            tier = int(math.log(max(size, TIER_BYTES) / TIER_BYTES, FANOUT))
            tiers.setdefault(tier, []).append(shard.name)
        for tier in sorted(tiers):
            if len(tiers[tier]) >= FANOUT:
                return len(tiers[tier]), self._merge(tiers[tier])
        return 0, ""

    def _merge(self, merged: list[str]) -> str:
        """Write the runs of ``merged`` shards as one new shard, then remove them.

        Another merge may remove some of them first: their runs are then in its shard, and
        this one leaves them out (a read that met one vanishing is run again, and each try
        writes under a new name: a file, once in place, never changes).
        """

        def write(con: duckdb.DuckDBPyConnection) -> str:
            names = ", ".join("'" + n.replace("'", "''") + "'" for n in merged)
            (count,) = con.execute(
                f"SELECT count(*) FROM runs WHERE shard IN ({names})"
            ).fetchone() or (0,)
            if not count:  # every one merged by another meanwhile
                return ""
            name = f"v{schema.SCHEMA_VERSION}-compact-{_token()}.parquet"
            # Rows in any order (sorting wide rows is what would cost memory): readers sort.
            con.execute("SET preserve_insertion_order = false")
            con.execute(f"SET threads = {min(2, os.cpu_count() or 1)}")
            for table in schema.TABLES:
                cols = ", ".join(f'"{c}"' for c in schema.COLUMNS[table])
                query = f"(SELECT {cols} FROM {table} WHERE shard IN ({names}))"
                self._copy(con, query, self.path / table / name)
            return name

        name = self.read(write)
        for table in ("runs", "results"):  # uncommit first: a results file alone is unread
            for shard in merged:
                with contextlib.suppress(FileNotFoundError):
                    (self.path / table / shard).unlink()
        return name

    def _clean(self, committed: set[str], results: list[schema.Shard]) -> None:
        """Remove what killed writers left: old temporaries, old uncommitted results files."""
        for table in schema.TABLES:
            clean_stale_temporaries(self.path / table, STALE_S)
        now = time.time()
        for shard in results:
            if shard.name in committed:
                continue
            path = self.path / "results" / shard.name
            with contextlib.suppress(OSError):
                if now - path.stat().st_mtime > STALE_S:
                    path.unlink()
