"""How ranks are started: a launcher template, its checks, and the worker's command line.

The template is a command with ``{ranks}`` where the rank count goes: ``mpiexec -n {ranks}``
(the default), ``srun -n {ranks} --mpi=pmi2``, ``mpiexec -f hosts -n {ranks}``.  A template
without ``{ranks}`` (``srun -N 2 --ntasks-per-node 4``) decides the count itself; the worker
reports how many ranks it found.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from functools import cache, cached_property

from perfsuite.errors import PerfsuiteError

DEFAULT_TEMPLATE = "mpiexec -n {ranks}"
WORKER = "perfsuite.collectives.worker"
INSTALL_HINT = "pip install 'perfsuite[mpi]' (mpi4py with the MPICH wheel, which brings mpiexec)"
HOSTFILE_FLAGS = ("-f", "-hostfile", "--hostfile", "-machinefile", "-hosts", "--host", "-H")


class LauncherError(PerfsuiteError):
    """A launcher template that cannot be used (the message says why)."""


@dataclass(frozen=True)
class Launcher:
    """A parsed launcher template."""

    template: str
    argv: tuple[str, ...]

    @classmethod
    def parse(cls, template: str) -> Launcher:
        """Split the template as a shell would; refuse what cannot be a command."""
        text = template.strip()
        if not text:
            raise LauncherError("--perf-launcher is empty; the default is " + DEFAULT_TEMPLATE)
        try:
            argv = tuple(shlex.split(text))
        except ValueError as exc:
            raise LauncherError(f"--perf-launcher {template!r} does not parse: {exc}") from None
        bad = [a for a in argv if set("{}") & set(a.replace("{ranks}", ""))]
        if bad:
            raise LauncherError(
                f"--perf-launcher {template!r}: unknown placeholder in {bad[0]!r}; only {{ranks}}"
            )
        return cls(text, argv)

    @property
    def program(self) -> str:
        """The launcher's executable."""
        return self.argv[0]

    @property
    def sets_ranks(self) -> bool:
        """Whether the template takes the rank count from perfsuite."""
        return any("{ranks}" in a for a in self.argv)

    @property
    def is_mpiexec(self) -> bool:
        """Whether the program is an MPI's own launcher (``mpiexec`` or ``mpirun``)."""
        return os.path.basename(self.program) in ("mpiexec", "mpirun")

    @property
    def is_local_mpiexec(self) -> bool:
        """An mpiexec/mpirun on this host only (no hostfile): slots are this host's CPUs."""
        return self.is_mpiexec and not any(a.split("=")[0] in HOSTFILE_FLAGS for a in self.argv[1:])

    @cached_property
    def executable(self) -> str:
        """The program to start: a path as given; a bare name from this environment or ``PATH``.

        When the running Python is a virtual or conda environment's, a bare name that sits in
        its ``bin/`` (where the MPICH wheel installs ``mpiexec``) is started from there, even
        when another one comes first on ``PATH``: it is the launcher of the MPI the
        environment's mpi4py was built for (a system Open MPI's ``mpiexec`` starts MPICH ranks
        that cannot find each other), and ``.venv/bin/pytest`` finds it without the
        environment being activated.  A system Python's neighbours (``/usr/bin``) get no such
        preference: there ``PATH`` (``module load``, ``spack load``) says which MPI is meant,
        and its directory is only tried when the name is nowhere on ``PATH``.  The path that
        will run is returned, so records can name it; it is resolved once per launcher.
        """
        if os.sep in self.program:
            return self.program
        beside = os.path.join(os.path.dirname(sys.executable), self.program)
        if not (os.path.isfile(beside) and os.access(beside, os.X_OK)):
            beside = ""
        if beside and _in_environment():
            return beside
        return shutil.which(self.program) or beside or self.program

    def unavailable_reason(self) -> str | None:
        """A reason to skip: the default kind of launcher (mpiexec) is not installed."""
        program = self.executable
        missing = shutil.which(program) is None and not os.access(program, os.X_OK)
        if missing and self.is_mpiexec:
            return f"{self.program} not found on PATH or beside {sys.executable}; {INSTALL_HINT}"
        return None  # any other launcher that cannot start fails the check, naming it

    def check_slots(self, ranks: int, oversubscribe: bool) -> None:
        """Refuse more local ranks than CPUs, unless oversubscription was asked for."""
        if not self.is_local_mpiexec or oversubscribe:
            return
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        # Under pytest-xdist every worker may launch ranks at once: each gets its share.
        workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
        slots = (cpus or 1) // max(1, workers)
        if ranks > slots:
            shared = f" shared by {workers} xdist workers" if workers > 1 else ""
            raise LauncherError(
                f"{ranks} ranks but only {cpus} CPUs here{shared}: ranks would share cores and "
                "the latencies would measure the scheduler. Use fewer ranks (--perf-ranks), "
                "run collective checks without -n, use a hostfile or srun in --perf-launcher, "
                "or --perf-oversubscribe to run anyway"
            )

    def environment(self) -> dict[str, str]:
        """Variables the launcher needs beside the command line.

        Open MPI's launcher (``mpiexec`` or ``mpirun``, with or without a hostfile) refuses
        to start when run as root (as in most containers and GPU runners)
        unless told twice that this is meant.  The ranks it starts here run perfsuite's own
        worker, and the session is already root, so the refusal is lifted for that child
        alone, as container images for GPUs commonly do.  Open MPI releases that predate
        these variables know only ``--allow-run-as-root``, which a template can carry.  Only
        an MPI launcher is asked its ``--version``: another program (``srun``, a site's
        wrapper script) is never started for it.
        """
        if (
            self.is_mpiexec
            and hasattr(os, "geteuid")
            and os.geteuid() == 0
            and mpi_flavour(self.executable) == "openmpi"
        ):
            return {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
        return {}

    def command(
        self, ranks: int, worker_args: list[str], oversubscribe: bool = False, worker: str = WORKER
    ) -> list[str]:
        """The full command line: launcher, then this Python running the worker module."""
        program = self.executable
        argv = [program, *(a.replace("{ranks}", str(ranks)) for a in self.argv[1:])]
        if oversubscribe and self.is_local_mpiexec and mpi_flavour(program) == "openmpi":
            argv.insert(1, "--oversubscribe")
        return [*argv, sys.executable, "-m", worker, "--launcher", self.template, *worker_args]


def _in_environment() -> bool:
    """Whether the running Python is a virtual environment's or a conda environment's."""
    return sys.prefix != sys.base_prefix or os.path.isdir(os.path.join(sys.prefix, "conda-meta"))


@cache
def mpi_flavour(program: str) -> str:
    """``mpich``, ``openmpi`` or ``unknown``, from the launcher's ``--version``."""
    try:
        out = subprocess.run(
            [program, "--version"], capture_output=True, text=True, timeout=20
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if "HYDRA" in out or "MPICH" in out.upper():
        return "mpich"
    if "Open MPI" in out or "OpenRTE" in out:
        return "openmpi"
    return "unknown"


def free_loopback_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports that are free on 127.0.0.1 now (rendezvous, TF workers)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(s)
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def ranks_without_gpus(ranks: int, launcher: Launcher) -> str | None:
    """Why ``ranks`` GPU ranks cannot start here (no GPU, or too few for local ranks), or None.

    NVML, not torch: the pytest process never loads a framework for ranks it launches (and
    torch beside an already loaded TensorFlow can abort the process).
    """
    from perfsuite.hardware.detect import gpu_facts

    gpus = gpu_facts()
    if not gpus.names:
        return f"no GPU visible ({gpus.reason})"
    if len(gpus.names) < ranks and launcher.is_local_mpiexec:
        return f"{ranks} ranks need {ranks} GPUs; {len(gpus.names)} visible"
    return None
