"""JSON files with a schema version: atomic writes and strict, non-destructive reads."""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import tempfile
import time
import tomllib
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from perfsuite.errors import StorageError

# A name that is one plain path component (profiles name folders under baselines/ and
# reports/): letters, digits, '.', '_', '-', not starting with a dot.
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def is_plain_name(name: object) -> bool:
    """Whether ``name`` is a string that is one plain path component."""
    return isinstance(name, str) and PLAIN_NAME.fullmatch(name) is not None


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file (through links, hard links included)."""
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text_atomic(path: Path, text: str) -> Path:
    """Write text to a temporary file beside ``path``, fsync it, then rename it into place.

    A reader sees either the old file or the complete new one, never a partial write.
    """
    return write_chunks_atomic(path, [text.encode("utf-8")])


def write_chunks_atomic(path: Path, chunks: Iterable[bytes | memoryview]) -> Path:
    """Write ``chunks`` in order, atomically, as :func:`write_text_atomic` writes text.

    The chunks are consumed while the file is written, so a large file is never built in
    memory; an exception raised by the iterable leaves the old file in place.  A target
    that exists and is not a regular file is refused (see :func:`check_target`).
    """
    check_target(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise StorageError(f"{path.parent}: cannot write here: {exc.strerror or exc}") from None
    try:
        # mkstemp creates 0600; records and reports are meant to be shared like any file.
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb", buffering=1 << 20) as fh:
            for chunk in chunks:
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        _fsync_directory(path.parent)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise StorageError(f"{path}: cannot write: {exc.strerror or exc}") from None
        raise
    return path


def _kind(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((word for test, word in kinds if test(mode)), "not a regular file")


def check_target(path: Path) -> None:
    """Refuse an output path that names something other than a regular file.

    The rename of an atomic write replaces whatever the name held: run as root, ``-o
    /dev/null`` would put a regular file where the device was.  A link is followed, so a
    link to a device is refused too; a missing target is fine (it is created).
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StorageError(f"{path}: cannot write: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise StorageError(
            f"{path}: is {_kind(mode)}, not a regular file; perfsuite writes only regular "
            "files: name another"
        )


def _fsync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable (where the platform allows it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def clean_stale_temporaries(directory: Path, older_than_s: float = 3600.0) -> list[Path]:
    """Remove temporary files a killed writer left behind (older than a session)."""
    removed = []
    now = time.time()
    for tmp in directory.glob(".*.tmp"):
        try:
            if now - tmp.stat().st_mtime > older_than_s:
                tmp.unlink()
                removed.append(tmp)
        except OSError:
            continue
    return removed


def write_json_atomic(path: Path, data: Mapping[str, Any], *, compact: bool = False) -> Path:
    """Write JSON atomically (see :func:`write_text_atomic`); NaN is refused.

    ``compact`` drops indentation (large baselines: smaller, and faster to write).
    """
    if compact:
        text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    else:
        text = json.dumps(data, indent=1, allow_nan=False)
    return write_text_atomic(path, text + "\n")


def check_writable(directory: Path) -> None:
    """Fail early, with the reason, if files cannot be created in ``directory``."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as exc:
        raise StorageError(
            f"{directory}: directory is not writable: {exc.strerror or exc}"
        ) from None


MAX_JSON_BYTES = 1 << 30  # a file perfsuite reads whole: a baseline of many checks fits


def read_json(
    path: Path,
    what: str,
    schema_version: int | Collection[int],
    max_bytes: int = MAX_JSON_BYTES,
) -> dict[str, Any]:
    """Read a JSON object and check its schema version(s); the file is never modified.

    The text passes :func:`perfsuite.store.validate.parse_json` (depth, integer size, finite
    numbers) and the file is at most ``max_bytes`` long.
    """
    from perfsuite.store.validate import parse_json

    text = read_text_bounded(path, what, max_bytes)
    data = parse_json(text, str(path), what)
    if not isinstance(data, dict):
        raise StorageError(f"{path}: corrupt {what}: expected a JSON object (file left untouched)")
    check_schema_version(data, path, what, schema_version)
    return data


def check_schema_version(
    data: Mapping[str, Any], path: Path, what: str, schema_version: int | Collection[int]
) -> None:
    """Raise StorageError unless parsed JSON has one of the schema versions this reads."""
    accepted = {schema_version} if isinstance(schema_version, int) else set(schema_version)
    found = data.get("schema_version")
    if not isinstance(found, int) or isinstance(found, bool) or found not in accepted:
        readable = " or ".join(str(v) for v in sorted(accepted))
        raise StorageError(
            f"{path}: {what} has schema_version {found!r}, this perfsuite reads "
            f"{readable} (file left untouched)"
        )


MAX_TOML_BYTES = 16 << 20  # a profile, waivers or tolerances file is a page or two


def read_text_bounded(path: Path, what: str, max_bytes: int) -> str:
    """The UTF-8 text of a regular file of at most ``max_bytes``; StorageError otherwise.

    A FIFO, a device or a link to one is refused before it is read (its size says nothing),
    and no more than ``max_bytes`` + 1 bytes are ever read.
    """
    try:
        # Non-blocking: opening a FIFO to read would otherwise wait for a writer, forever.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise StorageError(f"{path}: {what} is not a regular file (file left untouched)")
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise StorageError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise StorageError(
            f"{path}: {what} is larger than the {max_bytes} bytes this perfsuite reads "
            "(file left untouched)"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise StorageError(
            f"{path}: corrupt {what}: not UTF-8 text (file left untouched)"
        ) from None


def read_toml(path: Path, what: str) -> dict[str, Any]:
    """Read a TOML file; syntax errors name the file, line and column."""
    try:
        return tomllib.loads(read_text_bounded(path, what, MAX_TOML_BYTES))
    except tomllib.TOMLDecodeError as exc:
        raise StorageError(f"{path}: malformed {what}: {exc}") from None
    except (ValueError, RecursionError) as exc:  # an integer past Python's digit limit, say
        raise StorageError(f"{path}: malformed {what}: {exc}") from None


def check_toml_keys(
    path: Path, data: dict[str, Any], schema_version: int, allowed: set[str], hint: str = ""
) -> None:
    """Check a TOML file's ``schema_version`` and that it has no unknown top-level keys."""
    if data.get("schema_version") != schema_version:
        raise StorageError(
            f"{path}: 'schema_version' must be {schema_version}, got {data.get('schema_version')!r}"
        )
    unknown = set(data) - allowed - {"schema_version"}
    if unknown:
        raise StorageError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}{hint}")
