"""What the machine probe changes: the same samples judged with and without it.

Usage: python benchmarks/probe_effect.py WORK   (the ``--work DIR/MODE`` folder of
``benchmarks/verdicts.py``, after a run)

For every A/A and power run under ``WORK/reports`` it prints how far the machine probe moved
against the baseline runs (the median over the run's CPU checks, for each component), and
replays every judged result twice from the records and the saved baseline, with the run's
whole family at once (Benjamini-Hochberg, as ``perfsuite compare`` does):

* **raw**: the check's samples against the baseline runs' samples, as before the probe;
* **per machine speed**: both divided by the probe rate measured beside them, with the
  probe's guard (``perfsuite/probe.py``).

A final-family replay counts slightly differently from the sequential rule the plugin uses;
the plugin's own verdicts are what ``benchmarks/verdicts.py`` prints.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from perfsuite import probe, stats
from perfsuite.baseline import Baseline, BaselineEntry, BaselineStore


def replay(results: list[dict[str, Any]], baseline: Baseline, adjusted: bool) -> Counter[str]:
    """Verdicts of one run's judged results, the family corrected at once."""
    raw_prior = stats.fit_prior(
        [
            stats.run_variance(e.run_samples, e.higher_is_better)
            for e in baseline.entries.values()
            if len(e.runs) > 1
        ],
        [len(e.runs) - 1 for e in baseline.entries.values() if len(e.runs) > 1],
    )
    rows = []
    for r in results:
        entry: BaselineEntry | None = baseline.get(r["id"])
        if entry is None:
            continue
        hib = bool(r["higher_is_better"])
        current, runs, prior = list(r["samples"]), entry.run_samples, raw_prior
        guards = list(r.get("noise", {}).get("flags", []))
        tol = float(r["baseline"].get("tolerance") or 0.05)
        if adjusted:
            change = probe.machine_change(r["context"].get("machine"), entry.machines)
            prior = baseline.prior
            if change is not None:
                current = probe.adjust(current, change["now"], hib)
                runs = [tuple(x) for x in probe.adjust_runs(runs, change["rates"], hib)]
                flag = probe.guard(change, tol)
                guards += [flag] if flag else []
        comparison = stats.compare(current, runs, higher_is_better=hib, prior=prior)
        rows.append((comparison, tol, guards))
    significant = stats.correct([c.p_value for c, _, _ in rows], stats.ALPHA)
    return Counter(
        stats.decide(c, tolerance=tol, significant=sig, guards=g)[0]
        for (c, tol, g), sig in zip(rows, significant, strict=True)
    )


def main() -> None:
    """Print the probe's moves and the two replays for each run."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("work", type=Path)
    args = parser.parse_args()
    (profile_dir,) = (args.work / "baselines").iterdir()
    baseline = BaselineStore(args.work / "baselines").load(profile_dir.name)
    totals: dict[str, dict[str, Counter[str]]] = {}
    print("| run | memory probe | compute probe | guard | raw: regressed / noisy | "
          "per machine speed: regressed / noisy |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for folder in sorted((args.work / "reports").iterdir()):
        kind = folder.name.split("-")[0]
        if kind not in ("aa", "power"):
            continue
        paths = list(folder.glob("*/*.json"))
        if len(paths) != 1:
            continue  # a run that was stopped before it wrote its record
        path = paths[0]
        results = [
            r for r in json.loads(path.read_text())["results"] if r["baseline"]["verdict"] != "new"
        ]
        moves: dict[str, list[float]] = {"memory": [], "compute": []}
        guarded = 0
        for r in results:
            change = r["context"].get("machine_change")
            if change:
                moves[change["component"]].append(change["ratio"])
            guarded += "the machine itself" in r["baseline"].get("reason", "")
        raw, adj = replay(results, baseline, False), replay(results, baseline, True)
        for label, counts in (("raw", raw), ("adjusted", adj)):
            totals.setdefault(kind, {}).setdefault(label, Counter()).update(counts)
        med = {k: f"{statistics.median(v):.3f}" if v else "-" for k, v in moves.items()}
        n = len(results)
        print(
            f"| {folder.name} | {med['memory']} | {med['compute']} | {guarded} of {n} | "
            f"{raw['regressed']} / {raw['noisy']} | {adj['regressed']} / {adj['noisy']} |"
        )
    for kind, by in totals.items():
        for label, counts in by.items():
            total = sum(counts.values())
            print(
                f"{kind} {label}: regressed {counts['regressed']}/{total} "
                f"({counts['regressed'] / total:.1%}), noisy {counts['noisy'] / total:.1%}"
            )


if __name__ == "__main__":
    main()
