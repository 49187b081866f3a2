"""Baselines: the accepted results of one hardware profile, under ``baselines/<profile>/``."""

from __future__ import annotations

import re
import shutil
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from perfsuite.errors import BaselineMismatchError, StorageError
from perfsuite.model import Result
from perfsuite.storage import check_writable, read_json, write_json_atomic

SCHEMA_VERSION = 1
FILENAME = "baseline.json"


@dataclass(frozen=True)
class BaselineEntry:
    """The accepted samples of one check."""

    metric: str
    unit: str
    higher_is_better: bool
    samples: tuple[float, ...]
    run_id: str
    created: str

    @classmethod
    def from_result(cls, result: Result, run_id: str, created: str) -> BaselineEntry:
        """Take a result's samples as the accepted ones."""
        return cls(
            result.metric, result.unit, result.higher_is_better, result.samples, run_id, created
        )


@dataclass(frozen=True)
class Baseline:
    """All accepted entries of one profile, keyed by pytest node id."""

    profile: str
    entries: Mapping[str, BaselineEntry]
    path: Path
    environments: Mapping[str, Any] = field(default_factory=dict)  # run id -> fingerprint

    def environment(self) -> Mapping[str, Any] | None:
        """The fingerprint of the run most entries were accepted from, if it was stored."""
        runs = Counter(e.run_id for e in self.entries.values())
        for run_id, _ in runs.most_common():
            if run_id in self.environments:
                env: Mapping[str, Any] = self.environments[run_id]
                return env
        return None

    def get(self, node_id: str) -> BaselineEntry | None:
        """Return the entry for a check, if one was accepted."""
        return self.entries.get(node_id)


class BaselineStore:
    """Reads and writes ``<root>/<profile>/baseline.json``."""

    def __init__(self, root: Path) -> None:
        """Use ``root`` as the baselines directory."""
        self.root = root

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
        data = read_json(path, "baseline", SCHEMA_VERSION)
        recorded = data.get("hardware_profile")
        if recorded != profile:
            raise BaselineMismatchError(
                f"{path}: baseline was recorded on profile {recorded!r}, not {profile!r}; "
                "refusing to compare results across hardware profiles"
            )
        try:
            entries = {
                node_id: BaselineEntry(**{**entry, "samples": tuple(entry["samples"])})
                for node_id, entry in data["entries"].items()
            }
        except (KeyError, TypeError, AttributeError) as exc:
            raise StorageError(
                f"{path}: corrupt baseline: bad or missing entry field ({exc}) "
                "(file left untouched)"
            ) from None
        environments = data.get("environments", {})
        return Baseline(
            profile, entries, path, environments if isinstance(environments, dict) else {}
        )

    def check_writable(self, profile: str) -> None:
        """Fail early if the profile's baseline directory cannot be written."""
        check_writable(self.root / profile)

    def history_dir(self, profile: str) -> Path:
        """Where replaced baselines are kept."""
        return self.root / profile / "history"

    def _archive(self, profile: str) -> Path | None:
        """Keep a copy of the current baseline before it is replaced."""
        path = self.path(profile)
        if not path.exists():
            return None
        stamp = re.sub(r"[^0-9A-Za-z]+", "", datetime.now(UTC).isoformat(timespec="milliseconds"))
        target = self.history_dir(profile) / f"baseline-{stamp}.json"
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        except OSError as exc:
            raise StorageError(
                f"{target}: cannot keep the previous baseline: {exc.strerror or exc}"
            ) from None
        return target

    def save(
        self,
        profile: str,
        results: Iterable[Result],
        run_id: str,
        environment: Mapping[str, Any] | None = None,
    ) -> Path:
        """Merge results into the profile's baseline atomically; other entries are kept.

        The previous file is first copied to ``history/``, so it stays recoverable.
        """
        current = self.load(profile)
        created = datetime.now(UTC).isoformat(timespec="seconds")
        entries = dict(current.entries)
        for result in results:
            if result.samples:
                entries[result.id] = BaselineEntry.from_result(result, run_id, created)
        used = {entry.run_id for entry in entries.values()}
        environments = {k: v for k, v in current.environments.items() if k in used}
        if environment is not None:
            environments[run_id] = dict(environment)
        data: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "hardware_profile": profile,
            "updated": created,
            "environments": environments,
            "entries": {
                node_id: {**asdict(entry), "samples": list(entry.samples)}
                for node_id, entry in sorted(entries.items())
            },
        }
        self._archive(profile)
        try:
            return write_json_atomic(self.path(profile), data)
        except StorageError as exc:
            raise StorageError(f"saving baseline failed: {exc}") from None
