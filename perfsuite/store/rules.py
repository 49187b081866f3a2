"""A profile's rule files, read and checked: ``tolerances.toml`` and ``waivers.toml``.

They live beside the profile's baseline (``baselines/<profile>/``).  What the rules mean,
which tolerance a check gets and which waiver covers it, is judging's
(:mod:`perfsuite.judge.tolerances`, :mod:`perfsuite.judge.waivers`); this module only reads.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from perfsuite.errors import StorageError
from perfsuite.model.rules import Tolerances, Waiver, is_fraction
from perfsuite.store.files import check_toml_keys, read_toml

TOLERANCES = "tolerances.toml"
WAIVERS = "waivers.toml"
RULES_VERSION = 1  # the schema version both files carry


def _fraction(path: Path, key: str, value: Any) -> float:
    if not is_fraction(value):
        raise StorageError(f"{path}: '{key}' must be a fraction between 0 and 1, got {value!r}")
    return float(value)


def load_tolerances(profile_dir: Path) -> Tolerances:
    """Read ``tolerances.toml`` from a profile's baseline directory, if present."""
    path = profile_dir / TOLERANCES
    if not path.exists():
        return Tolerances()
    data = read_toml(path, "tolerances file")
    check_toml_keys(path, data, RULES_VERSION, {"default", "checks"})
    default = _fraction(path, "default", data["default"]) if "default" in data else None
    checks_raw = data.get("checks", {})
    if not isinstance(checks_raw, dict):
        raise StorageError(f"{path}: 'checks' must be a table of pattern = fraction")
    checks = {k: _fraction(path, f"checks.{k}", v) for k, v in checks_raw.items()}
    return Tolerances(default, checks, path)


def _header_lines(text: str) -> list[int]:
    return [
        i for i, line in enumerate(text.splitlines(), 1) if line.strip().startswith("[[waiver]]")
    ]


def load_waivers(profile_dir: Path) -> list[Waiver]:
    """Read a profile's waivers; a malformed entry is an error naming its line."""
    path = profile_dir / WAIVERS
    if not path.exists():
        return []
    data = read_toml(path, "waivers file")
    check_toml_keys(path, data, RULES_VERSION, {"waiver"}, "; expected [[waiver]] entries")
    entries = data.get("waiver", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise StorageError(f"{path}: 'waiver' must be [[waiver]] tables, got {entries!r:.60}")
    lines = _header_lines(path.read_text(encoding="utf-8"))
    waivers = []
    for index, entry in enumerate(entries):
        line = lines[index] if index < len(lines) else 0
        where = f"{path}:{line}"
        extra = set(entry) - {"test", "reason", "expires"}
        if extra:
            raise StorageError(f"{where}: unknown key(s) {', '.join(sorted(extra))} in [[waiver]]")
        for key in ("test", "reason"):
            if not isinstance(entry.get(key), str) or not entry[key].strip():
                raise StorageError(f"{where}: [[waiver]] needs a non-empty '{key}'")
        expires = entry.get("expires")
        if expires is not None and (
            not isinstance(expires, dt.date) or isinstance(expires, dt.datetime)
        ):
            raise StorageError(
                f"{where}: 'expires' must be a date like 2027-01-31, got {expires!r}"
            )
        waivers.append(Waiver(entry["test"], entry["reason"], expires, line))
    return waivers
