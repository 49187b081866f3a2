"""A run record's digest: what the fleet judges of it, kept beside the record as a cache.

A digest holds, per result, the check's id, unit and direction, its summary median and
within-run spread, its floor and baseline verdicts, its GPU, and whether its own run flagged
the reading (see :class:`Taint`).  The node that ran the record writes it (``RUN.fleet.json``
beside ``RUN.json``), so that a report of 10,000 nodes reads 150 bytes a result rather than
parsing 2 to 4 kB of record JSON (docs/fleet.md, "At scale").

A record is read by the store's loader (:mod:`perfsuite.store.records`: the bounds of
:func:`perfsuite.store.validate.parse_json`, every field's type), then held to the fleet's own
rules: a node's label and host name follow hostname grammar (:mod:`perfsuite.fleet.labels`),
a median is positive, a GPU index is bounded.  Anything else is a StorageError naming the
file.  Nothing outside those rules ever reaches a terminal, a page, ``drain.json`` or a
command a report prints.

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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfsuite.errors import StorageError
from perfsuite.fleet.labels import GRAMMAR, is_label
from perfsuite.measure import noise
from perfsuite.model import (
    BASELINE_VERDICTS,
    FLOOR_VERDICTS,
    Result,
    RunRecord,
)
from perfsuite.store.files import is_plain_name, read_text_bounded
from perfsuite.store.records import MAX_RECORD_BYTES, load_record
from perfsuite.store.validate import MAX_MAGNITUDE, MAX_TEXT, is_number

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
_GPU = re.compile(r"gpu:([0-9]+)")
# GPU indices a node may have; a GPU's serial or UUID as a digest keeps it.
MAX_GPUS = 10_000
_SERIAL = re.compile(r"[A-Za-z0-9._:-]{1,128}", re.ASCII)


class Taint(enum.IntFlag):
    """Why a node's own run flagged a reading, as the record's structured noise facts say.

    A result is tainted exactly when its ``noise.flags`` is not empty: the rule every
    single-node verdict follows (:func:`perfsuite.judge.outcome.tainted`).  The kinds are read from
    the facts the noise guard recorded beside the flags, never from the flags' wording.
    """

    FOREIGN_LOAD = 1  # other work, or hypervisor steal, beside the check (noise.foreign_cores)
    GPU_THROTTLED = 2  # a GPU's clocks held down by hardware or thermals (noise.gpus)
    OTHER = 4  # a flag neither fact explains (a hook's reading, a guard added later)


ALL_TAINTS = int(Taint.FOREIGN_LOAD | Taint.GPU_THROTTLED | Taint.OTHER)


def throttle_reasons(mask: int) -> list[str]:
    """The names of the NVML throttle reasons in ``mask`` (noise.THROTTLE_BITS)."""
    return [name for bit, name in noise.THROTTLE_BITS.items() if mask & bit]


def digest_path(record: Path) -> Path:
    """Where a record's digest lives: ``RUN.fleet.json`` beside ``RUN.json``."""
    return record.with_name(record.name[: -len(".json")] + DIGEST_SUFFIX)


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

    The record is read by :func:`perfsuite.store.records.load_record`, with the fleet's own
    checks first (:func:`_fleet_fields`).
    """
    where = str(path)
    try:
        st = path.stat()
    except OSError as exc:
        raise StorageError(f"{where}: cannot read: {exc.strerror or exc}") from None
    record = load_record(path, first=_fleet_fields)
    pinned = {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
    return digest_of(record, where, pinned)


def _fleet_fields(data: Mapping[str, Any], where: str) -> None:
    """The fields a fleet names a record by, and judges its readings by, in the fleet's words.

    A record's run id and profile name a node's run in every report, and each result's noise
    facts decide whether the fleet may judge the reading; they are checked before the store's
    rules (:func:`perfsuite.store.records.check_record`, which holds them too), so that a
    report says what is wrong with them as the fleet reads them.
    """
    _text(data, "run_id", where)
    _text(_object(data, "hardware_profile", where), "name", f"{where}: hardware_profile")
    results = data.get("results")
    for i, raw in enumerate(results if isinstance(results, list) else ()):
        rid = raw.get("id") if isinstance(raw, dict) else None
        if isinstance(rid, str):
            _noise_facts(raw.get("noise", {}), f"{where}: result {i} ({rid[:80]})")


def digest_of(record: RunRecord, where: str, pinned: Mapping[str, int]) -> dict[str, Any]:
    """A digest (see :func:`digest`) of a loaded record; ``pinned``: its file's facts."""
    environment = record.environment
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
    parsed = [_columns(r, f"{where}: result {i}") for i, r in enumerate(record.results)]
    return {
        "schema_version": DIGEST_VERSION,
        "record": dict(pinned),
        "run_id": record.run_id,
        "profile": record.hardware_profile["name"],
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


def _columns(r: Result, where: str) -> list[Any]:
    """One result's entries of :data:`COLUMNS`."""
    where = f"{where} ({r.id[:80]})"
    median = r.summary.median
    if not median > 0:
        raise StorageError(f"{where}: summary.median must be a finite positive number")
    cv, n = r.summary.cv, r.summary.n
    within = cv / math.sqrt(n) if cv is not None and 0 < n < 1 << 53 and cv >= 0 else None
    gpu = None
    check_id = r.id
    if "gpu:" in r.id:
        match = _GPU.search(r.id)
        if match:
            gpu = int(match.group(1)[-6:])
            if len(match.group(1)) > 4 or gpu >= MAX_GPUS:
                raise StorageError(f"{where}: a GPU index above {MAX_GPUS - 1}")
            check_id = _GPU.sub("gpu:*", r.id)
    floor_code = FLOOR_VERDICTS.index(r.floor.verdict)
    base_code = BASELINE_VERDICTS.index(r.baseline.verdict)
    taint, foreign, throttle = _taint(r, where)
    return [check_id, r.metric, r.unit, r.higher_is_better, float(median), within, floor_code,
            base_code, gpu, int(taint), foreign, throttle]  # fmt: skip


def _noise_facts(raw: Any, where: str) -> list[Mapping[str, Any]]:
    """The noise facts the fleet reads, checked: a result's GPUs as its noise guard saw them."""
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
    return gpus


def _taint(r: Result, where: str) -> tuple[Taint, float | None, int]:
    """A result's noise facts: its taint, its foreign load (cores) and its throttle reasons.

    The taint follows the suite's own rule (flags present: tainted); each flag the noise
    guard raises is matched to the fact behind it (foreign load over the guard's threshold,
    one flag per throttled GPU), and any flag left over is OTHER.
    """
    throttle = 0
    throttled_gpus = 0
    for g in r.noise.gpus:
        mask = 0
        for m in g.throttle_reasons:
            mask |= m or 0
        mask &= THROTTLE_MASK
        throttle |= mask
        throttled_gpus += bool(mask or g.throttled)
    cores = _real(r.noise.foreign_cores)
    taint = Taint(0)
    if r.noise_flags:
        explained = 0
        wall = _real(r.noise.wall_s)
        loaded = cores is not None and cores > noise.FOREIGN_LOAD_CORES
        if cores is not None and wall is not None:
            loaded = loaded and cores * wall >= noise.FOREIGN_MIN_SECONDS * 0.98  # both rounded
        if loaded:
            taint |= Taint.FOREIGN_LOAD
            explained += 1
        if throttled_gpus:
            taint |= Taint.GPU_THROTTLED
            explained += throttled_gpus
        if len(r.noise_flags) > explained:
            taint |= Taint.OTHER
    return taint, cores, throttle


def _real(value: Any) -> float | None:
    """``value`` as a float, when it is a number as a loaded file may hold one (validate.py)."""
    return float(value) if is_number(value) else None


def fresh_digest(record: Path) -> dict[str, Any] | None:
    """The record's digest, when it is fresh and well formed; None otherwise.

    Fresh: made from the record as it is now.  Well formed: :func:`check_digest`.  On None
    the record is read instead, and its digest made again.
    """
    path = digest_path(record)
    try:
        if not path.exists():
            return None
        # Plain json.loads, not validate.parse_json: at 10,000 nodes its per-number callbacks
        # would double the report's time, and check_digest holds every value it keeps to the
        # same bounds (is_number, MAX_TEXT).
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
    index out of range or a label outside hostname grammar must never pass.  The rules are
    those a record's values passed (:mod:`perfsuite.store.validate`: ``is_number``,
    ``MAX_TEXT``; a plain profile name), applied column by column rather than through
    ``check_value``, whose step per value would cost seconds at 10,000 nodes x 200 checks.
    """
    version = d.get("schema_version")
    if type(version) is not int or version != DIGEST_VERSION:
        raise ValueError(f"schema_version {str(version)[:20]!r}, not {DIGEST_VERSION}")
    if not _is_text(d.get("run_id")) or not is_plain_name(d.get("profile")):
        raise ValueError("its 'run_id' or 'profile' is not what a record may hold")
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
        if not all(_is_text(v) for v in columns[c]):
            raise ValueError(f"column {c!r} holds other than printable text")
    if not all(type(v) is bool for v in columns["higher_is_better"]):
        raise ValueError("column 'higher_is_better' holds other than true or false")
    for c, empty in (("median", False), ("within", True), ("foreign_cores", True)):
        if not all((v is None and empty) or _is_number(v) for v in columns[c]):
            raise ValueError(f"column {c!r} holds other than finite numbers")
    if not all(v > 0 for v in columns["median"]):
        raise ValueError("a median that is not positive")
    limits = {"floor": len(FLOOR_VERDICTS), "baseline": len(BASELINE_VERDICTS),
              "taint": ALL_TAINTS + 1, "throttle": THROTTLE_MASK + 1}  # fmt: skip
    for c, limit in limits.items():
        if not all(type(v) is int and 0 <= v < limit for v in columns[c]):
            raise ValueError(f"column {c!r} holds other than its codes")
    if any(v & ~THROTTLE_MASK for v in columns["throttle"]):
        raise ValueError("unknown throttle bits")
    if not all(v is None or (type(v) is int and 0 <= v < MAX_GPUS) for v in columns["gpu"]):
        raise ValueError("column 'gpu' holds other than GPU indices")


def _is_number(value: object) -> bool:
    """:func:`~perfsuite.store.validate.is_number`, for a value read without its bounds.

    json.loads keeps an integer of any length, which is_number cannot hold to a float.
    """
    if type(value) is int:
        return abs(value) <= MAX_MAGNITUDE
    return type(value) is float and is_number(value)


def _is_text(value: object) -> bool:
    """Text a record's id, unit or run id may be: non-empty, printable, within MAX_TEXT."""
    return (
        type(value) is str and 0 < len(value) <= MAX_TEXT and bool(value.strip())
        and value.isprintable()
    )  # fmt: skip


def keep(record: Path, d: Mapping[str, Any]) -> None:
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
