"""The rules every file perfsuite reads passes before any of it is used.

A run record, a baseline, a profile, a waivers file or a tolerances file may come from
another machine, another version, a hand edit, a merge or an attacker.  Each kind has one
loader (:func:`perfsuite.store.records.load_record`,
:meth:`perfsuite.store.baseline.BaselineStore.load`, the profile registry,
:func:`perfsuite.store.rules.load_waivers`, :func:`perfsuite.store.rules.load_tolerances`).
The two JSON kinds read through here (the TOML kinds through
``perfsuite.store.files.read_toml`` and the profile module, which check each value they read):

* :func:`parse_json`: the text is JSON within sane bounds: a size, a nesting depth, integers
  of at most a few dozen digits, and numbers that are finite and of sane magnitude (no
  ``NaN``, no ``1e400``, no ``10**400``);
* :func:`check_fields`: a mapping holds the fields of a frozen dataclass of :mod:`model` with
  the types its annotations name (a ``float`` field takes a finite number, a ``str`` field
  text, a ``Mapping[str, Any]`` field an object with text keys, a ``StrEnum`` field one of
  its words, and so on).

Anything else is a :class:`~perfsuite.errors.StorageError` naming the file and the entry:
one line, never a traceback.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import math
import types
import typing
from collections.abc import Mapping
from typing import Any

from perfsuite.errors import StorageError
from perfsuite.model.measured import MachineReading
from perfsuite.model.verdicts import BaselineFacts

MAX_DEPTH = 48  # nesting of objects and arrays; perfsuite writes at most about 10
MAX_INT_DIGITS = 24  # an integer longer than this is no count or size perfsuite writes
MAX_MAGNITUDE = 1e100  # any number in a file
MAX_TEXT = 100_000  # characters in one string field that perfsuite reads as text
# A sample is a rate or a time in the check's unit: within these bounds its logarithm, and
# any ratio of two samples, stay far inside what floating point represents.
SAMPLE_MIN, SAMPLE_MAX = 1e-18, 1e18


class _Bad(ValueError):
    """A JSON value outside the bounds (raised from inside the parser's callbacks)."""


def _parse_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _Bad(f"an integer of {digits} digits")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or abs(value) > MAX_MAGNITUDE:
        raise _Bad(f"the number {text[:24]} is out of range")
    return value


def _parse_constant(name: str) -> float:
    raise _Bad(f"{name} is not a number")


def parse_json(text: str, where: str, what: str) -> Any:
    """Parse JSON text within the bounds above; StorageError naming ``where`` otherwise."""
    try:
        data = json.loads(
            text,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_parse_constant,
        )
    except _Bad as exc:
        raise StorageError(f"{where}: corrupt {what}: {exc} (file left untouched)") from None
    except RecursionError:
        raise StorageError(
            f"{where}: corrupt {what}: nested too deeply (file left untouched)"
        ) from None
    except json.JSONDecodeError as exc:
        raise StorageError(
            f"{where}: corrupt or truncated {what}: {exc.msg} at line {exc.lineno} "
            f"column {exc.colno} (file left untouched)"
        ) from None
    except ValueError as exc:  # an integer over Python's own digit limit, say
        raise StorageError(f"{where}: corrupt {what}: {exc} (file left untouched)") from None
    depth = nesting(data)
    if depth > MAX_DEPTH:
        raise StorageError(
            f"{where}: corrupt {what}: nested {depth} deep, more than {MAX_DEPTH} "
            "(file left untouched)"
        )
    return data


def nesting(data: Any) -> int:
    """How deep objects and arrays nest in ``data`` (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((child, depth) for child in children)
    return deepest


def is_number(value: Any) -> bool:
    """A finite int or float of sane magnitude (a bool is not a number here)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and abs(value) <= MAX_MAGNITUDE
    )


def is_sample(value: Any) -> bool:
    """A number a sample may be: finite, positive and within the sample bounds."""
    return is_number(value) and SAMPLE_MIN <= value <= SAMPLE_MAX


def bad_samples(values: Any) -> list[Any]:
    """The values that are no sample (all of them when ``values`` is not a list)."""
    if not isinstance(values, list | tuple):
        return [values]
    return [v for v in values if not is_sample(v)]


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_value(value: Any, hint: Any, where: str) -> None:
    """Raise StorageError unless ``value`` has the type ``hint`` names (see module doc)."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any:
        return
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return
        options = [a for a in args if a is not type(None)]
        problems = []
        for option in options:
            try:
                check_value(value, option, where)
                return
            except StorageError as exc:
                problems.append(str(exc))
        if len(problems) == 1:
            raise StorageError(problems[0])
        names = ", ".join(getattr(o, "__name__", str(o)) for o in options)
        raise StorageError(f"{where}: {_describe(value)} is none of {names}")
    if hint is str:
        if not isinstance(value, str) or len(value) > MAX_TEXT:
            raise StorageError(f"{where}: expected text, got {_describe(value)}")
        return
    if isinstance(hint, type) and issubclass(hint, enum.StrEnum):
        if not isinstance(value, str) or value not in {m.value for m in hint}:
            words = ", ".join(m.value for m in hint)
            raise StorageError(f"{where}: expected one of {words}, got {_describe(value)}")
        return
    if hint is bool:
        if not isinstance(value, bool):
            raise StorageError(f"{where}: expected true or false, got {_describe(value)}")
        return
    if hint is int:
        if not (isinstance(value, int) and not isinstance(value, bool)):
            raise StorageError(f"{where}: expected a whole number, got {_describe(value)}")
        return
    if hint is float:
        if not is_number(value):
            raise StorageError(f"{where}: expected a finite number, got {_describe(value)}")
        return
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise StorageError(f"{where}: expected a list, got {_describe(value)}")
        for i, item in enumerate(value):
            check_value(item, args[0], f"{where}[{i}]")
        return
    if origin in (Mapping, dict) or hint in (Mapping, dict):
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise StorageError(f"{where}: expected an object, got {_describe(value)}")
        if len(args) == 2 and args[1] is not Any:
            for key, item in value.items():
                check_value(item, args[1], f"{where}.{key}")
        return
    if hint is MachineReading:  # stored flat, its rates beside its source: read by its ``read``
        check_value(value, Mapping[str, Any], where)
        return
    if hint is BaselineFacts:  # each fact read by its own ``read``, a malformed one left out
        check_value(value, Mapping[str, Any], where)
        return
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        check_fields(hint, value, where)
        return
    raise TypeError(f"no rule for {hint!r}")  # a model field of a kind this module lacks


def check_fields(cls: type, data: Any, where: str, optional: frozenset[str] = frozenset()) -> None:
    """Raise StorageError unless ``data`` holds ``cls``'s fields with their annotated types.

    A field with a default may be missing (records may predate it), as may those named in
    ``optional``; fields the class does not have are ignored (records may postdate it).
    """
    if not isinstance(data, dict):
        raise StorageError(f"{where}: expected an object, got {_describe(data)}")
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name not in data:
            has_default = (
                f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
            )
            if has_default or f.name in optional:
                continue
            raise StorageError(f"{where}: missing field {f.name!r}")
        check_value(data[f.name], hints[f.name], f"{where}.{f.name}")


def is_timestamp(value: Any) -> bool:
    """An ISO 8601 date and time, as perfsuite writes them (``2026-11-20T01:00:00+00:00``)."""
    if not isinstance(value, str) or not 10 <= len(value) <= 40:
        return False
    try:
        dt.datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


def check_timestamp(value: Any, where: str) -> None:
    """Raise StorageError unless ``value`` is an ISO 8601 time (see :func:`is_timestamp`)."""
    if not is_timestamp(value):
        raise StorageError(
            f"{where}: expected an ISO 8601 time such as 2026-11-20T01:00:00+00:00, "
            f"got {_describe(value)}"
        )


def check_printable(value: str, where: str) -> None:
    """Raise StorageError if ``value`` holds a control or format character.

    An id, a unit or a run id is printed to the terminal as it is: an escape sequence in one
    would drive the terminal (recolour, move the cursor, hide lines) and a line break would
    forge output.  perfsuite never writes one, so a file that holds one is refused.
    """
    if not value.isprintable():
        bad = next(ch for ch in value if not ch.isprintable())
        raise StorageError(
            f"{where}: holds the control character {bad!r} in {_describe(value)}; an id, "
            "unit or name must be printable text"
        )
