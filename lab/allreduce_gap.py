"""Small- and large-message allreduce: perfsuite's worker against an OSU-style C loop.

In one run, round by round (interleaved, so the VM's state is shared): the C reference
(``tests/fixtures/allreduce_reference.c``, ``mpicc -O2``), then perfsuite's rank worker from
an earlier checkout (``--before``) and from this one, for MPI (mpi4py), torch (gloo) and
TensorFlow (MWMS RING), at 8 B and 16 MiB, two ranks under ``mpiexec``.  Prints the median
per cell (latency at 8 B, busbw at 16 MiB), the ratio to the C loop, and, for this checkout's
MPI, mpi4py's own calls timed beside the C loop.

    python lab/allreduce_gap.py --before /path/to/older/checkout --rounds 3 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from perfsuite.collectives.launch import free_loopback_ports

ROOT = Path(__file__).resolve().parents[1]
SIZES = (8, 16 << 20)
BACKENDS = ("mpi", "torch", "tensorflow")


def mpiexec() -> str:
    return shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or "mpiexec"


def lines(
    command: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> list[dict[str, Any]]:
    """Rank 0's JSON lines; ``cwd``: the checkout whose perfsuite ``python -m`` imports."""
    done = subprocess.run(
        [mpiexec(), "-n", "2", *command], capture_output=True, text=True, timeout=600,
        env={**os.environ, **(env or {})}, cwd=cwd, check=True,
    )  # fmt: skip
    return [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]


def c_loop(program: Path, size: int, samples: int) -> list[float]:
    iterations = "20000" if size < 4096 else "4"
    return [x["seconds"] for x in lines([str(program), str(size), iterations, str(samples)])]


def worker(tree: Path, backend: str, samples: int) -> dict[int, dict[str, list[float]]]:
    master, *ports = free_loopback_ports(3)
    env = {
        "PYTHONPATH": str(tree), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(master),
        "PERFSUITE_COLLECTIVE_PORTS": ",".join(map(str, ports)), "GLOO_SOCKET_IFNAME": "lo",
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }  # fmt: skip
    out: dict[int, dict[str, list[float]]] = {}
    sizes = ",".join(map(str, SIZES))
    command = [sys.executable, "-m", "perfsuite.collectives.worker", "--backend", backend,
               "--sizes", sizes, "--samples", str(samples)]  # fmt: skip
    for line in lines(command, env, cwd=tree):
        if "seconds" in line and "size" in line:
            cell = out.setdefault(int(line["size"]), {"seconds": [], "binding_seconds": []})
            cell["seconds"].append(line["seconds"])
            if "binding_seconds" in line:
                cell["binding_seconds"].append(line["binding_seconds"])
    return out


def figure(size: int, seconds: float) -> str:
    if size < (1 << 20):
        return f"{seconds * 1e6:.3g} µs"
    return f"{size / seconds / 1e9:.3g} GB/s"  # busbw with 2 ranks: 2(n-1)/n = 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="an earlier checkout")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--json", type=Path, help="write every raw sample here")
    args = parser.parse_args()
    mpicc = shutil.which("mpicc", path=str(Path(sys.executable).parent)) or "mpicc"
    program = Path(tempfile.mkdtemp()) / "allreduce_reference"
    source = ROOT / "tests" / "fixtures" / "allreduce_reference.c"
    subprocess.run([mpicc, "-O2", "-o", str(program), str(source)], check=True)
    raw: dict[str, dict[int, dict[str, list[float]]]] = {}
    trees = {"before": args.before.resolve(), "after": ROOT}
    for r in range(args.rounds):
        for size in SIZES:
            cell = raw.setdefault("C loop", {}).setdefault(size, {"seconds": []})
            cell["seconds"] += c_loop(program, size, args.samples)
        for backend in args.backends.split(","):
            for when, tree in trees.items():
                got = worker(tree, backend, args.samples)
                for size, cell in got.items():
                    into = raw.setdefault(f"{backend} {when}", {}).setdefault(
                        size, {"seconds": [], "binding_seconds": []}
                    )
                    into["seconds"] += cell["seconds"]
                    into["binding_seconds"] += cell["binding_seconds"]
        print(f"round {r + 1} of {args.rounds} done", file=sys.stderr, flush=True)
    c = {size: statistics.median(raw["C loop"][size]["seconds"]) for size in SIZES}
    print("| what | 8 B | time / C loop | 16 MiB busbw | time / C loop |")
    print("|---|---|---|---|---|")
    for name, cells in raw.items():
        row = [name]
        for size in SIZES:
            median = statistics.median(cells[size]["seconds"])
            ratio = median / c[size]
            row += [figure(size, median), f"{ratio:.2f}"]
        print("| " + " | ".join(row) + " |")
        binding = [cells[s].get("binding_seconds") for s in SIZES]
        if all(binding):
            row = [f"{name}: mpi4py's calls beside it"]
            for size, values in zip(SIZES, binding, strict=True):
                median = statistics.median(values or [1.0])
                row += [figure(size, median), f"{median / c[size]:.2f}"]
            print("| " + " | ".join(row) + " |")
    if args.json:
        args.json.write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()
