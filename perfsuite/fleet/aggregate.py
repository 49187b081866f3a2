"""The fleet's run records, read into one units x checks matrix per hardware profile.

A unit is a node, or one GPU of a node: a result measured on ``gpu:N`` belongs to GPU N of
its node (named by its index and UUID from the record's environment), and its check is
compared with the same check on every other GPU of the fleet (``gpu:*`` in its id).  A node
is named by ``environment.host.node_label`` (set from ``PERFSUITE_NODE_LABEL`` by
``perfsuite fleet run``, unique per task), else by its host name.

Reading 10,000 records of 200 checks must take seconds, so this reads only what the fleet
judges (each result's id, unit, direction, summary, floor and baseline verdicts, and whether
its own run flagged the reading: see :class:`Taint`), checks those fields, and fills numpy
arrays; it does not rebuild :class:`~perfsuite.model.RunRecord` objects.  Anything a record
lacks or holds in the wrong shape is a StorageError naming it.  A node's label and host
name must follow hostname grammar (:mod:`perfsuite.fleet.labels`), and every text a report
shows (ids, metrics, units, the profile, the run id) must be printable: nothing else ever
reaches a terminal, a page, ``drain.json`` or a command a report prints.

A digest is a cache of its record: one that is stale, or malformed in any way (a field of
the wrong type, a number out of range, a label outside the grammar), is treated as absent
and made again from the record, which is the evidence.
"""

from __future__ import annotations

import enum
import json
import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from perfsuite.errors import StorageError
from perfsuite.fleet.labels import GRAMMAR, is_label
from perfsuite.measure import noise
from perfsuite.model import BASELINE_VERDICTS, FLOOR_VERDICTS, READABLE_VERSIONS
from perfsuite.store.files import read_text_bounded

# Where ``perfsuite fleet run`` keeps each task's status and output, beside the records.
NODES_DIR = "nodes"
# Where the reruns that confirm a report's flags go, inside the fleet's directory: CONFIRM_DIR,
# then CONFIRM_DIR-2, ...; never read as the fleet's own records.
CONFIRM_DIR = "confirm"
# Files the fleet report writes into DIR; never read back as records.
OUTPUTS = ("drain.json",)
_GPU = re.compile(r"gpu:([0-9]+)")
# GPU indices a node may have; a GPU's serial or UUID as a digest keeps it.
MAX_GPUS = 10_000
_SERIAL = re.compile(r"[A-Za-z0-9._:-]{1,128}", re.ASCII)
# Records per worker process when there are many (parsing JSON is the cost).
_CHUNK = 256
MAX_RECORD_BYTES = 512 << 20
# A digest: what the fleet reads of one record, written beside it by the node that ran it.
DIGEST_SUFFIX = ".fleet.json"
# 3: each result's taint (its run's noise flags, as Taint bits), foreign load and throttling.
DIGEST_VERSION = 3
# The columns of a digest, one entry per result.
COLUMNS = (
    "id",
    "metric",
    "unit",
    "higher_is_better",
    "median",
    "within",
    "floor",
    "baseline",
    "gpu",
    "taint",
    "foreign_cores",
    "throttle",
)
# The NVML throttle reasons that taint a reading (noise.THROTTLE_BITS), as one mask.
THROTTLE_MASK = sum(noise.THROTTLE_BITS)


class Taint(enum.IntFlag):
    """Why a node's own run flagged a reading, as the record's structured noise facts say.

    A result is tainted exactly when its ``noise.flags`` is not empty: the rule every
    single-node verdict follows (:func:`perfsuite.judge.outcome.tainted`).  The kinds are read from
    the facts the noise guard recorded beside the flags, never from the flags' wording.
    """

    FOREIGN_LOAD = 1  # other work, or hypervisor steal, beside the check (noise.foreign_cores)
    GPU_THROTTLED = 2  # a GPU's clocks held down by hardware or thermals (noise.gpus)
    OTHER = 4  # a flag neither fact explains (a hook's reading, a guard added later)


_ALL_TAINTS = int(Taint.FOREIGN_LOAD | Taint.GPU_THROTTLED | Taint.OTHER)


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
    ``taint``: the :class:`Taint` bits of each reading, 0 where untainted or not measured;
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


def digest_path(record: Path) -> Path:
    """Where a record's digest lives: ``RUN.fleet.json`` beside ``RUN.json``."""
    return record.with_name(record.name[: -len(".json")] + DIGEST_SUFFIX)


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


def _bad_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number a record holds")


def _text(d: Mapping[str, Any], key: str, where: str) -> str:
    value = d.get(key)
    if not isinstance(value, str) or not value.strip():
        raise StorageError(f"{where}: {key!r} must be non-empty text, got {value!r:.60}")
    if not value.isprintable():
        raise StorageError(f"{where}: {key!r} holds a control character: {value!r:.80}")
    return value


def _object(d: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = d.get(key)
    if not isinstance(value, dict):
        raise StorageError(f"{where}: {key!r} must be an object, got {type(value).__name__}")
    return value


def _gpu_serials(environment: Mapping[str, Any]) -> dict[int, str]:
    gpus = environment.get("gpus")
    out: dict[int, str] = {}
    if isinstance(gpus, list):
        for g in gpus:
            index = g.get("index") if isinstance(g, dict) else None
            if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < MAX_GPUS:
                named = [g.get(k) for k in ("serial", "uuid")]
                known = [v for v in named if isinstance(v, str) and _SERIAL.fullmatch(v)]
                out[index] = known[0] if known else ""
    return out


def digest(path: Path) -> dict[str, Any]:
    """What the fleet judges of one run record, checked, as plain JSON data.

    ``columns`` holds one list per field of :data:`COLUMNS`, one entry per result: the
    check's id (``gpu:N`` made ``gpu:*``), metric, unit, direction, summary median,
    within-run spread (None when unknown), floor and baseline verdicts (their indices in
    FLOOR_VERDICTS and BASELINE_VERDICTS), the GPU index (None for a CPU check), the
    reading's :class:`Taint` bits (0: untainted), the foreign load in cores (None when
    unknown) and the throttle reasons of :data:`THROTTLE_MASK` (an NVML mask).  Columns
    let a report turn a digest into arrays without a Python step per result.  ``record``
    pins the record's size and time, so a digest of a record changed since is never used.
    """
    where = str(path)
    # Plain json.loads, not storage.read_json's checked parser: a fleet's report parses
    # thousands of records, and every value it uses is checked below.
    try:
        st = path.stat()
    except OSError as exc:
        raise StorageError(f"{where}: cannot read: {exc.strerror or exc}") from None
    text = read_text_bounded(path, "run record", MAX_RECORD_BYTES)
    try:
        data = json.loads(text, parse_constant=_bad_constant)
    except (ValueError, RecursionError) as exc:
        raise StorageError(f"{where}: not a JSON run record: {str(exc)[:120]}") from None
    if not isinstance(data, dict):
        raise StorageError(f"{where}: not a run record (a JSON {type(data).__name__})")
    return digest_data(data, where, {"size": st.st_size, "mtime_ns": st.st_mtime_ns})


def digest_data(data: Mapping[str, Any], where: str, pinned: Mapping[str, int]) -> dict[str, Any]:
    """A digest (see :func:`digest`) of a record's JSON data; ``pinned``: its file's facts."""
    found = data.get("schema_version")
    if found not in READABLE_VERSIONS or isinstance(found, bool):
        readable = " or ".join(map(str, READABLE_VERSIONS))
        raise StorageError(
            f"{where}: run record has schema_version {found!r}, this perfsuite reads {readable}"
        )
    run_id = _text(data, "run_id", where)
    profile = _text(_object(data, "hardware_profile", where), "name", f"{where}: hardware_profile")
    environment = data.get("environment") or {}
    environment = environment if isinstance(environment, dict) else {}
    host_facts = environment.get("host")
    host_facts = host_facts if isinstance(host_facts, dict) else {}
    host = host_facts.get("hostname") or ""
    label = host_facts.get("node_label") or host
    if not label:
        raise StorageError(f"{where}: names no node (no environment.host.node_label or hostname)")
    for key, name in (("hostname", host), ("node_label", label)):
        if name and not is_label(name):
            raise StorageError(
                f"{where}: environment.host.{key} {str(name)[:80]!r} is not a host name: "
                f"use {GRAMMAR}"
            )
    results = data.get("results")
    if not isinstance(results, list):
        raise StorageError(f"{where}: 'results' must be a list")
    parsed = [_parse_result(raw, f"{where}: result {i}") for i, raw in enumerate(results)]
    return {
        "schema_version": DIGEST_VERSION,
        "record": dict(pinned),
        "run_id": run_id,
        "profile": profile,
        "label": label,
        "host": host,
        "gpus": {str(k): v for k, v in _gpu_serials(environment).items()},
        "columns": dict(zip(COLUMNS, map(list, zip(*parsed, strict=True)), strict=True))
        if parsed
        else {c: [] for c in COLUMNS},
    }


def write_digest(record: Path) -> Path:
    """Write a record's digest beside it (a node does, right after its run)."""
    from perfsuite.store.files import write_json_atomic

    return write_json_atomic(digest_path(record), digest(record), compact=True)


def _fresh_digest(record: Path) -> dict[str, Any] | None:
    """The record's digest, when it is fresh and well formed; None otherwise.

    Fresh: made from the record as it is now.  Well formed: :func:`check_digest`.  On None
    the record is read instead, and its digest made again.
    """
    path = digest_path(record)
    try:
        if not path.exists():
            return None
        d = json.loads(read_text_bounded(path, "digest", MAX_RECORD_BYTES))
        st = record.stat()
    except (OSError, ValueError, RecursionError, StorageError):
        return None
    if not isinstance(d, dict) or d.get("record") != {
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
    }:
        return None
    try:
        check_digest(d)
    except ValueError:
        return None
    return d


def check_digest(d: Mapping[str, Any]) -> None:
    """Raise ValueError (saying what) unless ``d`` is a digest as :func:`digest` makes one.

    Every field is checked for its type and range: the report turns a digest into arrays
    without a check of its own, so a string for ``gpus``, an id that is a number, a verdict
    index out of range or a label outside hostname grammar must never pass.
    """
    version = d.get("schema_version")
    if type(version) is not int or version != DIGEST_VERSION:
        raise ValueError(f"schema_version {str(version)[:20]!r}, not {DIGEST_VERSION}")
    for key in ("run_id", "profile"):
        value = d.get(key)
        if type(value) is not str or not value.strip() or not value.isprintable():
            raise ValueError(f"{key!r} is not printable text")
    label, host = d.get("label"), d.get("host")
    if not is_label(label) or not (host == "" or is_label(host)):
        raise ValueError("its label or host is not a host name")
    gpus = d.get("gpus")
    if type(gpus) is not dict or not all(
        type(v) is str and (v == "" or _SERIAL.fullmatch(v))
        and re.fullmatch(r"[0-9]{1,4}", k) for k, v in gpus.items()
    ):  # fmt: skip
        raise ValueError("'gpus' is not a map of GPU index to serial")
    columns = d.get("columns")
    if type(columns) is not dict or not all(type(columns.get(c)) is list for c in COLUMNS):
        raise ValueError("'columns' is not a map of the digest's columns")
    n = len(columns["id"])
    if any(len(columns[c]) != n for c in COLUMNS):
        raise ValueError("columns of unequal length")
    for c in ("id", "metric", "unit"):
        if not all(type(v) is str and v.strip() and v.isprintable() for v in columns[c]):
            raise ValueError(f"column {c!r} holds other than printable text")
    if not all(type(v) is bool for v in columns["higher_is_better"]):
        raise ValueError("column 'higher_is_better' holds other than true or false")
    for c, empty in (("median", False), ("within", True), ("foreign_cores", True)):
        if not all(_finite(v, empty) for v in columns[c]):
            raise ValueError(f"column {c!r} holds other than finite numbers")
    if not all(v > 0 for v in columns["median"]):
        raise ValueError("a median that is not positive")
    limits = {"floor": len(FLOOR_VERDICTS), "baseline": len(BASELINE_VERDICTS),
              "taint": _ALL_TAINTS + 1, "throttle": THROTTLE_MASK + 1}  # fmt: skip
    for c, limit in limits.items():
        if not all(type(v) is int and 0 <= v < limit for v in columns[c]):
            raise ValueError(f"column {c!r} holds other than its codes")
    if any(v & ~THROTTLE_MASK for v in columns["throttle"]):
        raise ValueError("unknown throttle bits")
    if not all(v is None or (type(v) is int and 0 <= v < MAX_GPUS) for v in columns["gpu"]):
        raise ValueError("column 'gpu' holds other than GPU indices")


def _finite(value: object, empty: bool) -> bool:
    """Whether ``value`` is a finite int or float (not a bool), or None where allowed."""
    if value is None:
        return empty
    return type(value) in (int, float) and _real(value) is not None


def _real(value: object) -> float | None:
    """``value`` as a finite float, when it is an int or float (not a bool) that is one."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        x = float(value)
    except OverflowError:  # an int of hundreds of digits
        return None
    return x if math.isfinite(x) else None


def _keep(record: Path, d: Mapping[str, Any]) -> None:
    """Leave the digest beside its record for the next report, where the folder allows.

    A cache: written without fsync (a digest lost in a crash is made again), and a folder
    that is read-only simply gets none.
    """
    target = digest_path(record)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(json.dumps(d, separators=(",", ":")), encoding="utf-8")
        os.replace(temporary, target)
    except OSError:
        temporary.unlink(missing_ok=True)


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
    d = _fresh_digest(path)
    if d is None:
        d = digest(path)
        _keep(path, d)
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
    if codes.size and (np.any(codes[:, 2] & ~_ALL_TAINTS)
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


def _parse_result(raw: Any, where: str) -> list[Any]:
    if not isinstance(raw, dict):
        raise StorageError(f"{where}: not an object")
    rid = _text(raw, "id", where)
    where = f"{where} ({rid[:80]})"
    hib = raw.get("higher_is_better")
    if not isinstance(hib, bool):
        raise StorageError(f"{where}: 'higher_is_better' must be true or false")
    summary = _object(raw, "summary", where)
    median = _real(summary.get("median"))
    if median is None or not median > 0:
        raise StorageError(f"{where}: summary.median must be a finite positive number")
    cv, n = _real(summary.get("cv")), summary.get("n")
    within = (
        cv / math.sqrt(n)
        if cv is not None and type(n) is int and 0 < n < 1 << 53 and cv >= 0
        else None
    )
    floor = _object(raw, "floor", where).get("verdict")
    base = _object(raw, "baseline", where).get("verdict")
    if floor not in FLOOR_VERDICTS or base not in BASELINE_VERDICTS:
        raise StorageError(f"{where}: unknown floor or baseline verdict ({floor!r}, {base!r})")
    gpu = None
    check_id = rid
    if "gpu:" in rid:
        match = _GPU.search(rid)
        if match:
            gpu = int(match.group(1)[-6:])
            if len(match.group(1)) > 4 or gpu >= MAX_GPUS:
                raise StorageError(f"{where}: a GPU index above {MAX_GPUS - 1}")
            check_id = _GPU.sub("gpu:*", rid)
    metric, unit = _text(raw, "metric", where), _text(raw, "unit", where)
    floor_code, base_code = FLOOR_VERDICTS.index(floor), BASELINE_VERDICTS.index(base)
    taint, foreign, throttle = _taint(raw.get("noise", {}), where)
    return [check_id, metric, unit, hib, float(median), within, floor_code, base_code, gpu,
            int(taint), foreign, throttle]  # fmt: skip


def _taint(raw: Any, where: str) -> tuple[Taint, float | None, int]:
    """A result's noise facts: its taint, its foreign load (cores) and its throttle reasons.

    The taint follows the suite's own rule (flags present: tainted); each flag the noise
    guard raises is matched to the fact behind it (foreign load over the guard's threshold,
    one flag per throttled GPU), and any flag left over is OTHER.
    """
    if not isinstance(raw, dict):
        raise StorageError(f"{where}: 'noise' must be an object, got {type(raw).__name__}")
    flags = raw.get("flags", [])
    # a sentence each before version 3, a typed flag (an object with its kind) since
    if not isinstance(flags, list) or not all(
        isinstance(f, str) or (isinstance(f, dict) and isinstance(f.get("kind"), str))
        for f in flags
    ):
        raise StorageError(f"{where}: noise.flags must be a list of text or flag objects")
    foreign = raw.get("foreign_cores")
    if foreign is not None and _real(foreign) is None:
        raise StorageError(f"{where}: noise.foreign_cores must be a number or null")
    gpus = raw.get("gpus", [])
    if not isinstance(gpus, list) or not all(isinstance(g, dict) for g in gpus):
        raise StorageError(f"{where}: noise.gpus must be a list of objects")
    throttle = 0
    throttled_gpus = 0
    for g in gpus:
        masks = g.get("throttle_reasons")
        mask = 0
        for m in masks if isinstance(masks, list) else ():
            mask |= m if isinstance(m, int) and not isinstance(m, bool) else 0
        mask &= THROTTLE_MASK
        throttle |= mask
        throttled_gpus += bool(mask or g.get("throttled"))
    cores = _real(foreign)
    taint = Taint(0)
    if flags:
        explained = 0
        wall = _real(raw.get("wall_s"))
        loaded = cores is not None and cores > noise.FOREIGN_LOAD_CORES
        if cores is not None and wall is not None:
            loaded = loaded and cores * wall >= noise.FOREIGN_MIN_SECONDS * 0.98  # both rounded
        if loaded:
            taint |= Taint.FOREIGN_LOAD
            explained += 1
        if throttled_gpus:
            taint |= Taint.GPU_THROTTLED
            explained += throttled_gpus
        if len(flags) > explained:
            taint |= Taint.OTHER
    return taint, cores, throttle


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
        return load_records([(f"{directory}: run {r.run_id}", r.to_dict()) for r in runs])
    paths = record_paths(directory)
    if not paths:
        raise StorageError(f"{directory}: no run records (*.json) in it")
    workers = workers if workers is not None else min(4, len(os.sched_getaffinity(0)))
    return _matrices(_chunks(paths, workers))


def load_records(records: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Matrix]:
    """Every profile's matrix from run records' JSON data, each named by where it is from.

    The records of a results store, say (:func:`perfsuite.store.load_runs`).
    """
    keys = _Keys()
    rows: list[_Row] = []
    for where, data in records:
        try:
            rows += _rows_of(digest_data(data, where, {}), where, keys)
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
