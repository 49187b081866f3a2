"""A synthetic fleet at scale, in the real run-record schema, for timing ``fleet report``.

Usage: python -m lab.fleet_scale DIR [--nodes 10000] [--checks 200] [--slow 5] [--seed 1]
       then: /usr/bin/time -v perfsuite fleet report DIR --html DIR/fleet.html

Each node's record is built with perfsuite's model (``RunRecord``, ``Result``) and written
as JSON the way the plugin writes it (``RunRecord.to_dict``): a profile, an environment with
the node's host name and label, and one result per check with 5 samples, summary, work,
floor and baseline verdicts.  Node figures carry 3% log-normal noise around each check's
own level; ``--slow`` nodes read 25% slow on a tenth of the checks.  Half the checks are
throughputs, half latencies (lower is better), so both directions are timed.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from perfsuite.fleet.aggregate import write_digest
from perfsuite.model import (
    BaselineVerdict,
    Because,
    FloorBecause,
    FloorVerdict,
    Result,
    RunRecord,
    Summary,
    Why,
    Work,
)


def template(check: int) -> dict[str, object]:
    """One check's result, as the plugin stores it."""
    hib = check % 2 == 0
    result = Result(
        id=f"suites/test_synthetic.py::test_case[case-{check:03d}]",
        check="synthetic",
        params={"case": check},
        metric="throughput" if hib else "latency",
        unit="GB/s" if hib else "us",
        higher_is_better=hib,
        samples=(1.0,) * 5,
        seconds=(0.01,) * 5,
        summary=Summary(median=1.0, min=1.0, max=1.0, mean=1.0, n=5, cv=0.01),
        work=Work(amount=1e9, unit="B", convention="STREAM"),
        floor=FloorVerdict("no-reference", because=FloorBecause.NO_REFERENCE, note="synthetic"),
        baseline=BaselineVerdict(verdict="new", why=Why(Because.NO_BASELINE)),
        outcome="passed",
    )
    return result.to_dict()


def main() -> None:
    """Write the fleet's records under DIR/<profile>/."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--checks", type=int, default=200)
    ap.add_argument("--slow", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--no-digests", action="store_true", help="records only: time the report's cold path"
    )
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    templates = [template(c) for c in range(args.checks)]
    levels = np.exp(rng.uniform(0, 8, args.checks))
    hib = np.array([c % 2 == 0 for c in range(args.checks)])
    base = RunRecord(
        run_id="x",
        created="2026-11-28T00:00:00+00:00",
        hardware_profile={"name": "synthetic-node", "kind": "cpu", "figures": {}},
        environment={"host": {"hostname": "x"}, "gpus": {"unavailable": "synthetic"}},
        results=(),
        settings={"quick": True},
    ).to_dict()
    folder = args.dir / "synthetic-node"
    folder.mkdir(parents=True, exist_ok=True)
    slow = set(rng.choice(args.nodes, size=min(args.slow, args.nodes), replace=False).tolist())
    for n in range(args.nodes):
        noise = rng.normal(0, 0.03, args.checks)
        if n in slow:
            hit = rng.random(args.checks) < 0.1
            noise = noise + np.where(hit, math.log(0.75), 0.0)
        medians = levels * np.exp(np.where(hib, noise, -noise))
        results = []
        for t, m in zip(templates, medians.tolist(), strict=True):
            samples = [m * f for f in (0.99, 1.0, 1.0, 1.01, 1.005)]
            summary = {"median": m, "min": min(samples), "max": max(samples), "mean": m,
                       "n": 5, "cv": 0.008}  # fmt: skip
            results.append({**t, "samples": samples, "summary": summary})
        host = f"node{n:05d}"
        record = {**base, "run_id": f"20261128T000000000Z-{host}", "results": results}
        record["environment"] = {**base["environment"], "host": {"hostname": host}}
        path = folder / f"{record['run_id']}.json"
        path.write_text(json.dumps(record))
        if not args.no_digests:
            write_digest(path)  # as each node of ``perfsuite fleet run`` does after its run
    print(f"{args.nodes} records of {args.checks} checks in {folder}; slow nodes: "
          + ", ".join(f"node{n:05d}" for n in sorted(slow)))  # fmt: skip


if __name__ == "__main__":
    main()
