"""What the machine probe changes: the same samples judged with and without it.

Usage: python lab/probe_effect.py WORK   (the ``--work DIR/MODE`` folder of
``lab/verdicts.py``, after a run)

For every A/A and power run under ``WORK/reports`` it prints how far the machine probe moved
against the baseline runs (the median over the run's CPU checks, for each component), and
replays every judged result from the records and the saved baseline, with the run's whole
family at once (Benjamini-Hochberg, as ``perfsuite compare`` does) and the run-to-run prior
fitted over the baseline's runs as each rule sees them, under several rules:

* **raw**: the check's samples against the baseline runs' samples, as before the probe;
* **plugin**: both divided by the probe rate measured beside them, with the probe's guard,
  by the plugin's rule (``perfsuite/measure/probe.py``: memory for byte rates, cache for the rest)
  and the rates each baseline run stored;
* **plugin+link:KINDS** (``--link KINDS``): the plugin's rule, with the kinds of checks
  named (``ranks``: what ``readings.follows_link`` picks, the collectives, and the input
  pipelines in records from the night of 2026-11-25 on; ``stream``: host memory bandwidth;
  ``pipeline``: input pipelines in any record; ``all``: every host check) compared only
  with the baseline runs measured in the CPUs' link state they were measured in
  (``speed.link_state``), from the baseline runs' own records (without the bound the
  plugin now judges a check unlike every run by, ``speed.link_bound``; ``perfsuite
  compare`` on the same records replays that);
* **B+X**: byte rates follow the probe's component B, every other check follows X, for
  every pair of components the records carry (records from an older probe may carry others,
  such as ``memory1``), with the baseline runs' readings taken from their own run records
  (``WORK/reports/baseline-*``).

A final-family replay counts slightly differently from the sequential rule the plugin uses;
the plugin's own verdicts are what ``lab/verdicts.py`` prints.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from perfsuite.judge import family, speed
from perfsuite.judge.family import SampleCheck
from perfsuite.measure import readings
from perfsuite.measure import readings as probe_readings
from perfsuite.model import upgraded
from perfsuite.model.baseline import Baseline, BaselineEntry
from perfsuite.store.baseline import BaselineStore

Readings = dict[str, dict[str, Any]]  # run id -> check id -> the probe reading beside it


def record(folder: Path) -> dict[str, Any] | None:
    """The one run record in a run's folder (None for a run stopped before it wrote one)."""
    paths = list(folder.glob("*/*.json"))
    return upgraded(json.loads(paths[0].read_text())) if len(paths) == 1 else None


def baseline_readings(work: Path) -> Readings:
    """The probe readings of the baseline runs, from their run records."""
    out: Readings = {}
    for folder in sorted((work / "reports").glob("baseline-*")):
        rec = record(folder)
        if rec is not None:
            out[rec["run_id"]] = {r["id"]: r.get("machine") for r in rec["results"]}
    return out


# Which checks a "plugin+link:..." rule compares like with like by the CPUs' link state.
LINK_KINDS: dict[str, Any] = {
    "ranks": lambda r: readings.follows_link(r["params"]),
    "stream": lambda r: r["check"] == "memory_bandwidth" and readings.follows_host(r["params"]),
    "pipeline": lambda r: r["check"] in ("input_pipeline", "input_bound", "storage_read"),
    "all": lambda r: readings.follows_host(r["params"]),
}


def link_selected(
    r: dict[str, Any], entry: BaselineEntry, rule: str, readings: Readings
) -> tuple[BaselineEntry, str | None]:
    """The baseline runs in the check's link state now, under a "+link:kinds" rule."""
    kinds = rule.partition("+link:")[2]
    if not kinds or not any(LINK_KINDS[k](r) for k in kinds.split(",")):
        return entry, None
    before = [readings.get(run.run_id, {}).get(r["id"]) for run in entry.runs]
    kept = [probe_readings.stored(b, link=True) if b else None for b in before]
    same, flag = speed.link_state(r.get("machine"), kept)
    if same is None:
        return entry, flag
    return BaselineEntry(entry.metric, entry.unit, entry.higher_is_better,
                         tuple(entry.runs[i] for i in same)), flag  # fmt: skip


def recombined(reading: Any) -> Any:
    """A reading remade from its before and after readings by the faster of the two."""
    if not isinstance(reading, dict) or "before" not in reading or "after" not in reading:
        return reading
    out = dict(reading)
    for key, value in reading["before"].items():
        if key in reading["after"]:
            out[key] = max(float(value), float(reading["after"][key]))
    return out


def judged_runs(
    r: dict[str, Any], entry: BaselineEntry, rule: str, readings: Readings
) -> tuple[list[float], list[tuple[float, ...]], speed.SpeedChange | None]:
    """The check's samples and the baseline's runs under a rule, and the probe's move."""
    hib = bool(r["higher_is_better"])
    current, runs = list(r["samples"]), entry.run_samples
    rule = rule.partition("+link:")[0]
    if rule == "raw":
        return current, runs, None
    if rule == "plugin":
        change = speed.machine_change(r.get("machine"), entry.machines)
    else:
        component = (r.get("machine") or {}).get("component")
        if component is None:  # a check that does not follow the host
            return current, runs, None
        for_bytes, for_rest = rule.split("+")
        component = for_bytes if r["unit"].endswith("B/s") else for_rest
        now = {**r["machine"], "component": component}
        before = [readings.get(run.run_id, {}).get(r["id"]) for run in entry.runs]
        if any(b is None for b in before):
            raise SystemExit(f"{r['id']}: a baseline run's record is missing under reports/")
        change = speed.machine_change(now, [{**(b or {}), "component": component} for b in before])
    if change is None:
        return current, runs, None
    adjusted = [tuple(x) for x in speed.adjust_runs(runs, change.rates, hib)]
    return speed.adjust(current, change.now, hib), adjusted, change


def replay(
    results: list[dict[str, Any]], baseline: Baseline, rule: str, readings: Readings
) -> Counter[str]:
    """Verdicts of one run's judged results under a rule, the family corrected at once."""
    judged = {}
    link_flags = {}
    for r in results:
        entry = baseline.get(r["id"])
        if entry is not None:
            entry, flag = link_selected(r, entry, rule, readings)
            link_flags[r["id"]] = [flag] if flag else []
            judged[r["id"]] = (r, entry, *judged_runs(r, entry, rule, readings))
    checks = []
    for r, entry, current, runs, change in judged.values():
        flags = list(r.get("noise", {}).get("flags", [])) + link_flags[r["id"]]
        tol = float(r["baseline"].get("tolerance") or 0.05)
        raw = speed.raw_ratio(r["samples"], entry.run_samples, bool(r["higher_is_better"]))
        flag = speed.guard(change, tol, raw)
        flags += [flag] if flag else []
        checks.append(SampleCheck(current, runs, bool(r["higher_is_better"]), tol, flags))
    return Counter(decision.verdict for _, decision, _ in family.judge_samples(checks))


def main() -> None:
    """Print the probe's moves and the replays for each run."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("work", type=Path)
    parser.add_argument(
        "--link",
        action="append",
        default=[],
        metavar="KINDS",
        help="also replay the plugin's rule with these checks compared like with like by the "
        f"CPUs' link state (comma-separated: {', '.join(LINK_KINDS)}); repeatable",
    )
    parser.add_argument(
        "--link-base",
        action="append",
        default=[],
        metavar="RULE",
        help="the rule(s) --link is added to: plugin (default) or a records-based pair such as "
        "memory+compute; repeatable",
    )
    parser.add_argument(
        "--combine",
        choices=["mean", "max"],
        default="mean",
        help="how the readings before and after a check make its reading: their geometric "
        "mean (the plugin's) or the faster of the two (a brief dip in one does not count); "
        "with max, compare the records-based rules (memory+cache is the plugin's choice)",
    )
    args = parser.parse_args()
    args.link_base = args.link_base or ["plugin"]
    for kinds in args.link:
        unknown = set(kinds.split(",")) - set(LINK_KINDS)
        if unknown:
            parser.error(f"--link: unknown kind(s) {', '.join(sorted(unknown))}")
    for folder in ("baselines", "reports"):
        if not (args.work / folder).is_dir():
            raise SystemExit(f"{args.work}: no {folder}/ (give the --work DIR/MODE folder)")
    profiles = [p for p in (args.work / "baselines").iterdir() if p.is_dir()]
    if len(profiles) != 1:
        raise SystemExit(f"expected one profile under {args.work / 'baselines'}: {profiles}")
    (profile_dir,) = profiles
    baseline = BaselineStore(args.work / "baselines").load(profile_dir.name)
    readings = baseline_readings(args.work)
    if args.combine == "max":
        readings = {
            run: {check: recombined(m) for check, m in by_check.items()}
            for run, by_check in readings.items()
        }
    components = sorted(  # the rates the records carry (numbers, not the source or parts)
        {
            k
            for run in readings.values()
            for m in run.values()
            if m
            for k, v in m.items()
            if isinstance(v, int | float)
        }
    )
    for base in args.link_base:
        parts = base.split("+")
        if base != "plugin" and (len(parts) != 2 or not set(parts) <= set(components)):
            parser.error(
                f"--link-base {base!r}: give plugin or two of the records' rates joined by + "
                f"({', '.join(components)})"
            )
    rules = [
        "raw",
        "plugin",
        *(f"{b}+{o}" for b in components if "memory" in b for o in components if o != "link"),
        *(f"{base}+link:{kinds}" for base in args.link_base for kinds in args.link),
    ]
    totals: dict[str, dict[str, Counter[str]]] = {}
    print(
        "| run | "
        + " | ".join(f"{c} probe" for c in components)
        + " | guard | "
        + " | ".join(f"{rule}: regressed / noisy" for rule in rules)
        + " |"
    )
    print("|---" * (len(components) + len(rules) + 2) + "|")
    for folder in sorted((args.work / "reports").iterdir()):
        kind = folder.name.split("-")[0]
        rec = record(folder) if kind in ("aa", "power") else None
        if rec is None:
            continue
        results = [r for r in rec["results"] if r["baseline"]["verdict"] != "new"]
        if args.combine == "max":
            for r in results:
                r["machine"] = recombined(r.get("machine"))
        moves: dict[str, list[float]] = {c: [] for c in components}
        for r in results:
            entry = baseline.get(r["id"])
            for c in components:
                if entry is None or (r.get("machine") or {}).get("component") is None:
                    continue
                _, _, change = judged_runs(r, entry, f"{c}+{c}", readings)
                if change is not None and change.component == c:
                    moves[c].append(change.ratio)
        guarded = sum("the machine itself" in r["baseline"].get("reason", "") for r in results)
        cells = []
        for rule in rules:
            counts = replay(results, baseline, rule, readings)
            totals.setdefault(kind, {}).setdefault(rule, Counter()).update(counts)
            cells.append(f"{counts['regressed']} / {counts['noisy']}")
        med = [f"{statistics.median(v):.3f}" if v else "-" for v in moves.values()]
        n = len(results)
        print(f"| {folder.name} | {' | '.join(med)} | {guarded} of {n} | {' | '.join(cells)} |")
    for kind, by in totals.items():
        for rule, counts in by.items():
            total = sum(counts.values())
            if not total:
                continue
            print(
                f"{kind} {rule}: regressed {counts['regressed']}/{total} "
                f"({counts['regressed'] / total:.1%}), noisy {counts['noisy'] / total:.1%}"
            )


if __name__ == "__main__":
    main()
