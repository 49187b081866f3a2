"""Which collected checks a session runs: the ``--perf-backend`` selection and the mode's cases.

A check names its backend in its parameters (a :class:`~perfsuite.backends.Target`, or a
case that carries one or a ``backend`` name) or in its ``perf_backend`` mark.
"""

from __future__ import annotations

from typing import Any

from perfsuite.backends import Target


def backend_of(item: Any) -> str | None:
    """The backend a collected test runs on, from its parameters or its ``perf_backend`` mark.

    None when it names none (it is then run whatever ``--perf-backend`` says).
    """
    marker = (
        item.get_closest_marker("perf_backend") if hasattr(item, "get_closest_marker") else None
    )
    if marker is not None and marker.args:
        return str(marker.args[0])
    params = getattr(getattr(item, "callspec", None), "params", {})
    for value in params.values():
        target = value if isinstance(value, Target) else getattr(value, "target", None)
        if isinstance(target, Target):
            return target.backend
        backend = getattr(value, "backend", None)
        if isinstance(backend, str):
            return backend
    return None


def beyond_mode(items: list[Any], quick: bool, full: bool) -> list[Any]:
    """The items the mode leaves out.

    Full mode runs every case; the default mode leaves out ``perf_full`` cases (the sweeps
    beyond their representatives); quick mode also leaves out ``perf_sweep`` ones, keeping
    one case per family.
    """
    left_out = [] if full else ["perf_full"]
    if quick:
        left_out.append("perf_sweep")
    return [item for item in items if any(item.get_closest_marker(m) for m in left_out)]


def keep_sweeps(items: list[Any]) -> None:
    """Drop the ``perf_sweep`` mark, so that quick mode's selection keeps those cases too.

    For a session that wants quick mode's brief measuring with the default mode's cases (an
    A/B side); it must run before the mode's selection.
    """
    for item in items:
        item.own_markers = [m for m in item.own_markers if m.name != "perf_sweep"]


def outside(items: list[Any], backends: tuple[str, ...]) -> list[Any]:
    """The items that run on a backend other than ``backends`` (none when it is empty)."""
    if not backends:
        return []
    return [item for item in items if backend_of(item) not in (None, *backends)]
