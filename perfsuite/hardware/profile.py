"""Hardware profiles: one TOML file per device, validated strictly on load.

A profile holds datasheet figures in decimal units (GB = 1e9 B, TFLOP/s = 1e12 FLOP/s,
dense tensor rates).  Profiles ship in ``perfsuite/hardware/profiles``; a project can add
or override profiles from its own directories (a file with the same name wins).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite.errors import ProfileError, StorageError
from perfsuite.store.files import is_plain_name, read_toml

SCHEMA_VERSION = 1
BUILTIN_DIR = Path(__file__).parent / "profiles"

# Section -> key -> kind.  "number" means a positive finite number.
_SPEC: dict[str, dict[str, str]] = {
    "": {
        "schema_version": "int",
        "name": "str",
        "description": "str",
        "kind": "kind",
        "vendor": "str",
        "source": "str",
        "match": "strlist",
        "estimated": "strlist",
    },
    "memory": {
        "type": "str",
        "capacity_gb": "number",
        "bandwidth_gbs": "number",
        "last_level_cache_mib": "number",
    },
    "compute": {
        "fp64_tflops": "number",
        "fp32_tflops": "number",
        "tf32_tflops": "number",
        "fp16_tflops": "number",
        "bf16_tflops": "number",
        "fp8_tflops": "number",  # dense, e4m3, where the device has fp8 tensor cores
    },
    "interconnect": {
        "name": "str",
        "bandwidth_gbs": "number",
        "pcie_generation": "number",
        "pcie_gbs_per_direction": "number",
        # The small-message allreduce latency this system should reach (site-specific).
        "allreduce_latency_us": "number",
    },
    # Facts about the host a CPU profile was built from (model, cores, SIMD width).
    "host": {
        "cpu_model": "str",
        "cores": "number",
        "simd_bits": "number",
        "clock_ghz": "number",
        "fma_units_per_core": "number",
    },
}
# The range each figure may take, in the unit its key names: from a small board to far past
# any device (a test profile's peaks no machine reaches fit too), and a typo such as
# 1e-300 GB/s is refused rather than printed as a 300-digit "vs reference" figure.
FIGURE_RANGES: dict[str, tuple[float, float]] = {
    "memory.capacity_gb": (1e-3, 1e15),
    "memory.bandwidth_gbs": (1e-6, 1e15),
    "memory.last_level_cache_mib": (1e-3, 1e15),
    **{
        f"compute.{p}_tflops": (1e-6, 1e15) for p in ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")
    },
    "interconnect.bandwidth_gbs": (1e-3, 1e15),
    "interconnect.pcie_generation": (1, 20),
    "interconnect.pcie_gbs_per_direction": (1e-3, 1e15),
    "interconnect.allreduce_latency_us": (1e-3, 1e9),
    "host.cores": (1, 1e7),
    "host.simd_bits": (8, 1e5),
    "host.clock_ghz": (1e-3, 1e3),
    "host.fma_units_per_core": (0.1, 1e3),
}
_REQUIRED = ("schema_version", "name", "description", "kind", "source")
_REQUIRED_GPU = ("memory.bandwidth_gbs", "memory.last_level_cache_mib", "compute.fp32_tflops")
KINDS = ("gpu", "cpu")


@dataclass(frozen=True)
class HardwareProfile:
    """The figures of one device, as loaded from a profile or built from the host."""

    name: str
    description: str
    kind: str
    source: str
    vendor: str = ""
    match: tuple[str, ...] = ()
    figures: Mapping[str, float] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    estimated: frozenset[str] = frozenset()
    origin: str = ""

    def figure(self, key: str) -> float | None:
        """Return a dotted figure such as ``memory.bandwidth_gbs``, or None if absent."""
        return self.figures.get(key)

    def is_estimated(self, key: str) -> bool:
        """Tell whether a figure is an estimate rather than a datasheet value."""
        return key in self.estimated

    def to_dict(self) -> dict[str, Any]:
        """Return the profile as plain JSON-ready data (used in run records)."""
        return {
            "name": self.name,
            "description": self.description,
            "kind": self.kind,
            "vendor": self.vendor,
            "source": self.source,
            "match": list(self.match),
            "figures": dict(self.figures),
            "labels": dict(self.labels),
            "estimated": sorted(self.estimated),
            "origin": self.origin,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HardwareProfile:
        """Rebuild a profile from :meth:`to_dict` output."""
        return cls(
            name=data["name"],
            description=data["description"],
            kind=data["kind"],
            vendor=data.get("vendor", ""),
            source=data["source"],
            match=tuple(data.get("match", ())),
            figures=dict(data.get("figures", {})),
            labels=dict(data.get("labels", {})),
            estimated=frozenset(data.get("estimated", ())),
            origin=data.get("origin", ""),
        )

    def to_toml(self) -> str:
        """Render the profile in the TOML layout it is loaded from."""
        lines = [f"schema_version = {SCHEMA_VERSION}"]
        top: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "kind": self.kind,
            "vendor": self.vendor,
            "match": list(self.match),
            "estimated": sorted(self.estimated),
            "source": self.source,
        }
        lines += [f"{key} = {_toml_value(value)}" for key, value in top.items() if value]
        for section in [s for s in _SPEC if s]:
            entries = {
                key.split(".", 1)[1]: value
                for key, value in {**self.labels, **self.figures}.items()
                if key.split(".", 1)[0] == section
            }
            if entries:
                lines += ["", f"[{section}]"]
                for key, value in entries.items():
                    shown = _meaningful(value, f"{section}.{key}" in self.estimated)
                    lines.append(f"{key} = {_toml_value(shown)}")
        return "\n".join(lines) + "\n"


def _meaningful(value: Any, estimated: bool) -> Any:
    """A figure to the digits that mean something.

    An estimate, or a reading with more digits than a datasheet prints (a clock read from
    the host, 2.596144), to 4 significant digits (0.33230515200000005 -> 0.3323); a
    datasheet figure as given.
    """
    if isinstance(value, float) and (estimated or _digits(value) > 5):
        return float(f"{value:.4g}")
    return value


def _digits(value: float) -> int:
    """Significant digits in a float's shortest repr (2.596144 -> 7, 1935.0 -> 4)."""
    mantissa = repr(abs(value)).split("e")[0].replace(".", "").lstrip("0")
    return len(mantissa.rstrip("0")) or 1


def _toml_value(value: Any) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _check_value(path: Path, dotted: str, kind: str, value: Any) -> None:
    where = f"{path}: field '{dotted}'"
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ProfileError(f"{where} must be a number, got {value!r}")
        if not math.isfinite(value) or not 0 < value <= 1e100:
            raise ProfileError(f"{where} must be a positive number, got {value!r:.40}")
        low, high = FIGURE_RANGES.get(dotted, (0, 1e100))
        if not low <= value <= high:
            raise ProfileError(f"{where} must be from {low:g} to {high:g}, got {value!r:.40}")
    elif kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ProfileError(f"{where} must be an integer, got {value!r}")
    elif kind == "str":
        if not isinstance(value, str) or not value.strip():
            raise ProfileError(f"{where} must be a non-empty string, got {value!r}")
        _printable(where, value)
    elif kind == "strlist":
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ProfileError(f"{where} must be a list of non-empty strings, got {value!r}")
        for item in value:
            _printable(where, item)
    elif kind == "kind" and value not in KINDS:
        raise ProfileError(f"{where} must be one of {', '.join(KINDS)}, got {value!r}")


def _printable(where: str, value: str) -> None:
    """Refuse text a terminal would obey, or that ``profiles show`` could not write as TOML.

    A profile's description and source are printed as they are (``perfsuite profiles``):
    an escape sequence would drive the terminal, a BEL ring it, a line separator forge a row.
    """
    if not value.isprintable():
        bad = next(ch for ch in value if not ch.isprintable())
        raise ProfileError(
            f"{where} holds the control character {bad!r}; profile text must be printable, "
            f"got {value!r:.60}"
        )


def parse_profile(path: Path, data: Mapping[str, Any]) -> HardwareProfile:
    """Validate parsed TOML data and build a profile; errors name the file and field."""
    figures: dict[str, float] = {}
    labels: dict[str, str] = {}
    top: dict[str, Any] = {}
    for key, value in data.items():
        if key in _SPEC and key:
            if not isinstance(value, dict):
                raise ProfileError(f"{path}: field '{key}' must be a table ([{key}])")
            for sub, subvalue in value.items():
                dotted = f"{key}.{sub}"
                kind = _SPEC[key].get(sub)
                if kind is None:
                    known = ", ".join(_SPEC[key])
                    raise ProfileError(f"{path}: unknown field '{dotted}' (known: {known})")
                _check_value(path, dotted, kind, subvalue)
                if kind == "number":
                    figures[dotted] = float(subvalue)
                else:
                    labels[dotted] = subvalue
        elif key in _SPEC[""]:
            _check_value(path, key, _SPEC[""][key], value)
            top[key] = value
        else:
            known = ", ".join([*_SPEC[""], *(f"[{s}]" for s in _SPEC if s)])
            raise ProfileError(f"{path}: unknown field '{key}' (known: {known})")
    for key in _REQUIRED:
        if key not in top:
            raise ProfileError(f"{path}: missing field '{key}'")
    if top["schema_version"] != SCHEMA_VERSION:
        raise ProfileError(
            f"{path}: field 'schema_version' is {top['schema_version']}, "
            f"this perfsuite reads version {SCHEMA_VERSION}"
        )
    if not is_plain_name(top["name"]):
        raise ProfileError(
            f"{path}: field 'name' is {top['name']!r}: a profile name is one plain word "
            "(letters, digits, '.', '_', '-'); it names folders under baselines/ and reports/"
        )
    if top["name"] != path.stem:
        raise ProfileError(f"{path}: field 'name' is {top['name']!r} but the file is {path.name}")
    if top["kind"] == "gpu":
        for key in _REQUIRED_GPU:
            if key not in figures:
                raise ProfileError(f"{path}: missing field '{key}' (required for a gpu profile)")
    estimated = frozenset(top.get("estimated", ()))
    unknown = estimated - set(figures)
    if unknown:
        raise ProfileError(
            f"{path}: field 'estimated' names {', '.join(sorted(unknown))}, which the profile "
            "does not define"
        )
    return HardwareProfile(
        name=top["name"],
        description=top["description"],
        kind=top["kind"],
        vendor=top.get("vendor", ""),
        source=top["source"],
        match=tuple(top.get("match", ())),
        figures=figures,
        labels=labels,
        estimated=estimated,
        origin=str(path),
    )


def load_profile(path: Path) -> HardwareProfile:
    """Load and validate one profile file."""
    try:
        data = read_toml(path, "profile")
    except StorageError as exc:
        raise ProfileError(str(exc)) from None
    return parse_profile(path, data)


class ProfileRegistry:
    """The profiles shipped with perfsuite plus those in the user's directories."""

    def __init__(self, extra_dirs: Sequence[Path] = ()) -> None:
        """Index profile files; later directories override earlier ones by name."""
        self._paths: dict[str, Path] = {}
        for directory in (BUILTIN_DIR, *extra_dirs):
            if not directory.is_dir():
                raise ProfileError(f"{directory}: profile directory does not exist")
            for path in sorted(directory.glob("*.toml")):
                self._paths[path.stem] = path

    def names(self) -> list[str]:
        """Return every known profile name, sorted."""
        return sorted(self._paths)

    def canonical(self, name: str) -> str:
        """The profile's own name for ``name``, matched without regard to case.

        An unknown name raises ProfileError with the closest known names ("did you mean").
        """
        if name in self._paths:
            return name
        folded = {known.lower(): known for known in self._paths}
        if name.lower() in folded:
            return folded[name.lower()]
        raise ProfileError(
            f"unknown hardware profile {name!r}{did_you_mean(name, self._paths)} "
            f"(known: {', '.join(self.names())}, or auto for this machine)"
        )

    def path(self, name: str) -> Path:
        """Return the file a profile comes from (case-insensitive); unknown: ProfileError."""
        return self._paths[self.canonical(name)]

    def load(self, name: str) -> HardwareProfile:
        """Load one profile by name."""
        return load_profile(self.path(name))

    def load_all(self) -> list[HardwareProfile]:
        """Load every profile (validating each)."""
        return [self.load(name) for name in self.names()]

    def match_device(self, device_name: str, kind: str) -> HardwareProfile | None:
        """Return the profile whose longest ``match`` pattern occurs in a device name."""
        best: tuple[int, HardwareProfile] | None = None
        lowered = device_name.lower()
        for profile in self.load_all():
            if profile.kind != kind:
                continue
            for pattern in profile.match:
                if pattern.lower() in lowered and (best is None or len(pattern) > best[0]):
                    best = (len(pattern), profile)
        return best[1] if best else None


def known_figure_keys() -> Iterable[str]:
    """Every numeric figure a profile may define, as dotted keys."""
    for section, keys in _SPEC.items():
        for key, kind in keys.items():
            if section and kind == "number":
                yield f"{section}.{key}"


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """A hint such as ``"; did you mean a, b or c?"``, or "" when no known name is close.

    The known names that start like ``name`` or are close to it, in any case (at most three).
    """
    folded = {k.lower(): k for k in known}
    prefixed = [k for k in sorted(folded) if k.startswith(name.lower())]
    close = list(
        dict.fromkeys([*prefixed, *difflib.get_close_matches(name.lower(), list(folded), 3, 0.5)])
    )[:3]
    return f"; did you mean {_one_of([folded[c] for c in close])}?" if close else ""


def _one_of(names: list[str]) -> str:
    """'a', 'a or b', 'a, b or c'."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
