"""What the store answers: each check's history as arrays, and whole run records."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from perfsuite.errors import StorageError
from perfsuite.model import READABLE_VERSIONS, RunRecord, upgraded
from perfsuite.store import rows
from perfsuite.store.db import Store

if TYPE_CHECKING:
    import duckdb


@dataclass(frozen=True)
class Series:
    """One check's per-run medians, oldest first, ready for change-point detection.

    ``run`` numbers each point by the profile's runs (0 is the profile's first run in the
    store, whatever ``since`` or ``last`` left out), so a check missing from some runs keeps
    the run numbers of the profile.  Points measured in a unit other than the check's latest
    are left out: they are not comparable.
    """

    check: str  # the result's id
    unit: str
    higher_is_better: bool
    run: np.ndarray  # int64: the run's number among the profile's runs
    created: np.ndarray  # datetime64[s], UTC
    median: np.ndarray  # float64, in ``unit``

    def __len__(self) -> int:
        return int(self.median.size)


@dataclass(frozen=True)
class History:
    """A profile's runs in range and the series of its checks."""

    profile: str
    run_ids: tuple[str, ...]  # the runs in range, oldest first
    run: np.ndarray  # int64: each one's number among the profile's runs
    created: np.ndarray  # datetime64[s], UTC
    series: tuple[Series, ...]  # by check id

    def of(self, check: str) -> Series | None:
        """The series of one check id, None when it has none in range."""
        return next((s for s in self.series if s.check == check), None)


def _since_s(since: dt.datetime | str | None) -> float | None:
    if since is None:
        return None
    try:
        when = dt.datetime.fromisoformat(since) if isinstance(since, str) else since
    except ValueError:
        raise StorageError(
            "since: expected a date or an ISO 8601 time such as 2026-11-20 or "
            f"2026-11-20T01:00:00+00:00, got {since!r}"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def _runs_sql(since: float | None, last: int | None) -> tuple[str, list[Any]]:
    """The profile's runs in range, numbered among all its runs (``n``)."""
    params: list[Any] = []
    where = []
    if since is not None:
        where.append("created_s >= ?")
        params.append(since)
    if last is not None:
        where.append("n >= total - ?")
        params.append(last)
    cond = f"WHERE {' AND '.join(where)}" if where else ""
    sql = (
        "SELECT run_id, results_file, created_s, n FROM (SELECT run_id, results_file, "
        "created_s, row_number() OVER (ORDER BY created_s, run_id) - 1 AS n, "
        f"count(*) OVER () AS total FROM runs WHERE profile = ?) {cond}"
    )
    return sql, params


def _history(
    con: duckdb.DuckDBPyConnection,
    profile: str,
    checks: Collection[str] | None,
    since: float | None,
    last: int | None,
) -> History:
    runs_sql, params = _runs_sql(since, last)
    con.execute(f"CREATE TEMP TABLE span AS {runs_sql}", [profile, *params])
    only = ""
    if checks is not None:
        con.execute("CREATE TEMP TABLE wanted AS SELECT unnest(?::VARCHAR[]) AS id", [list(checks)])
        only = "AND r.id IN (SELECT id FROM wanted)"
    # Read straight from the shards' results, joined to the runs in range on the file each
    # run's results are read from (so a run stored twice counts once).
    con.execute(
        "CREATE TEMP TABLE points AS SELECT r.id, r.unit, r.higher_is_better AS hib, s.n, "
        "s.created_s, r.median FROM all_results r JOIN span s ON r.run_id = s.run_id AND "
        f"r.file = s.results_file WHERE r.median > 0 AND isfinite(r.median) {only}"
    )
    # Each check's latest unit and direction, numbered; its points in that unit only.
    con.execute(
        "CREATE TEMP TABLE keys AS SELECT row_number() OVER (ORDER BY id) - 1 AS k, * FROM "
        "(SELECT id, arg_max(unit, n) AS unit, arg_max(hib, n) AS hib FROM points GROUP BY id)"
    )
    keys = con.execute("SELECT id, unit, hib FROM keys ORDER BY k").fetchall()
    got = con.execute(
        "SELECT k, n, created_s, median FROM points JOIN keys USING (id, unit) ORDER BY k, n"
    ).fetchnumpy()
    span = con.execute("SELECT run_id, n, created_s FROM span ORDER BY n").fetchnumpy()
    k = np.asarray(got["k"], dtype=np.int64)
    ends = np.cumsum(np.bincount(k, minlength=len(keys)))
    run = np.asarray(got["n"], dtype=np.int64)
    created = _times(got["created_s"])
    median = np.asarray(got["median"], dtype=np.float64)
    series = []
    start = 0
    for (check, unit, hib), end in zip(keys, ends.tolist(), strict=True):
        series.append(
            Series(str(check), str(unit), bool(hib), run[start:end], created[start:end],
                   median[start:end])
        )  # fmt: skip
        start = end
    return History(
        profile,
        tuple(str(r) for r in span["run_id"]),
        np.asarray(span["n"], dtype=np.int64),
        _times(span["created_s"]),
        tuple(series),
    )


def _times(seconds: Any) -> np.ndarray:
    return np.round(np.asarray(seconds, dtype=np.float64)).astype("datetime64[s]")


def series(
    store: Store,
    profile: str,
    checks: Collection[str] | None = None,
    since: dt.datetime | str | None = None,
    last: int | None = None,
) -> History:
    """The history of every check of ``profile`` (or of ``checks``): per-run medians.

    ``since`` keeps the runs created then or later (a time without a zone is UTC); ``last``
    the profile's last N runs (of those).  Run numbers count the profile's runs.
    """
    if last is not None and last < 1:
        raise StorageError(f"last: expected 1 or more runs, got {last}")
    return store.read(lambda con: _history(con, profile, checks, _since_s(since), last))


def load_from_store(
    store: Store,
    profile: str | None = None,
    run_ids: Sequence[str] | None = None,
    latest: bool = False,
) -> list[RunRecord]:
    """Whole run records from the store, each checked as a record file is, oldest first.

    ``latest`` keeps each node's latest run of each profile (a node: its fleet label, else
    its host name).
    """
    from perfsuite.store.records import check_record

    def fetch(con: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
        cond: list[str] = []
        params: list[Any] = []
        if profile is not None:
            cond.append("u.profile = ?")
            params.append(profile)
        if run_ids is not None:
            cond.append("list_contains(?, u.run_id)")
            params.append(list(run_ids))
        if latest:
            cond.append(
                "u.run_id IN (SELECT run_id FROM (SELECT run_id, row_number() OVER (PARTITION "
                "BY profile, host ORDER BY created_s DESC, run_id DESC) AS k FROM runs) "
                "WHERE k = 1)"
            )
        where = f"WHERE {' AND '.join(cond)}" if cond else ""
        return con.execute(
            "SELECT u.run_id, u.record, list(r.result ORDER BY r.position) "
            "FILTER (WHERE r.result IS NOT NULL) FROM runs u LEFT JOIN results r "
            f"USING (run_id, shard) {where} GROUP BY u.run_id, u.record, u.created_s "
            "ORDER BY u.created_s, u.run_id",
            params,
        ).fetchall()

    out = []
    for run_id, record, results in store.read(fetch):
        where = f"{store.path}: run {run_id}"
        data = rows.record_data(record, results or [], where)
        if data.get("schema_version") not in READABLE_VERSIONS:
            raise StorageError(
                f"{where}: a run record of schema_version {data.get('schema_version')!r}, "
                f"this perfsuite reads {', '.join(map(str, READABLE_VERSIONS))}"
            )
        data = upgraded(data)
        check_record(data, where)
        out.append(RunRecord.from_dict(data))
    return out
