"""Baselines: the accepted runs of one hardware profile, under ``baselines/<profile>/``.

Each check's entry keeps the samples of its last ``window`` accepted runs (5 by default),
each run apart, so that a comparison can see how much whole runs vary as well as how much
repetitions within a run do.  A run's entry also records how it was measured (mode, sample
count, warm-up, timer, sample source).

Schema 2 is written; schema 1 files (one run per check) still load, are judged with the
between-run spread unknown, and become schema 2 on the next save.  Every read-merge-write
holds an exclusive lock on ``baseline.json.lock`` beside the file, so concurrent saves
(xdist, parallel CI jobs, ``perfsuite baseline accept``) never lose each other's entries.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from perfsuite.errors import BaselineMismatchError, StorageError
from perfsuite.measure import probe, readings
from perfsuite.model import Result
from perfsuite.model.baseline import (
    DEFAULT_WINDOW,
    MAX_WINDOW,
    MIN_WINDOW,
    Baseline,
    BaselineEntry,
    BaselineRun,
    load_cores,
    paired_ratios,
    same_direction,
)
from perfsuite.store.files import (
    check_writable,
    clean_stale_temporaries,
    is_plain_name,
    read_json,
    write_chunks_atomic,
    write_text_atomic,
)
from perfsuite.store.policy import own_policy, policy_problem, result_policy, run_policy
from perfsuite.store.validate import bad_samples, is_number, is_sample, is_timestamp, parse_json

SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)
FILENAME = "baseline.json"
HISTORY_KEEP = 10  # previous baseline files kept under history/


def _entry(
    path: Path, node_id: str, raw: Any, run_policies: Mapping[str, Any] | None = None
) -> BaselineEntry:
    """Validate one stored entry (schema 1 or 2); run-level policies are merged in."""

    def bad(why: str) -> StorageError:
        return StorageError(f"{path}: entry {node_id!r}: {why} (file left untouched)")

    if not isinstance(raw, dict):
        raise bad("expected an object")
    for key, kind in (("metric", str), ("unit", str), ("higher_is_better", bool)):
        if not isinstance(raw.get(key), kind):
            raise bad(f"{key!r} missing or not a {kind.__name__}")
    for text in (node_id, raw["metric"], raw["unit"]):
        if not text.isprintable():
            raise bad("an id, metric or unit holds a control character")
    raw_runs = raw.get("runs")
    if raw_runs is None and "samples" in raw:  # schema 1: one run per check
        raw_runs = [{"run_id": raw.get("run_id", ""), "created": raw.get("created", ""), **raw}]
    if not isinstance(raw_runs, list) or not raw_runs:
        raise bad("no accepted runs")
    runs = []
    for i, run in enumerate(raw_runs):
        if not isinstance(run, dict):
            raise bad(f"run {i} is not an object")
        values = run.get("samples")
        if values is not None and not isinstance(values, list):
            raise bad(f"run {i}: 'samples' is not a list of numbers, got {values!r:.40}")
        if not values:
            raise bad(f"run {i} has no samples")
        wrong = bad_samples(values)
        if wrong:
            raise bad(f"run {i} has a sample that is not a finite positive number: {wrong[0]!r}")
        for key in ("run_id", "created"):
            if not isinstance(run.get(key, ""), str):
                raise bad(f"run {i}: {key!r} is not text")
        if run.get("created") and not is_timestamp(run["created"]):
            raise bad(f"run {i}: 'created' is not an ISO 8601 time: {run['created']!r:.40}")
        policy = run.get("policy", {})
        if not isinstance(policy, dict):
            raise bad(f"run {i}: 'policy' is not an object")
        problem = policy_problem(policy)
        if problem:
            raise bad(f"run {i}: policy {problem}")
        if not is_sample(policy.get("reference", 1.0)):
            raise bad(
                f"run {i} has a reference that is not a finite positive number: "
                f"{policy['reference']!r}"
            )
        machine = policy.get("machine") if isinstance(policy, dict) else None
        if machine is not None and (
            readings.stored(machine) is None
            or (probe.LINK in machine and readings.rate(machine, probe.LINK) is None)
        ):
            raise bad(f"run {i} has a machine-probe rate that is not a finite positive number")
        ratios = run.get("pair_ratios", [])
        if bad_samples(ratios) or (ratios and len(ratios) != len(values)):
            raise bad(f"run {i}: 'pair_ratios' is not one finite positive number a sample")
        load = run.get("load_cores")
        if load is not None and not (is_number(load) and 0 <= load <= 1e6):
            raise bad(f"run {i}: 'load_cores' is not a number of cores >= 0, got {load!r:.40}")
        run_id = str(run.get("run_id", ""))
        shared = (run_policies or {}).get(run_id, {})
        runs.append(
            BaselineRun(
                run_id,
                str(run.get("created", "")),
                tuple(float(v) for v in values),
                run_policy(shared, policy),
                tuple(float(v) for v in ratios),
                None if load is None else float(load),
            )
        )
    return BaselineEntry(raw["metric"], raw["unit"], raw["higher_is_better"], tuple(runs))


def _updated(path: Path) -> str:
    """The time a baseline file says it was written (its ``updated``), or "" if unreadable."""
    try:
        with path.open("rb") as fh:
            head = fh.read(4096)
    except OSError:
        return ""
    found = re.search(rb'"updated":\s*"([0-9T:+.\-Z]{1,40})"', head)
    return found.group(1).decode("ascii") if found else ""


def _stamp() -> str:
    now = datetime.now(UTC)
    return f"{now:%Y%m%dT%H%M%S}{now.microsecond:06d}Z-{os.getpid()}-{secrets.token_hex(3)}"


class BaselineStore:
    """Reads and writes ``<root>/<profile>/baseline.json``."""

    def __init__(
        self, root: Path, window: int | None = None, history_keep: int = HISTORY_KEEP
    ) -> None:
        """Use ``root``; keep ``window`` runs per check and ``history_keep`` old files.

        With no ``window``, a save keeps the window the stored file was written with (so a
        baseline built with ten runs per check stays at ten), or ``DEFAULT_WINDOW`` for a new
        file.
        """
        if window is not None and not MIN_WINDOW <= window <= MAX_WINDOW:
            raise ValueError(
                f"a baseline keeps {MIN_WINDOW} to {MAX_WINDOW} runs per check, got {window}"
            )
        if history_keep < 0:
            raise ValueError(f"history_keep must be >= 0, got {history_keep}")
        self.root = root
        self.window = window
        self.history_keep = history_keep

    def path(self, profile: str) -> Path:
        """The baseline file of a profile."""
        return self.root / profile / FILENAME

    def load(self, profile: str) -> Baseline:
        """Load a profile's baseline; a missing file is an empty baseline.

        A corrupt, truncated or other-version file raises StorageError naming the file; a
        file recorded on another profile raises BaselineMismatchError.  Neither is modified.
        """
        path = self.path(profile)
        if not path.exists():
            return Baseline(profile, {}, path)
        data = self._read_checked(profile)
        run_policies = data.get("run_policies", {})
        entries = {
            node_id: _entry(path, node_id, raw, run_policies)
            for node_id, raw in data["entries"].items()
        }
        return Baseline(profile, entries, path, data.get("environments", {}))

    def _read_checked(self, profile: str) -> dict[str, Any]:
        """The stored file, checked: readable version, this profile's, entries an object."""
        path = self.path(profile)
        data = read_json(path, "baseline", READABLE_VERSIONS)
        self._check_header(path, data, profile)
        return data

    @staticmethod
    def _check_header(path: Path, data: Mapping[str, Any], profile: str) -> None:
        """The file's version is readable, it was recorded on ``profile``, entries an object."""
        if data.get("schema_version") not in READABLE_VERSIONS:
            raise StorageError(
                f"{path}: baseline has schema_version {data.get('schema_version')!r}; this "
                f"perfsuite reads {', '.join(map(str, READABLE_VERSIONS))}"
            )
        recorded = data.get("hardware_profile")
        if recorded != profile:
            raise BaselineMismatchError(
                f"{path}: baseline was recorded on profile {recorded!r}, not {profile!r}; "
                "refusing to compare results across hardware profiles"
            )
        if not isinstance(data.get("entries"), dict):
            raise StorageError(f"{path}: corrupt baseline: 'entries' is not an object")
        for key in ("run_policies", "environments"):
            if not isinstance(data.get(key, {}), dict):
                raise StorageError(
                    f"{path}: corrupt baseline: {key!r} is not an object, got "
                    f"{data[key]!r:.40} (file left untouched)"
                )
        for run_id, policy in data.get("run_policies", {}).items():
            problem = policy_problem(policy) if isinstance(policy, dict) else "is not an object"
            if problem:
                raise StorageError(
                    f"{path}: corrupt baseline: run_policies[{run_id!r:.40}] {problem} "
                    "(file left untouched)"
                )
        updated = data.get("updated", "")
        if updated != "" and not is_timestamp(updated):
            raise StorageError(
                f"{path}: corrupt baseline: 'updated' is not an ISO 8601 time, got "
                f"{updated!r:.40} (file left untouched)"
            )
        window = data.get("window")
        if "window" in data and window is None and data.get("schema_version") != 1:
            raise StorageError(
                f"{path}: corrupt baseline: 'window' must be a whole number from {MIN_WINDOW} "
                f"to {MAX_WINDOW}, got null (file left untouched)"
            )
        if window is not None and not (
            isinstance(window, int)
            and not isinstance(window, bool)
            and MIN_WINDOW <= window <= MAX_WINDOW
        ):
            raise StorageError(
                f"{path}: corrupt baseline: 'window' must be a whole number from {MIN_WINDOW} "
                f"to {MAX_WINDOW}, got {window!r:.40} (file left untouched)"
            )

    def check_writable(self, profile: str) -> None:
        """Fail early if the profile's baseline directory cannot be written."""
        check_writable(self.root / profile)

    def history_dir(self, profile: str) -> Path:
        """Where replaced baselines are kept."""
        return self.root / profile / "history"

    @contextlib.contextmanager
    def locked(self, profile: str) -> Iterator[None]:
        """Hold the profile's exclusive baseline lock (blocking) for a read-merge-write."""
        lock_path = self.path(profile).with_name(FILENAME + ".lock")
        try:
            lock_path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise StorageError(f"{lock_path}: cannot lock: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _archive(self, profile: str) -> None:
        """Keep the baseline being replaced under history/; bound how many are kept.

        The copy is a hard link to the current file (the new one is renamed over the old
        name, so the link keeps the old content): atomic, and no copy of a large file. Where
        links are not possible the file is copied atomically instead.  The oldest copies by
        the time written in each (``updated``) are removed; only regular files inside the
        profile's own folder are ever touched.
        """
        directory = self.own_history_dir(profile)
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / f"baseline-{_stamp()}.json"
        try:
            os.link(self.path(profile), target)
        except OSError:
            write_text_atomic(target, self.path(profile).read_text(encoding="utf-8"))
        kept = self.kept(profile)
        for old in kept[: max(0, len(kept) - self.history_keep)]:
            with contextlib.suppress(OSError):
                old.unlink()

    def kept(self, profile: str) -> list[Path]:
        """The baselines kept under history/, oldest first by the time written in each."""
        directory = self.own_history_dir(profile)
        return sorted(
            (p for p in directory.glob("baseline-*.json") if p.is_file() and not p.is_symlink()),
            key=lambda p: (_updated(p), p.name),
        )

    def own_history_dir(self, profile: str) -> Path:
        """history/, refused when it is a link or leads out of the profile's folder."""
        directory = self.history_dir(profile)
        folder = (self.root / profile).resolve()
        if directory.is_symlink() or (directory.exists() and directory.resolve().parent != folder):
            raise StorageError(
                f"{directory}: is a link out of the baseline folder; perfsuite keeps and prunes "
                "old baselines only inside it (replace the link with a folder)"
            )
        return directory

    def save(
        self,
        profile: str,
        results: Iterable[Result],
        run_id: str,
        environment: Mapping[str, Any] | None = None,
        policy: Mapping[str, Any] | None = None,
        created: str | None = None,
    ) -> tuple[Path, int]:
        """Add results as one run to the profile's baseline; other entries are kept.

        Each check keeps its newest ``window`` runs; a run accepted twice replaces itself.
        The previous file is kept under ``history/``.  ``created``: when the run measured
        (ISO 8601; default now), which tells the runs' sessions apart (``stats.sessions``).
        Returns the path and the number of entries written.
        """
        chosen = [r for r in results if r.samples]
        safe_profile_name(profile)
        problem = (
            policy_problem(policy or {})
            if isinstance(policy or {}, Mapping)
            else f"is not an object, got {policy!r:.40}"
        )
        if problem:  # what is written must read back: refused before anything is written
            raise StorageError(f"run {run_id}: its recorded policy {problem}")
        with self.locked(profile):
            for directory in (self.root / profile, self.own_history_dir(profile)):
                # Every writer holds this lock, so any temporary file here is a dead one.
                clean_stale_temporaries(directory, older_than_s=0.0)
            path = self.path(profile)
            data = self._read_raw(profile)
            created = created or datetime.now(UTC).isoformat(timespec="seconds")
            entries: dict[str, Any] = data["entries"]
            run_policies: dict[str, Any] = data["run_policies"]
            window = self.window or data["window"] or DEFAULT_WINDOW
            for result in chosen:
                run = BaselineRun(
                    run_id,
                    created,
                    tuple(result.samples),
                    result_policy(result),
                    paired_ratios(result.bare_reference, len(result.samples)),
                    load_cores(result),
                )
                stored = entries.get(result.id)
                entries[result.id] = _merged(path, result, stored, run, run_policies, window)
            for result in chosen:  # what is written must read back
                _entry(path, result.id, entries[result.id], run_policies)
            used = _run_ids(entries.values())
            environments = {k: v for k, v in data["environments"].items() if k in used}
            if environment is not None:
                environments[run_id] = dict(environment)
            run_policies = {k: v for k, v in run_policies.items() if k in used}
            run_policies[run_id] = dict(policy or {})
            header: dict[str, Any] = {
                "schema_version": SCHEMA_VERSION,
                "hardware_profile": profile,
                "updated": created,
                "window": window,
                "environments": environments,
                "run_policies": run_policies,
            }
            if path.exists():
                self._archive(profile)
            try:
                return write_chunks_atomic(path, _layout(header, entries)), len(chosen)
            except (StorageError, ValueError) as exc:
                raise StorageError(f"{path}: saving baseline failed: {exc}") from None

    def _read_raw(self, profile: str) -> dict[str, Any]:
        """The stored file for a save: entries untouched where possible.

        A file in perfsuite's own layout whose checksum holds is not parsed: each entry
        stays the bytes of its line (a ``memoryview``) and is written back as it is.  Any
        other file (hand-edited, older layout, schema 1) is read and checked in full.
        """
        path = self.path(profile)
        empty: dict[str, Any] = {
            "entries": {}, "environments": {}, "run_policies": {}, "window": None
        }  # fmt: skip
        if not path.exists():
            return empty
        data = _read_layout(path)
        if data is not None:
            self._check_header(path, data, profile)
            entries = data["entries"]
        else:
            data = self._read_checked(profile)
            entries = data["entries"]
            if data.get("schema_version") == 1:  # one run per check: becomes a one-run window
                entries = {k: _entry(path, k, v).to_dict() for k, v in entries.items()}
            for node_id, raw in entries.items():
                # Every entry is checked here, so a poisoned one is named, never written back.
                _entry(path, node_id, raw, data.get("run_policies"))
        return {  # the header was checked: these are objects, the window in range or None
            "entries": entries,
            "environments": data.get("environments", {}),
            "run_policies": data.get("run_policies", {}),
            "window": data.get("window"),  # None for a file without one (schema 1)
        }


def _merged(
    path: Path,
    result: Result,
    stored: Any,
    run: BaselineRun,
    run_policies: Mapping[str, Any],
    window: int,
) -> dict[str, Any]:
    """A check's entry with ``run`` added: its stored runs kept, the newest ``window`` in all.

    ``stored``: the entry as the file holds it (an unparsed line, an object, or None).  A run
    of the same id is replaced; a stored entry in another unit is started afresh; one in the
    same unit that counts the other way round (higher against lower is better) is refused.
    """
    if isinstance(stored, memoryview):
        stored = parse_json(bytes(stored).decode("utf-8", "replace"), str(path), "baseline")
    old = _entry(path, result.id, stored, run_policies) if stored is not None else None
    if old is not None:
        same_direction(
            result.id,
            (f"{path}: the baseline", old),
            (f"run {run.run_id}", result),
            "refusing to merge (file left untouched)",
        )
    keep: list[dict[str, Any]] = []
    if old is not None and old.unit == result.unit:
        keep = [
            {
                **r.to_dict(),
                # Runs whose policy is stored once keep only their own facts.
                "policy": own_policy(r.policy) if r.run_id in run_policies else r.policy,
            }
            for r in old.runs
            if r.run_id != run.run_id
        ]
    return {
        "metric": result.metric,
        "unit": result.unit,
        "higher_is_better": result.higher_is_better,
        "runs": [*keep, run.to_dict()][-window:],
    }


# The layout a baseline is written in: still one JSON document, but each check's entry on a
# line of its own, and a checksum of those lines at the end.  A save into a large baseline
# then rewrites the lines it changes and copies the rest, unparsed; a line that is edited by
# hand (or merged by git) breaks the checksum, and the file is then read and checked in full.
_OPEN = b',"entries":{'
_CLOSE = re.compile(rb'\},"entries_sha256":"([0-9a-f]{64})"\}\n?\Z')
_KEY = re.compile(rb'("(?:[^"\\]|\\.)*"):')
_RUN_ID = re.compile(rb'"run_id":"((?:[^"\\]|\\.)*)"')


def _compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), allow_nan=False).encode("ascii")


def _layout(header: Mapping[str, Any], entries: Mapping[str, Any]) -> Iterator[bytes | memoryview]:
    """The file's bytes, in order: header, one line per entry (sorted), checksum."""
    yield _compact(header)[:-1] + _OPEN + b"\n"
    digest = hashlib.sha256()
    keys = sorted(entries)
    for i, key in enumerate(keys):
        value = entries[key]
        body = value if isinstance(value, memoryview) else _compact(value)
        for chunk in (_compact(key), b":", body, b",\n" if i < len(keys) - 1 else b"\n"):
            digest.update(chunk)
            yield chunk
    yield b'},"entries_sha256":"' + digest.hexdigest().encode("ascii") + b'"}\n'


def _read_layout(path: Path) -> dict[str, Any] | None:
    """The header and entry lines of a file in the layout above, or None if it is not one."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise StorageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    first = data.find(b"\n")
    if first < 0 or not data[:first].endswith(_OPEN):
        return None
    last = data.rfind(b"\n", 0, len(data) - 1) + 1
    close = _CLOSE.match(data, last)
    if close is None or last <= first:
        return None
    view = memoryview(data)
    if hashlib.sha256(view[first + 1 : last]).hexdigest().encode("ascii") != close.group(1):
        return None
    try:
        header = parse_json(
            (data[: first - len(_OPEN)] + b"}").decode("utf-8"), str(path), "baseline"
        )
    except (StorageError, UnicodeDecodeError):
        return None
    if not isinstance(header, dict):
        return None
    entries: dict[str, memoryview] = {}
    start = first + 1
    while start < last:
        end = data.index(b"\n", start)
        stop = end - 1 if data[end - 1 : end] == b"," else end
        key = _KEY.match(data, start, stop)
        if key is None:
            return None
        entries[json.loads(key.group(1))] = view[key.end() : stop]
        start = end + 1
    header["entries"] = entries
    return header


def _run_ids(entries: Iterable[Any]) -> set[str]:
    """The run ids that entries (parsed, or unparsed lines) refer to."""
    used: set[str] = set()
    quoted: set[bytes] = set()
    for entry in entries:
        if isinstance(entry, memoryview):
            quoted.update(_RUN_ID.findall(entry))
        elif isinstance(entry, dict):
            used.update(str(r.get("run_id")) for r in entry.get("runs", ()) if isinstance(r, dict))
    return used | {json.loads(b'"' + q + b'"') for q in quoted}


def safe_profile_name(name: str) -> str:
    """A profile name that is one plain path component, or StorageError."""
    if not is_plain_name(name):
        raise StorageError(f"profile name {name!r} is not a plain name (letters, digits, . _ -)")
    return name
