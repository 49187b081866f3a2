"""Warm sides: each side's interpreter loaded once, and every round a fresh fork of it.

A side that starts as a fresh ``python -m pytest`` every round pays, every round, for its
interpreter, pytest and its plugins, and the frameworks it imports (TensorFlow alone takes
8-11 s on a 2-core VM, and both sides pay at once).

Here each side instead starts one server for the whole A/B (``python -m
perfsuite.ab.forks FD``), with that side's interpreter and variables: it imports pytest and
its plugins, then forks a child per round that runs ``pytest.main`` with that round's
arguments.  Between rounds, once both sides have ended, the driver asks each server to
import the frameworks (:data:`FRAMEWORKS`) its last child imported, in the variables that
child ended with (a framework reads some at import: ``OMP_NUM_THREADS``,
``TF_CPP_MIN_LOG_LEVEL``), so from the second round on a side starts with them loaded.

Each round's side is still a process of its own: its arrays, its framework's thread pools
and state, its allocator arena and its memory pages are its own, and it reseeds numpy's and
Python's global generators.  What a side's children share, round after round, is what the
server did before forking: the imports (the server runs no framework operation, so a child
initialises its own threads and devices) and Python's string-hash seed, fixed per
interpreter.  The server freezes its objects before each fork, so a child's collections do
not copy the imported modules' pages in the middle of a check.  Between rounds the server
also keeps resident as much memory as its last child freed of its STREAM set, and frees it
when the next child is about to build one (:mod:`perfsuite.measure.pages`): on a VM that
hands freed memory back to its host, a new process's set otherwise waits seconds for its
pages.

If either side's server cannot start or ends, both sides run fresh processes from the next
round on (:class:`WarmSides`): a round never pairs a fork with a fresh process.

The protocol runs over one Unix socket pair, a JSON line each way:

* the server says ``{"ready": true, "seconds": S}`` once it has loaded;
* ``{"args": [...], "env": {...}, "fd_env": {...}, "cwd": ..., "log": ...}`` asks for a
  child, with the descriptors it needs (the turns' pipes) as ancillary data; ``fd_env`` names
  the variables that carry them (``{"PERFSUITE_AB_TURNS": [0, 1]}``: the first two); the
  server answers ``{"pid": N}`` at once, then ``{"exit": N, "code": C}`` when the child ends
  (``C`` negative: killed by signal ``-C``, as :class:`subprocess.Popen` says it);
* ``{"load": true}`` asks it to import what its last child imported; it answers
  ``{"loaded": [...], "seconds": S}``.

A child runs in a session of its own, as a fresh side does, so ending its group ends what it
started.  The driver sees it as a :class:`Forked`, which answers ``pid``, ``poll`` and
``wait`` as a :class:`subprocess.Popen` does.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil

from perfsuite.measure import pages, processes

# The frameworks a server imports once a round's side has imported them.  None of them starts
# a device or a thread pool at import, so a child still initialises its own.  torch's FLOP
# counter imports torch._dynamo when it is first used (2 s on a 2-core VM, in a GEMM's build).
FRAMEWORKS = ("numpy", "torch", "torch._dynamo", "tensorflow")
# How long both servers may take to load before the A/B runs fresh sides instead.
READY_TIMEOUT_S = 300.0
# How long a server may take to import its frameworks between rounds.
LOAD_TIMEOUT_S = 300.0
# How long a server may take to answer a request for a child.
FORK_TIMEOUT_S = 60.0
MAX_FDS = 8
# What a child reports back at most (its frameworks and variables); a pipe holds 64 KiB.
REPORT_BYTES = 60_000


class ServerGone(Exception):
    """The server ended or stopped answering: a round falls back to a fresh process."""


# ---------------------------------------------------------------------------------------
# The driver's end (``perfsuite ab``).


class Server:
    """One side's server, as ``perfsuite ab`` drives it."""

    def __init__(self, python: str, env: Mapping[str, str], log: Path) -> None:
        ours, theirs = socket.socketpair()
        self.sock = ours
        self.log = log
        self.buffer = b""
        self.ready: dict[str, Any] = {}
        self.loaded: list[str] = []  # the frameworks it imported between rounds
        self.children: dict[int, Forked] = {}  # those running
        self.last: Forked | None = None  # the child it forked last
        self.exits: dict[int, int] = {}  # exits read before their child was asked for
        self.answers: list[dict[str, Any]] = []  # the "loaded" answers not yet taken
        self.gone = ""  # why it can no longer fork ("" while it can)
        self.proc: subprocess.Popen[bytes] | None = None
        try:
            with log.open("wb") as out:
                self.proc = processes.spawn(
                    [python, "-m", "perfsuite.ab.forks", str(theirs.fileno())],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, **env},
                    pass_fds=(theirs.fileno(),),
                )
        except OSError as exc:
            self.gone = f"could not start: {exc}"
        finally:
            theirs.close()

    def wait_ready(self, deadline: float) -> bool:
        """Wait until the server has loaded; False (and it is ended) if it could not."""
        self._await(
            lambda: bool(self.ready), deadline, f"was not ready within {READY_TIMEOUT_S:.0f} s"
        )
        return bool(self.ready) and not self.gone

    def fork(
        self,
        args: Sequence[str],
        env: Mapping[str, str],
        log: str,
        fds: Sequence[int] = (),
        fd_env: Mapping[str, Sequence[int]] | None = None,
    ) -> Forked:
        """A child running ``pytest.main(args)`` with ``env``, its output to ``log``."""
        request = {
            "args": list(args),
            "env": dict(env),
            "fd_env": {k: list(v) for k, v in (fd_env or {}).items()},
            "cwd": os.getcwd(),
            "log": log,
        }
        self._send(request, fds)
        deadline = time.monotonic() + FORK_TIMEOUT_S
        while not self.gone and time.monotonic() < deadline:
            for message in self._pump(1.0):
                if "pid" in message and self.last is not None:
                    return self.last
        # Whatever it did with the request (a child may have started), it is ended with it.
        self.stop(self.gone or f"did not fork within {FORK_TIMEOUT_S:.0f} s")
        raise ServerGone(self.gone)

    def ask_to_load(self) -> None:
        """Ask it to import what its last child imported (answered by :meth:`took_load`)."""
        self._send({"load": True})

    def took_load(self, deadline: float) -> bool:
        """Wait for the answer to :meth:`ask_to_load`; False (and it is ended) if none came."""
        late = f"did not import its frameworks within {LOAD_TIMEOUT_S:.0f} s"
        self._await(lambda: bool(self.answers), deadline, late)
        if not self.answers:
            return False
        answer = self.answers.pop(0)
        self.loaded += [str(name) for name in answer.get("loaded", ())]
        return True

    def _await(self, done: Callable[[], bool], deadline: float, late: str) -> None:
        """Read what the server says until ``done()``, it ends, or ``deadline`` (then end it)."""
        while not done() and not self.gone:
            left = deadline - time.monotonic()
            if left <= 0:
                self.stop(late)
                return
            self._pump(min(left, 1.0))

    def _send(self, message: Mapping[str, Any], fds: Sequence[int] = ()) -> None:
        if self.gone:
            raise ServerGone(self.gone)
        try:
            socket.send_fds(self.sock, [json.dumps(message).encode() + b"\n"], list(fds))
        except OSError as exc:
            self.stop(f"could not be reached: {exc}")
            raise ServerGone(self.gone) from None

    def _pump(self, timeout: float) -> list[dict[str, Any]]:
        """Read what the server said within ``timeout`` s; note each child's start and exit."""
        if self.gone:
            return []
        ready, _, _ = select.select([self.sock], [], [], max(timeout, 0.0))
        if not ready:
            return []
        try:
            chunk = self.sock.recv(65536)
        except OSError:
            chunk = b""
        if not chunk:
            self._lost()
            return []
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        messages = []
        for line in lines:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if not isinstance(message, dict):
                continue
            self._note(message)
            messages.append(message)
        return messages

    def _note(self, message: Mapping[str, Any]) -> None:
        if "ready" in message:
            self.ready = dict(message)
        if "pid" in message:
            pid = int(message["pid"])
            self.last = Forked(self, pid)
            if pid in self.exits:  # its exit came in the same read as its start
                self.last.returncode = self.exits.pop(pid)
            else:
                self.children[pid] = self.last
        if "exit" in message:
            pid, code = int(message["exit"]), int(message.get("code", 1))
            child = self.children.pop(pid, None)
            if child is None:
                self.exits[pid] = code
            else:
                child.returncode = code
        if "loaded" in message:
            self.answers.append(dict(message))

    def _lost(self) -> None:
        """The server's socket closed: it died.  Its children live on in their sessions."""
        code = self.proc.poll() if self.proc else None
        try:
            said = self.log.read_text(errors="replace").strip().splitlines()[-1:]
        except OSError:
            said = []
        self.gone = f"ended ({(said or [f'exit {code}'])[0][:200]})"
        for child in self.children.values():
            child.orphaned = True

    def stop(self, why: str = "stopped") -> None:
        """End the server and every child it forked."""
        if not self.gone:
            self.gone = why
        for child in self.children.values():
            child.orphaned = True
        if self.proc is not None:
            processes.end(self.proc)
        with contextlib.suppress(OSError):
            self.sock.close()


class Forked:
    """A server's child, answering as much of :class:`subprocess.Popen` as a side needs."""

    def __init__(self, server: Server, pid: int) -> None:
        self.server = server
        self.pid = pid
        self.returncode: int | None = None
        self.orphaned = False  # its server ended: its exit is known only as its absence
        self.args = [f"fork of {server.proc.pid if server.proc else '?'}"]

    def poll(self) -> int | None:
        """Its exit status, or None while it runs."""
        if self.returncode is None:
            if not self.orphaned:
                self.server._pump(0.0)
                self.orphaned = bool(self.server.gone) and self.returncode is None
            if self.orphaned and not psutil.pid_exists(self.pid):
                self.returncode = -int(signal.SIGKILL)  # unknown: counted as killed
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for it to end, as :meth:`subprocess.Popen.wait` does."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            if self.orphaned:
                time.sleep(0.05)
            else:
                self.server._pump(0.5 if left is None else min(left, 0.5))
        return code


class WarmSides:
    """Both sides' servers, used together or not at all.

    A fork and a fresh process differ in more than the stack (their imports, their pages),
    so a round pairs two forks or two fresh processes, never one of each: once either
    server fails, both are ended and every later round starts fresh processes.
    """

    def __init__(
        self,
        commands: Mapping[str, tuple[str, Mapping[str, str]]],
        workdir: Path,
        note: Callable[[str], None] = lambda line: None,
    ) -> None:
        """Start a server per side at once and wait for both (their output: ``server-SIDE.log``).

        ``note`` gets a line when the sides stop being forked, and why.
        """
        self.servers = {
            side: Server(python, env, workdir / f"server-{side}.log")
            for side, (python, env) in commands.items()
        }
        self.note = note
        deadline = time.monotonic() + READY_TIMEOUT_S
        for side, server in self.servers.items():
            if not server.wait_ready(deadline):
                self._give_up(f"side {side}'s warm interpreter {server.gone}", 1)
                break

    @property
    def active(self) -> bool:
        """Whether the sides are forked (every server still serves)."""
        return bool(self.servers)

    def server(self, side: str) -> Server | None:
        """The server to fork ``side`` from, or None: start a fresh process."""
        if any(s.gone for s in self.servers.values()):
            gone = next(side for side, s in self.servers.items() if s.gone)
            self._give_up(f"side {gone}'s warm interpreter {self.servers[gone].gone}", 0)
        return self.servers.get(side)

    def between_rounds(self, rnd: int) -> None:
        """After round ``rnd``: each server imports what its child imported, both at once."""
        if not self.active:
            return
        try:
            for server in self.servers.values():
                server.ask_to_load()
        except ServerGone:
            pass
        deadline = time.monotonic() + LOAD_TIMEOUT_S
        for side, server in self.servers.items():
            if not server.took_load(deadline):
                self._give_up(f"side {side}'s warm interpreter {server.gone}", rnd + 1)
                return

    def _give_up(self, why: str, rnd: int) -> None:
        if not self.servers:
            return
        when = f"from round {rnd} on" if rnd > 1 else "from the first round"
        self.stop()
        self.note(f"both sides ran fresh processes {when}: {why}")

    def stop(self) -> None:
        """End both servers (and what they forked)."""
        for server in self.servers.values():
            server.stop()
        self.servers = {}


# ---------------------------------------------------------------------------------------
# The server's end (``python -m perfsuite.ab.forks FD``).


def _load() -> None:
    """Import pytest, its plugins and perfsuite's, as a side's pytest would at its start."""
    import importlib.metadata

    import pytest  # noqa: F401

    import perfsuite.ab.side
    import perfsuite.plugin  # noqa: F401

    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return
    for entry in importlib.metadata.entry_points(group="pytest11"):
        with contextlib.suppress(BaseException):
            entry.load()


def _import(names: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """Import each of ``names`` not yet imported, in ``env``; the ones that loaded.

    A framework that fails to import leaves none of its modules behind.
    """
    import importlib

    if env:
        os.environ.clear()
        os.environ.update(env)
    loaded = []
    for name in names:
        if name not in FRAMEWORKS or name in sys.modules:
            continue
        before = set(sys.modules)
        try:
            importlib.import_module(name)
            loaded.append(name)
        except BaseException:
            for module in set(sys.modules) - before:
                sys.modules.pop(module, None)
    return loaded


def _send(sock: socket.socket, message: Mapping[str, Any]) -> None:
    sock.sendall(json.dumps(message).encode() + b"\n")


def _requests(sock: socket.socket) -> Iterator[tuple[dict[str, Any], list[int]]]:
    """Each request and the descriptors that came with it, until the driver closes."""
    buffer = b""
    fds: list[int] = []
    while True:
        data, got, _, _ = socket.recv_fds(sock, 1 << 20, MAX_FDS)
        if not data:
            return
        fds += got
        buffer += data
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            yield json.loads(line), fds
            fds = []


def _child(
    request: Mapping[str, Any],
    fds: Sequence[int],
    sock: socket.socket,
    report: int,
    pages_link: tuple[int, int],
) -> None:
    """The forked side: run pytest as ``python -m pytest`` would, then exit.

    Before it exits it writes to ``report`` the frameworks it imported and its variables.
    ``pages_link``: the pipes on which it asks the server for warm pages (:mod:`perfsuite.
    measure.pages`).
    """
    code = 1
    try:
        os.setsid()
        sock.close()
        pages.connect(*pages_link)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        env = {str(k): str(v) for k, v in request["env"].items()}
        for name, which in request.get("fd_env", {}).items():
            env[name] = ",".join(str(fds[i]) for i in which)
        os.environ.clear()
        os.environ.update(env)
        os.chdir(request["cwd"])
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        _reseed()
        import pytest

        # The plugins this interpreter loaded before pytest started cannot have their asserts
        # rewritten, and pytest warns of each; a fresh process would have rewritten them.  Last,
        # so that a user's own -W error does not turn the warning into a failure.
        args = [*request["args"], "-W", "ignore::pytest.PytestAssertRewriteWarning"]
        sys.argv = [str(Path(pytest.__file__).with_name("__main__.py")), *args]
        code = int(pytest.main(args))
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
    except BaseException:
        with contextlib.suppress(BaseException):
            traceback.print_exc()
    finally:
        _flush()
        with contextlib.suppress(BaseException):
            _report(report)
        os._exit(code)


def _reseed() -> None:
    """Fresh global generators, as a new process draws (the server's were fixed at its start)."""
    import random

    random.seed()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


def _flush() -> None:
    """Python's streams and C's, as a process that exits normally flushes them."""
    with contextlib.suppress(BaseException):
        sys.stdout.flush()
        sys.stderr.flush()
    with contextlib.suppress(BaseException):
        import ctypes

        ctypes.CDLL(None).fflush(None)


def _report(fd: int) -> None:
    """Write the frameworks this child imported and its variables, never blocking."""
    imported = [m for m in FRAMEWORKS if m in sys.modules]
    data = json.dumps({"imported": imported, "env": dict(os.environ)}).encode()
    if len(data) > REPORT_BYTES:
        data = json.dumps({"imported": imported, "env": {}}).encode()
    os.set_blocking(fd, False)
    os.write(fd, data)


def _child_said(reader: int) -> dict[str, Any]:
    """What a child reported, read without waiting (a grandchild may hold the pipe open)."""
    os.set_blocking(reader, False)
    try:
        said = json.loads(os.read(reader, REPORT_BYTES + 1) or b"{}")
    except (OSError, ValueError):
        said = {}
    finally:
        os.close(reader)
    return said if isinstance(said, dict) else {}


def serve(fd: int) -> None:
    """Load, say so, then fork a child per request and import between rounds when asked."""
    import gc

    sock = socket.socket(fileno=fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver ends it; its own signal stops it
    started = time.monotonic()
    _load()
    _send(sock, {"ready": True, "seconds": round(time.monotonic() - started, 3)})
    last: dict[str, Any] = {}
    keeper = pages.Keeper(lambda line: print(line, flush=True))
    for request, fds in _requests(sock):
        if "load" in request:  # between rounds: both sides have ended
            keeper.round_ended()
            begun = time.monotonic()
            names = [str(n) for n in last.get("imported", ()) if isinstance(n, str)]
            env = last.get("env") if isinstance(last.get("env"), dict) else {}
            loaded = _import(names, {str(k): str(v) for k, v in (env or {}).items()})
            _send(sock, {"loaded": loaded, "seconds": round(time.monotonic() - begun, 3)})
            continue
        _flush()
        gc.collect()
        gc.freeze()  # a child's collections then leave the loaded modules' pages shared
        reader, writer = os.pipe()
        asks, asked = os.pipe()  # the child asks for pages on one, reads the answers on the other
        answers, answered = os.pipe()
        pid = os.fork()
        if pid == 0:
            for end in (reader, asks, answered):
                os.close(end)
            _child(request, fds, sock, writer, (asked, answers))
        for end in (writer, asked, answers, *fds):
            os.close(end)
        _send(sock, {"pid": pid})
        status = _wait_answering(pid, asks, answered, keeper)
        for end in (asks, answered):
            os.close(end)
        last = _child_said(reader)
        _send(sock, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def _wait_answering(pid: int, asks: int, answers: int, keeper: pages.Keeper) -> int:
    """Wait for the child ``pid`` to end, answering its requests for pages meanwhile.

    Returns its wait status.  A grandchild may hold the pipe open after the child ends, so the
    child's end is polled for, not read from the pipe.
    """
    buffer = b""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if not select.select([asks], [], [], 0.1)[0]:
            continue
        data = os.read(asks, 4096)
        if not data:  # every writer is gone: nothing more to answer
            return os.waitpid(pid, 0)[1]
        buffer += data
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            answer = keeper.answer(line.decode(errors="replace"))
            with contextlib.suppress(OSError):
                os.write(answers, answer.encode() + b"\n")


if __name__ == "__main__":
    serve(int(sys.argv[1]))
