"""The fleet's run records, read into one units x checks matrix per hardware profile.

A unit is a node, or one GPU of a node: a result measured on ``gpu:N`` belongs to GPU N of
its node (named by its index and UUID from the record's environment), and its check is
compared with the same check on every other GPU of the fleet (``gpu:*`` in its id).  A node
is named by ``environment.host.node_label`` (set from ``PERFSUITE_NODE_LABEL`` by
``perfsuite fleet run``, unique per task), else by its host name.

Reading 10,000 records of 200 checks must take seconds, so each record is read through its
digest (:mod:`perfsuite.fleet.digests`: only what the fleet judges, checked) when it is
fresh, and the digests' columns fill numpy arrays; no :class:`~perfsuite.model.RunRecord` is
rebuilt.  A record without a fresh digest is read by the store's loader, and its digest left
beside it.  Two records naming the same node (label, and GPU) are an error.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from perfsuite.errors import StorageError
from perfsuite.fleet.digests import (
    ALL_TAINTS,
    COLUMNS,
    DIGEST_SUFFIX,
    THROTTLE_MASK,
    digest,
    digest_of,
    digest_path,
    fresh_digest,
    keep,
)

# The names of perfsuite.fleet.digests that callers (and docs/fleet.md) reach through here.
from perfsuite.fleet.digests import check_digest as check_digest
from perfsuite.fleet.digests import write_digest as write_digest
from perfsuite.model import BASELINE_VERDICTS, FLOOR_VERDICTS, RunRecord

# Where ``perfsuite fleet run`` keeps each task's status and output, beside the records.
NODES_DIR = "nodes"
# Where the reruns that confirm a report's flags go, inside the fleet's directory: CONFIRM_DIR,
# then CONFIRM_DIR-2, ...; never read as the fleet's own records.
CONFIRM_DIR = "confirm"
# Files the fleet report writes into DIR; never read back as records.
OUTPUTS = ("drain.json",)
# Records per worker process when there are many (reading JSON is the cost).
_CHUNK = 256


@dataclass(frozen=True)
class Unit:
    """A node, or one GPU of a node, as the fleet judges it."""

    label: str  # the node's label (unique per task)
    host: str  # the host name its record gives
    gpu_index: int | None  # the GPU's index on its node, None for the node's CPU checks
    gpu_serial: str  # the GPU's UUID (or serial), "" when unknown or a CPU unit
    record: str  # the run record's path
    run_id: str

    @property
    def name(self) -> str:
        """How reports name it: ``label``, or ``label/gpu3``."""
        return self.label if self.gpu_index is None else f"{self.label}/gpu{self.gpu_index}"

    @property
    def node(self) -> str:
        """The node as Slurm and a hostfile name it: its host's short name, else its label.

        Several tasks of one host (labels ``host-t0``, ``host-t1``) are one node: the one a
        drain loop hands to ``scontrol`` and a rerun's ``--nodelist`` names.
        """
        return self.host.split(".")[0] if self.host else self.label


@dataclass(frozen=True)
class Check:
    """One check as the fleet compares it (GPU indices in its id replaced by ``*``)."""

    id: str
    metric: str
    unit: str
    higher_is_better: bool


@dataclass(frozen=True)
class Matrix:
    """One hardware profile's fleet: units x checks arrays.

    ``values``: each result's summary median, NaN where the unit did not measure the check.
    ``within``: the relative standard error of that median (cv / sqrt(n)), NaN if unknown.
    ``floors`` and ``baselines``: indices into FLOOR_VERDICTS and BASELINE_VERDICTS, -1
    where not measured.
    ``taint``: the :class:`~perfsuite.fleet.digests.Taint` bits of each reading, 0 where
    untainted or not measured;
    ``foreign_cores``: the foreign load its run measured beside it (NaN when unknown);
    ``throttle``: the NVML throttle reasons of :data:`THROTTLE_MASK` seen during it.
    """

    profile: str
    units: tuple[Unit, ...]
    checks: tuple[Check, ...]
    values: np.ndarray
    within: np.ndarray
    floors: np.ndarray
    baselines: np.ndarray
    taint: np.ndarray
    foreign_cores: np.ndarray
    throttle: np.ndarray

    @property
    def tainted(self) -> np.ndarray:
        """Whether each reading was flagged by its own run (False where not measured)."""
        tainted: np.ndarray = self.taint != 0
        return tainted

    @property
    def higher_is_better(self) -> np.ndarray:
        """Each check's direction."""
        return np.array([c.higher_is_better for c in self.checks], dtype=bool)

    @property
    def nodes(self) -> int:
        """Distinct nodes (hosts) among the units: a host's tasks and GPUs are one node."""
        return len({u.node for u in self.units})


@dataclass(frozen=True)
class _Row:
    """One unit's results, as parsed in a worker (plain data and arrays: it crosses processes).

    ``keys`` index the chunk's check keys; ``values`` holds median, within-run spread and
    foreign load, ``codes`` the floor and baseline verdict indices, the taint bits and the
    throttle reasons, one row per result.
    """

    profile: str
    unit: Unit
    keys: np.ndarray
    values: np.ndarray
    codes: np.ndarray


@dataclass(frozen=True)
class _Chunk:
    """What a worker returns: the distinct check keys it met, and its rows."""

    keys: list[tuple[str, str, str, bool]]
    rows: list[_Row]


def is_confirm_dir(name: str) -> bool:
    """Whether a folder of a fleet's directory holds a rerun: ``confirm``, ``confirm-2``, ..."""
    return name == CONFIRM_DIR or (
        name.startswith(f"{CONFIRM_DIR}-") and name[len(CONFIRM_DIR) + 1 :].isdigit()
    )


def record_paths(directory: Path) -> list[Path]:
    """The run records under ``directory``: not the node folder, reruns, digests or outputs."""
    found = []
    for root, dirs, files in os.walk(directory):
        if Path(root) == directory:
            dirs[:] = [d for d in dirs if d != NODES_DIR and not is_confirm_dir(d)]
        dirs.sort()
        found += [
            Path(root, f)
            for f in sorted(files)
            if f.endswith(".json")
            and not f.endswith(DIGEST_SUFFIX)
            and not (Path(root) == directory and f in OUTPUTS)
        ]
    return found


@dataclass
class _Keys:
    """The check keys a worker met, and the index arrays of the check lists it met.

    Most nodes of a fleet ran the same checks in the same order: their whole list is looked
    up at once (a tuple's hash), not check by check.
    """

    index: dict[tuple[str, str, str, bool], int] = field(default_factory=dict)
    lists: dict[tuple[tuple[Any, ...], ...], np.ndarray] = field(default_factory=dict)

    def of(self, c: Mapping[str, list[Any]]) -> np.ndarray:
        """The key index of each result of a digest's columns."""
        signature = tuple(tuple(c[k]) for k in ("id", "metric", "unit", "higher_is_better"))
        found = self.lists.get(signature)
        if found is None:
            index = self.index
            found = np.fromiter(
                (index.setdefault(k, len(index)) for k in zip(*signature, strict=True)),
                dtype=np.int32,
                count=len(signature[0]),
            )
            self.lists[signature] = found
        return found


def parse_record(path: Path, keys: _Keys) -> list[_Row]:
    """One record's rows (its node's CPU checks, and one per GPU), from its digest if fresh.

    A record without a fresh digest is read whole, and its digest left beside it.
    """
    d = fresh_digest(path)
    if d is None:
        d = digest(path)
        keep(path, d)
    try:
        return _rows_of(d, str(path), keys)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise StorageError(f"{digest_path(path)}: malformed digest ({exc}); delete it") from None


def _rows_of(d: Mapping[str, Any], where: str, keys: _Keys) -> list[_Row]:
    c = d["columns"]
    n = len(c["id"])
    if any(len(c[k]) != n for k in COLUMNS):
        raise ValueError("columns of unequal length")
    idx = keys.of(c)
    values = np.empty((n, 3))
    values[:, 0] = np.array(c["median"], dtype=float)
    values[:, 1] = np.array(c["within"], dtype=float)  # None: NaN
    values[:, 2] = np.array(c["foreign_cores"], dtype=float)  # None: NaN
    codes = np.empty((n, 4), dtype=np.int16)
    for i, name in enumerate(("floor", "baseline", "taint", "throttle")):
        codes[:, i] = np.array(c[name], dtype=np.int16)
    if not (np.all(values[:, 0] > 0) and np.all(np.isfinite(values[:, 0]))):
        raise ValueError("a median that is not a finite positive number")
    if codes.size and (codes.min() < 0 or codes[:, 0].max() >= len(FLOOR_VERDICTS)
                       or codes[:, 1].max() >= len(BASELINE_VERDICTS)):  # fmt: skip
        raise ValueError("an unknown verdict")
    if codes.size and (np.any(codes[:, 2] & ~ALL_TAINTS)
                       or np.any(codes[:, 3] & ~THROTTLE_MASK)):  # fmt: skip
        raise ValueError("unknown taint or throttle bits")
    gpus = c["gpu"]
    groups: dict[int | None, list[int]] = {}
    if gpus.count(None) != n:  # some results were measured on a GPU
        for i, g in enumerate(gpus):
            groups.setdefault(g, []).append(i)
    else:
        groups[None] = []  # every result, without listing them
    serials = d["gpus"]
    rows = []
    for gpu, members in groups.items():
        serial = str(serials.get(str(gpu), "")) if gpu is not None else ""
        unit = Unit(str(d["label"]), str(d["host"]), gpu, serial, where, str(d["run_id"]))
        if gpu is None and not members and len(groups) == 1:
            rows.append(_Row(str(d["profile"]), unit, idx, values, codes))
            continue
        take = np.array(members, dtype=np.intp)
        rows.append(_Row(str(d["profile"]), unit, idx[take], values[take], codes[take]))
    return rows


def _parse_many(paths: Sequence[str]) -> _Chunk | str:
    """Parse a chunk in a worker: its keys and rows, or the first error's message."""
    keys = _Keys()
    rows: list[_Row] = []
    try:
        for p in paths:
            rows += parse_record(Path(p), keys)
    except StorageError as exc:
        return str(exc)
    return _Chunk(list(keys.index), rows)


def _chunks(paths: Sequence[Path], workers: int) -> Iterator[_Chunk]:
    if workers <= 1 or len(paths) <= _CHUNK:
        got = _parse_many([str(p) for p in paths])
        if isinstance(got, str):
            raise StorageError(got)
        yield got
        return
    chunks = [[str(p) for p in paths[i : i + _CHUNK]] for i in range(0, len(paths), _CHUNK)]
    with ProcessPoolExecutor(workers) as pool:
        for got in pool.map(_parse_many, chunks):
            if isinstance(got, str):
                raise StorageError(got)
            yield got


def load(directory: Path, workers: int | None = None) -> list[Matrix]:
    """Every profile's matrix from the run records under ``directory``.

    A results store's folder gives each node's latest run in it.

    Two records naming the same node (label, and GPU) are an error: each task of a fleet
    needs its own label.
    """
    if not directory.is_dir():
        raise StorageError(f"{directory}: no such directory")
    from perfsuite.store import Store, load_runs

    if Store.is_store(directory):  # a results store: each node's latest run
        runs = load_runs(directory, latest=True)
        if not runs:
            raise StorageError(f"{directory}: a results store that holds no run")
        return load_records([(f"{directory}: run {r.run_id}", r) for r in runs])
    paths = record_paths(directory)
    if not paths:
        raise StorageError(f"{directory}: no run records (*.json) in it")
    workers = workers if workers is not None else min(4, len(os.sched_getaffinity(0)))
    return _matrices(_chunks(paths, workers))


def load_records(records: Sequence[tuple[str, RunRecord]]) -> list[Matrix]:
    """Every profile's matrix from loaded run records, each named by where it is from.

    The records of a results store, say (:func:`perfsuite.store.load_runs`).
    """
    keys = _Keys()
    rows: list[_Row] = []
    for where, record in records:
        try:
            rows += _rows_of(digest_of(record, where, {}), where, keys)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise StorageError(f"{where}: malformed run record ({exc})") from None
    return _matrices(iter([_Chunk(list(keys.index), rows)]))


def _matrices(chunks: Iterator[_Chunk]) -> list[Matrix]:
    columns: dict[tuple[str, str, str, bool], int] = {}
    by_profile: dict[str, list[_Row]] = {}
    for chunk in chunks:
        remap = np.array([columns.setdefault(k, len(columns)) for k in chunk.keys], dtype=np.int32)
        for row in chunk.rows:
            moved = _Row(row.profile, row.unit, remap[row.keys], row.values, row.codes)
            by_profile.setdefault(row.profile, []).append(moved)
    keys = list(columns)
    return [_matrix(profile, rows, keys) for profile, rows in sorted(by_profile.items())]


def _matrix(profile: str, rows: list[_Row], keys: list[tuple[str, str, str, bool]]) -> Matrix:
    seen: dict[tuple[str, int | None], str] = {}
    for row in rows:
        key = (row.unit.label, row.unit.gpu_index)
        if key in seen:
            raise StorageError(
                f"{row.unit.record}: node {row.unit.name!r} also has the record {seen[key]}; "
                "give each task of the fleet its own label (PERFSUITE_NODE_LABEL)"
            )
        seen[key] = row.unit.record
    used = np.unique(np.concatenate([r.keys for r in rows])) if rows else np.array([], int)
    local = np.full(len(keys), -1, dtype=np.int64)
    local[used] = np.arange(used.size)
    shape = (len(rows), used.size)
    values = np.full(shape, np.nan)
    within = np.full(shape, np.nan)
    floors = np.full(shape, -1, dtype=np.int8)
    baselines = np.full(shape, -1, dtype=np.int8)
    taint = np.zeros(shape, dtype=np.int8)
    foreign = np.full(shape, np.nan)
    throttle = np.zeros(shape, dtype=np.int16)
    for i, row in enumerate(rows):
        cols = local[row.keys]
        values[i, cols] = row.values[:, 0]
        within[i, cols] = row.values[:, 1]
        foreign[i, cols] = row.values[:, 2]
        floors[i, cols] = row.codes[:, 0]
        baselines[i, cols] = row.codes[:, 1]
        taint[i, cols] = row.codes[:, 2]
        throttle[i, cols] = row.codes[:, 3]
    checks = tuple(Check(*keys[k]) for k in used.tolist())
    units = tuple(r.unit for r in rows)
    return Matrix(
        profile, units, checks, values, within, floors, baselines, taint, foreign, throttle
    )


def align(first: Matrix, again: Matrix) -> tuple[Matrix, np.ndarray]:
    """``again``'s readings laid over ``first``'s units x checks, and which units it has.

    A unit is matched by its node label and GPU index, a check by its id, metric, unit and
    direction; a cell ``again`` lacks is NaN (taint 0), and a unit it lacks keeps ``first``'s
    :class:`Unit` (whose record then is not a rerun's: see the returned mask).
    """
    rows = {(u.label, u.gpu_index): i for i, u in enumerate(again.units)}
    cols = {c: k for k, c in enumerate(again.checks)}
    r = np.array([rows.get((u.label, u.gpu_index), -1) for u in first.units], dtype=np.intp)
    k = np.array([cols.get(c, -1) for c in first.checks], dtype=np.intp)
    present = r >= 0
    cell = present[:, np.newaxis] & (k >= 0)[np.newaxis, :]
    ix = np.ix_(np.maximum(r, 0), np.maximum(k, 0))

    def take(a: np.ndarray, empty: float) -> np.ndarray:
        if not a.size:
            return np.full(cell.shape, empty, dtype=a.dtype)
        out: np.ndarray = np.where(cell, a[ix], np.array(empty, dtype=a.dtype))
        return out

    units = tuple(again.units[i] if i >= 0 else u for i, u in zip(r, first.units, strict=True))
    laid = Matrix(
        first.profile,
        units,
        first.checks,
        take(again.values, np.nan),
        take(again.within, np.nan),
        take(again.floors, -1),
        take(again.baselines, -1),
        take(again.taint, 0),
        take(again.foreign_cores, np.nan),
        take(again.throttle, 0),
    )
    return laid, present


def blank(first: Matrix) -> Matrix:
    """``first``'s units x checks with no reading: what a rerun of none of them gives."""
    shape = first.values.shape
    return Matrix(
        first.profile,
        first.units,
        first.checks,
        np.full(shape, np.nan),
        np.full(shape, np.nan),
        np.full(shape, -1, dtype=first.floors.dtype),
        np.full(shape, -1, dtype=first.baselines.dtype),
        np.zeros(shape, dtype=first.taint.dtype),
        np.full(shape, np.nan),
        np.zeros(shape, dtype=first.throttle.dtype),
    )


def overlay(base: Matrix, top: Matrix, present: np.ndarray) -> Matrix:
    """``base`` with the rows of the units ``top`` has (``present``) taken from ``top``."""
    rows = present[:, np.newaxis]

    def pick(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        out: np.ndarray = np.where(rows, b, a)
        return out

    return Matrix(
        base.profile,
        tuple(t if here else b for b, t, here in zip(base.units, top.units, present, strict=True)),
        base.checks,
        pick(base.values, top.values),
        pick(base.within, top.within),
        pick(base.floors, top.floors),
        pick(base.baselines, top.baselines),
        pick(base.taint, top.taint),
        pick(base.foreign_cores, top.foreign_cores),
        pick(base.throttle, top.throttle),
    )
