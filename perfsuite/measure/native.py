"""Small C helpers compiled on first use and loaded through ctypes.

A library is built once per user and source (``cc`` from ``$CC``, ``cc`` or ``gcc``), into
the temporary directory, under a name that carries a hash of its source and flags, and is
moved into place only once complete, so concurrent sessions (xdist workers) never load a
half-written file.  Without a compiler, or when the build or the load fails, the caller is
told why, and falls back or reports no reference.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path


@functools.cache
def build(
    name: str, source: str, flags: tuple[str, ...], compiler: str | None = None
) -> tuple[ctypes.CDLL | None, str]:
    """The compiled library and how it was built, or None and why not.

    ``compiler`` names another compiler (an MPI wrapper, say); by default ``$CC``, ``cc``
    or ``gcc``.
    """
    compiler = compiler or os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None or shutil.which(compiler) is None:
        return None, f"no C compiler ({compiler or 'cc'} not found)"
    try:
        folder = Path(tempfile.gettempdir()) / f"perfsuite-ref-{os.getuid()}"
        folder.mkdir(exist_ok=True)
        digest = hashlib.sha256((source + " ".join(flags) + compiler).encode()).hexdigest()[:12]
        library = folder / f"{name}-{digest}.so"
        if not library.exists():
            source_path = folder / f"{name}-{digest}.c"
            source_path.write_text(source)
            partial = folder / f".{name}-{digest}-{os.getpid()}.so"
            try:
                proc = subprocess.run(
                    [compiler, *flags, "-o", str(partial), str(source_path)],
                    capture_output=True,
                    text=True,
                    errors="replace",
                    timeout=120,
                    check=False,
                )
                if proc.returncode != 0:
                    return None, f"{compiler} could not build {name}: {proc.stderr[-300:]}"
                os.replace(partial, library)
            finally:
                partial.unlink(missing_ok=True)  # what a failed or timed-out build left
        try:
            loaded = ctypes.CDLL(str(library))
        except OSError:
            library.unlink(missing_ok=True)  # a broken library is rebuilt next time
            raise
    except (OSError, subprocess.SubprocessError) as exc:
        # An unwritable temporary directory, a compiler that hangs, a library that will not
        # load: the caller falls back or reports no reference, never fails.
        return None, f"could not build {name}: {type(exc).__name__}: {exc}"
    return loaded, f"{Path(compiler).name} {' '.join(flags[:3])}"
