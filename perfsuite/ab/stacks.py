"""The two sides of an A/B: what a stack spec names, and the environments perfsuite builds.

A stack is one of:

* an interpreter or a virtual environment: ``.venv-old``, ``.venv-new/bin/python``;
* a tox environment: ``tox:tf220`` (``.tox/tf220``, built with ``tox -e tf220 --notest``
  when it is not there yet and tox is installed);
* a requirement set, ``"tensorflow-cpu==2.20.*"`` (several separated by spaces): perfsuite
  builds an environment with it and with perfsuite itself, once, in its cache
  (``$PERFSUITE_CACHE``, else ``$XDG_CACHE_HOME/perfsuite``, else ``~/.cache/perfsuite``),
  with ``uv`` where it is installed and ``venv`` + ``pip`` otherwise.  An environment that
  failed to build is never left half-made in the cache.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

import perfsuite
from perfsuite.errors import PerfsuiteError
from perfsuite.measure import processes

# Building an environment (a framework wheel of hundreds of MB) may take this long.
BUILD_TIMEOUT_S = 1800.0
# Written last into an environment perfsuite built: it is complete.
MARK = "perfsuite-env.json"


@dataclass(frozen=True)
class Stack:
    """One side's software: the interpreter that runs it, and what it was made from."""

    spec: str  # as the user gave it
    kind: str  # "python", "tox" or "requirements"
    python: str  # the interpreter, an absolute path
    requirements: tuple[str, ...] = ()
    built_s: float = 0.0  # seconds spent building its environment now (0 when cached)
    cached: bool = False  # a requirement set's environment was already built
    env: tuple[tuple[str, str], ...] = field(default_factory=tuple)  # side variables

    def to_dict(self) -> dict[str, object]:
        """JSON-ready description."""
        return {
            "spec": self.spec,
            "kind": self.kind,
            "python": self.python,
            "requirements": list(self.requirements),
            "built_s": round(self.built_s, 1),
            "cached": self.cached,
            "env": dict(self.env),
        }


def cache_dir() -> Path:
    """Where perfsuite keeps the environments it builds."""
    if os.environ.get("PERFSUITE_CACHE"):
        return Path(os.environ["PERFSUITE_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "perfsuite"


def _interpreter(path: Path) -> Path | None:
    """The python of a virtual environment or the interpreter itself, if ``path`` is one."""
    if path.is_dir():
        for candidate in (path / "bin" / "python", path / "Scripts" / "python.exe"):
            if candidate.is_file():
                return candidate
        return None
    return path if path.is_file() and os.access(path, os.X_OK) else None


def requirements_of(spec: str) -> tuple[str, ...] | None:
    """The requirements a spec names, or None when it is not a requirement set."""
    parts = spec.split()
    if not parts:
        return None
    try:
        return tuple(str(Requirement(part)) for part in parts)
    except InvalidRequirement:
        return None


def _looks_like_path(spec: str) -> bool:
    return spec.startswith((".", "/", "~")) or os.sep in spec


def source_tree() -> Path | None:
    """The source tree perfsuite runs from (an editable install), or None."""
    root = Path(perfsuite.__file__).resolve().parents[1]
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and re.search(r'^name\s*=\s*"perfsuite"', pyproject.read_text(), re.M):
        return root
    return None


def perfsuite_install_arg() -> list[str]:
    """What to install for perfsuite itself: this source tree, editable, or this release."""
    tree = source_tree()
    return ["-e", str(tree)] if tree else [f"perfsuite=={perfsuite.__version__}"]


Runner = Callable[..., subprocess.CompletedProcess[str]]


def _run(cmd: Sequence[str], timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` in its own process group: a timeout or an interrupt ends all it started."""
    return processes.run(cmd, timeout=timeout)


# What a side needs of its interpreter: it runs, and pytest and perfsuite's side plugin import.
HEALTH_CODE = "import pytest, perfsuite.ab.side"
HEALTH_TIMEOUT_S = 120.0


def health(python: str, run: Runner = _run) -> str:
    """Why ``python`` cannot run a side, in one line ("" when it can).

    The interpreter must start, and pytest and perfsuite (with its A/B side plugin) must
    import: a cached environment whose base interpreter was removed or upgraded, or whose
    packages were deleted, fails here instead of failing every round.
    """
    try:
        done = run([python, "-c", HEALTH_CODE], timeout=HEALTH_TIMEOUT_S)
    except OSError as exc:
        return f"its interpreter does not run: {exc.strerror or exc}"
    except subprocess.TimeoutExpired:
        return f"its interpreter did not answer within {HEALTH_TIMEOUT_S:.0f} s"
    if done.returncode != 0:
        return f"{HEALTH_CODE!r} failed: {_tail(done.stdout + done.stderr)}"
    return ""


def has_perfsuite(python: str, run: Runner = _run) -> bool:
    """Whether ``python`` can import pytest and a perfsuite that has the A/B side plugin."""
    return not health(python, run)


def _tail(text: str, lines: int = 1) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(kept[-lines:]) if kept else "(no output)"


def _find_uv() -> str | None:
    """``uv`` on PATH, or beside this interpreter (a venv's ``bin``, not activated)."""
    found = shutil.which("uv")
    if found:
        return found
    beside = Path(sysconfig.get_path("scripts")) / ("uv.exe" if os.name == "nt" else "uv")
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None


def _pip_index_args(run: Runner = _run) -> list[str]:
    """Index settings of pip (config, ``PIP_*`` variables), for uv, which reads neither.

    pip takes a release from whichever of its indexes offers the best match, and the releases
    bisect lists are pip's (``pip index versions``); uv by default stops at the first index
    that has the package at all.  So with more than one index uv is told to match pip, unless
    ``UV_INDEX_STRATEGY`` says otherwise.
    """
    args: list[str] = []
    config: dict[str, str] = {}
    try:
        done = run([sys.executable, "-m", "pip", "config", "list"], timeout=60)
        for line in done.stdout.splitlines():
            key, _, value = line.partition("=")
            config[key.split(".", 1)[-1]] = value.strip().strip("'\"")
    except (OSError, subprocess.TimeoutExpired):
        pass
    for name, flag in (
        ("index-url", "--index-url"),
        ("extra-index-url", "--extra-index-url"),
        ("find-links", "--find-links"),
        ("constraint", "--constraint"),
    ):
        value = os.environ.get("PIP_" + name.upper().replace("-", "_")) or config.get(name, "")
        for item in value.split():
            args += [flag, item]
    if "--extra-index-url" in args and not os.environ.get("UV_INDEX_STRATEGY"):
        args += ["--index-strategy", "unsafe-best-match"]
    return args


def _check_space_error(output: str, where: Path) -> None:
    if "No space left on device" in output or "ENOSPC" in output:
        raise PerfsuiteError(
            f"no disk space to build an environment in {where}: free some, or point "
            "PERFSUITE_CACHE at a larger disk"
        )


def environment_root(requirements: Sequence[str], cache: Path | None = None) -> Path:
    """The folder of the cached environment for ``requirements`` (built or not).

    Keyed by the requirements, this interpreter's version and what perfsuite is installed
    from, so a new perfsuite or Python gets an environment of its own.
    """
    key_text = json.dumps(
        {
            "requirements": sorted(requirements),
            "python": sys.version.split()[0],
            "perfsuite": perfsuite_install_arg(),
        },
        sort_keys=True,
    )
    return (cache or cache_dir()) / "envs" / hashlib.sha256(key_text.encode()).hexdigest()[:16]


def build_environment(
    requirements: Sequence[str], cache: Path | None = None, run: Runner = _run
) -> tuple[Path, bool, float]:
    """The cached environment with ``requirements`` and perfsuite: (python, was cached, s).

    The environment is built in place (a virtual environment's scripts name its folder) and
    marked complete last; one without the mark (a build that failed or was interrupted) is
    removed and built again, never used.  A cached one is health-checked (:func:`health`)
    before use and rebuilt once if broken; one still broken after its build is removed and
    refused with its path.
    """
    cache = cache or cache_dir()
    install = perfsuite_install_arg()
    root = environment_root(requirements, cache)
    python = root / "bin" / "python"
    mark = root / MARK
    if mark.is_file() and python.is_file() and not health(str(python), run):
        return python, True, 0.0
    started = time.monotonic()
    uv = _find_uv()
    if uv:
        steps = [
            [uv, "venv", "--quiet", "--python", sys.executable, str(root)],
            [
                uv,
                "pip",
                "install",
                "--quiet",
                "--python",
                str(python),
                *_pip_index_args(run),
                *requirements,
                *install,
            ],
        ]
    else:
        steps = [
            [sys.executable, "-m", "venv", str(root)],
            [str(python), "-m", "pip", "install", "--quiet", *requirements, *install],
        ]
    try:
        shutil.rmtree(root, ignore_errors=True)
        root.parent.mkdir(parents=True, exist_ok=True)
        for step in steps:
            try:
                done = run(step, timeout=BUILD_TIMEOUT_S)
            except subprocess.TimeoutExpired as exc:
                raise PerfsuiteError(
                    f"building the environment for {' '.join(requirements)} took over "
                    f"{BUILD_TIMEOUT_S:.0f} s ({root})"
                ) from exc
            if done.returncode != 0:
                output = done.stdout + done.stderr
                _check_space_error(output, cache)
                raise PerfsuiteError(
                    f"could not build an environment with {' '.join(requirements)}: "
                    f"{_tail(output, 2)}"
                )
        why = health(str(python), run)
        if why:
            raise PerfsuiteError(
                f"the environment built for {' '.join(requirements)} at {root} is broken: {why}"
            )
        mark.write_text(
            json.dumps({"requirements": list(requirements), "perfsuite": install}) + "\n"
        )
    except OSError as exc:
        shutil.rmtree(root, ignore_errors=True)
        if exc.errno == errno.ENOSPC:
            _check_space_error("ENOSPC", cache)
        raise PerfsuiteError(f"could not build an environment in {root}: {exc}") from exc
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return python, False, time.monotonic() - started


def resolve(spec: str, cache: Path | None = None, run: Runner = _run) -> Stack:
    """The stack a spec names, its environment built if it is a requirement set.

    Raises :class:`PerfsuiteError` (one line) for a spec that names nothing, an interpreter
    without perfsuite, or an environment that cannot be built.
    """
    spec = spec.strip()
    if not spec:
        raise PerfsuiteError(
            "an empty stack spec: give an interpreter, a venv, tox:NAME or requirements"
        )
    if spec.startswith("tox:"):
        return _tox(spec, run)
    path = Path(spec).expanduser()
    if path.exists():
        python = _interpreter(path)
        if python is None:
            raise PerfsuiteError(
                f"stack {spec!r}: neither a Python interpreter nor a virtual environment"
            )
        python = python.absolute()
        why = health(str(python), run)
        if why:
            raise PerfsuiteError(
                f"stack {spec!r} has no perfsuite or pytest that a side can use ({why}); add "
                f"it with: {shlex.quote(str(python))} -m pip install "
                f"{shlex.join(perfsuite_install_arg())}"
            )
        return Stack(spec, "python", str(python))
    if _looks_like_path(spec):
        raise PerfsuiteError(f"stack {spec!r}: no such interpreter or environment")
    on_path = shutil.which(spec) if spec.startswith("python") else None
    if on_path:
        return resolve(on_path, cache, run)
    requirements = requirements_of(spec)
    if requirements is not None and all(not Requirement(r).specifier for r in requirements):
        # "venv-old" or "python3.12" mistyped would otherwise install whatever the index
        # has under that name.
        raise PerfsuiteError(
            f"stack {spec!r}: no such path, and as requirements it pins no version; for a "
            f"package give one ('{requirements[0]}==1.2' or '{requirements[0]}>=0')"
        )
    if requirements is None:
        raise PerfsuiteError(
            f"unknown stack spec {spec!r}: give an interpreter or venv path, tox:NAME, or "
            "requirements such as 'tensorflow-cpu==2.20.*'"
        )
    python, cached, seconds = build_environment(requirements, cache, run)
    # Absolute, as an interpreter's path is: the record names it, whatever folder it is read in.
    return Stack(spec, "requirements", str(Path(python).absolute()), requirements, seconds, cached)


def _tox(spec: str, run: Runner) -> Stack:
    name = spec[len("tox:") :]
    if not name or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise PerfsuiteError(f"stack {spec!r}: name a tox environment, e.g. tox:py311")
    root = Path(".tox") / name
    if _interpreter(root) is None:
        tox = shutil.which("tox")
        if tox is None:
            raise PerfsuiteError(f"stack {spec!r}: {root} does not exist and tox is not installed")
        done = run([tox, "-e", name, "--notest"], timeout=BUILD_TIMEOUT_S)
        if done.returncode != 0 or _interpreter(root) is None:
            raise PerfsuiteError(
                f"stack {spec!r}: tox -e {name} --notest failed: {_tail(done.stdout + done.stderr)}"
            )
    python = _interpreter(root)
    assert python is not None
    python = python.absolute()
    if not has_perfsuite(str(python), run):
        raise PerfsuiteError(
            f"stack {spec!r} has no perfsuite; add it to the tox environment's deps, or run "
            f"{shlex.quote(str(python))} -m pip install {shlex.join(perfsuite_install_arg())}"
        )
    return Stack(spec, "tox", str(python))
