"""How short can a run of this selection be under the current design?  A bound, from a record.

    python lab/quick_floor.py RECORD.json

A run record keeps each check's phases (seconds: build, probe, noise, warm-up, samples,
reference and overhead) and the session's wall time.  This script rebuilds the run's time
under four designs, each from the record's own figures:

1. *measured*: the phases as they ran, plus the time outside the checks' measuring;
2. *no settling*: each in-process check warms up for exactly the mode's minimum
   (``warmup_seconds``) and each sample lasts exactly its target (``sample_seconds``), with
   the build, probe, noise guard and the loop's overhead as measured (what is left when the
   warm-up settles at once and no sample overruns);
3. *one launch per sweep*: as 2, and the checks measured by launched ranks (allreduce sizes,
   tensor fusion, scaling) share one launch per (check, backend, device, ranks): the group
   pays its costliest launch's start-up once, then each member's samples;
4. *one probe per check*: as 3, with the machine probe taken once between two checks
   instead of before and after each.

The evidence (checks, samples per check, sample length) is the same in all four; what the
bound says is how much of the wall time the current design's fixed costs take.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from perfsuite.store.records import load_record


def main() -> None:
    """Print the four designs' wall times for each record."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", nargs="+", type=Path)
    args = parser.parse_args()
    for path in args.records:
        record = load_record(path)
        policy = record.settings.get("policy", {})
        warmup_min = float(policy.get("warmup_seconds", 0.0))
        sample_s = float(policy.get("sample_seconds", 0.0))
        inside = 0.0
        no_settle = 0.0
        probe = 0.0
        groups: dict[tuple[str, ...], list[tuple[float, float]]] = defaultdict(list)
        for r in record.results:
            ph = {k: float(v) for k, v in r.phases.items()}
            spent = sum(ph.values())
            inside += spent
            probe += ph.get("probe", 0.0)
            fixed = ph.get("build", 0.0) + ph.get("probe", 0.0) + ph.get("noise", 0.0)
            fixed += ph.get("judge", 0.0)
            if r.source.get("kind") == "ranks" or r.check == "scaling":
                # The child does its own warm-up and samples: start-up is what is left.  A
                # sample is ``iterations`` operations of ``seconds`` each (allreduce); the
                # fusion check's and scaling's samples are single operations or steps.
                iterations = r.source.get("per_sample", {}).get("iterations") or []
                seconds = r.seconds or ()
                if len(iterations) == len(seconds):
                    own = sum(n * t for n, t in zip(iterations, seconds, strict=True))
                else:
                    own = sum(seconds) if r.check != "scaling" else 0.0
                launch = max(0.0, ph.get("reference_and_overhead", 0.0) - own)
                key = (r.check.removesuffix("_fusion"), *(str(r.params.get(k)) for k in
                       ("backend", "device", "ranks")))  # fmt: skip
                groups[key].append((launch, own))
                no_settle += spent
                continue
            samples = len(r.samples) * sample_s if r.samples else ph.get("samples", 0.0)
            overhead = ph.get("reference_and_overhead", 0.0)
            no_settle += fixed + (warmup_min if r.samples else 0.0) + samples + overhead
        launched = sum(launch + own for members in groups.values() for launch, own in members)
        shared = sum(
            max(launch for launch, _ in members) + sum(own for _, own in members)
            for members in groups.values()
        )
        outside = max(0.0, (record.duration_s or 0.0) - inside)
        measured = inside + outside
        settle = no_settle + outside
        sweep = settle - launched + shared
        once = sweep - probe / 2
        print(f"{path.name}: {len(record.results)} checks, mode {policy.get('mode')}")
        print(f"  launches: {sum(len(m) for m in groups.values())} in {len(groups)} sweeps, "
              f"{launched:.1f} s; shared, {shared:.1f} s")  # fmt: skip
        for name, value in (
            ("measured", measured),
            ("no settling, samples on target", settle),
            ("+ one launch per sweep", sweep),
            ("+ one probe per check", once),
        ):
            print(f"  {name:32s} {value:7.1f} s")


if __name__ == "__main__":
    main()
