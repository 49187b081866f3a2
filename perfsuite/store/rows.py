"""Run records as the store's rows, and back: columns of numpy arrays one shard holds."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perfsuite.errors import StorageError
from perfsuite.store.validate import parse_json


def _object(values: list[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def epoch_s(created: str) -> float:
    """Seconds since the epoch of a record's ``created`` (a time without a zone is UTC)."""
    when = dt.datetime.fromisoformat(created)
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def host_of(environment: Mapping[str, Any]) -> str:
    """The run's node: its fleet label, else its host name ("" when the record has none)."""
    host = environment.get("host")
    if not isinstance(host, Mapping):
        return ""
    name = host.get("node_label") or host.get("hostname") or ""
    return name if isinstance(name, str) else ""


@dataclass
class Columns:
    """Rows of one table, column by column, as lists until :meth:`arrays` makes them numpy.

    ``types`` maps each column to its DuckDB type (:data:`schema.COLUMNS`).  Numbers go to
    DuckDB as typed arrays, never as Python objects, whose type DuckDB guesses from a sample
    (and would then cut 2.5 to 2 in a column whose first rows hold whole numbers).
    """

    types: Mapping[str, str]
    values: dict[str, list[Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.values = {name: [] for name in self.types}

    def add(self, row: Mapping[str, Any]) -> None:
        """Append one row (every column named)."""
        for name in self.types:
            self.values[name].append(row[name])

    def __len__(self) -> int:
        return len(next(iter(self.values.values())))

    def arrays(self) -> dict[str, np.ndarray]:
        """The columns as numpy arrays.

        NaN stands for a missing number, -1 for a missing truth value (:func:`select_list`
        turns both back into NULL).
        """
        out = {}
        for name, kind in self.types.items():
            values = self.values[name]
            if kind == "DOUBLE":
                out[name] = np.array([np.nan if v is None else v for v in values], dtype=float)
            elif kind == "INTEGER":
                out[name] = np.array(values, dtype=np.int64)
            elif kind == "BOOLEAN":
                out[name] = np.array([-1 if v is None else int(v) for v in values], np.int8)
            elif kind == "DOUBLE[]":
                out[name] = _object([[float(x) for x in v] for v in values])
            else:
                out[name] = _object([str(v) for v in values])
        return out


def select_list(types: Mapping[str, str]) -> str:
    """The SELECT list that reads :meth:`Columns.arrays` back with each column's type."""
    parts = []
    for name, kind in types.items():
        col = f'"{name}"'
        if kind == "DOUBLE":
            parts.append(f"CASE WHEN isnan({col}) THEN NULL ELSE {col} END")
        elif kind == "BOOLEAN":
            parts.append(f"CASE WHEN {col} < 0 THEN NULL ELSE {col} = 1 END")
        else:
            parts.append(f"CAST({col} AS {kind})")
    return ", ".join(parts)


def _dumps(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"), allow_nan=False)


def run_row(data: Mapping[str, Any]) -> dict[str, Any]:
    """The run's row, from its record in the JSON layout (checked: ``records.check_record``)."""
    rest = {k: v for k, v in data.items() if k != "results"}
    environment = data.get("environment", {})
    return {
        "run_id": data["run_id"],
        "profile": str(data["hardware_profile"].get("name", "")),
        "created": data["created"],
        "created_s": epoch_s(data["created"]),
        "host": host_of(environment),
        "duration_s": data.get("duration_s"),
        "incomplete": data.get("incomplete", ""),
        "results": len(data.get("results", ())),
        "crashed": len(data.get("crashed", ())),
        "record_version": data["schema_version"],
        "environment": _dumps(environment),
        "record": _dumps(rest),
    }


def result_rows(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per result of the run, its readings and verdicts with it."""
    rows = []
    for i, raw in enumerate(data.get("results", ())):
        s, b = raw["summary"], raw["baseline"]
        rows.append(
            {
                "run_id": data["run_id"],
                "position": i,
                "id": raw["id"],
                "check_name": raw["check"],
                "metric": raw["metric"],
                "unit": raw["unit"],
                "higher_is_better": raw["higher_is_better"],
                "median": s["median"],
                "min": s["min"],
                "max": s["max"],
                "mean": s["mean"],
                "n": s["n"],
                "cv": s.get("cv"),
                "samples": raw["samples"],
                "floor_verdict": raw["floor"]["verdict"],
                "baseline_verdict": b["verdict"],
                "ratio": b.get("ratio"),
                "p_value": b.get("p_value"),
                "significant": b.get("significant"),
                "outcome": raw.get("outcome", ""),
                "result": _dumps(raw),
            }
        )
    return rows


def record_data(record_json: str, result_json: Sequence[str], where: str) -> dict[str, Any]:
    """A run record's JSON form again, from the run's ``record`` and its results' ``result``.

    The text passes the same bounds as a record file's (:func:`validate.parse_json`).
    """
    data = parse_json(record_json, where, "run in the results store")
    if not isinstance(data, dict):
        raise StorageError(f"{where}: corrupt run in the results store: not an object")
    data["results"] = [parse_json(r, where, "result in the results store") for r in result_json]
    return data
