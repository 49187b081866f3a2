r"""Change points in nightly series: perfsuite before and after, Apache Otava and asv, one run.

    python lab/history_bench.py [--quick]

Run it in a virtual environment that has perfsuite's dependencies and the peers, from the
repository root (the peers run from their own packages)::

    uv venv ../history-venv && VIRTUAL_ENV=../history-venv uv pip install apache-otava asv \
        ruptures numpy scipy
    PYTHONPATH=$PWD ../history-venv/bin/python lab/history_bench.py

The labelled series:

* **real**: ``lab/history_data/series.json``, the series of Apache Otava's tests (from its
  0.8.0 sdist on PyPI, Nyrkiö's TigerBeetle series among them) and of MongoDB's
  signal-processing-algorithms ``tests/test_detection.py`` (from its GitHub repository: the
  PyPI sdist ships no tests), each with its source and why it is labelled as it is;
* **synthetic**, to the TCPDBench protocol: 200 nightly series of 60-200 points, log-normal
  noise of CV 1/3/8/12% (a quarter of them Student-t(3) on the log scale, of the same sd),
  0-3 steps of 3/5/10/20/50% up or down (40 series with none), fixed seed.

A detection within 2 points of a label is a hit (each label matched once); precision, recall
and F1 are pooled over the series of a set.  perfsuite's detector judges the series in
profiles of 10 (its family correction runs over a profile's series, as in ``history``);
Otava runs with its defaults (``compute_change_points``), asv with ``detect_steps``.  "before"
is ``perfsuite history``'s PELT detector of the previous release, copied below.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from perfsuite.judge import changepoints as cp

DATA = Path(__file__).parent / "history_data" / "series.json"
SEED = 20261202
MARGIN = 2
CVS = (0.01, 0.03, 0.08, 0.12)
STEPS = (0.03, 0.05, 0.10, 0.20, 0.50)
MIN_EFFECT = 0.02  # perfsuite history's default --min-effect
PROFILE = 10


@dataclass
class Labelled:
    name: str
    values: list[float]
    labels: list[int]
    cv: float = 0.0
    heavy: bool = False
    steps: tuple[float, ...] = ()


def synthetic(count: int = 200, no_change: int = 40, seed: int = SEED) -> list[Labelled]:
    """The TCPDBench-style set (see the module doc)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        n = int(rng.integers(60, 201))
        cv = CVS[i % len(CVS)]
        heavy = (i // len(CVS)) % 4 == 3  # a quarter, at every CV
        sd = math.sqrt(math.log1p(cv * cv))
        noise = sd * (rng.standard_t(3, n) / math.sqrt(3) if heavy else rng.standard_normal(n))
        k = 0 if i < no_change else int(rng.integers(1, 4))
        labels: list[int] = []
        while len(labels) < k:
            at = int(rng.integers(8, n - 8))
            if all(abs(at - x) >= 10 for x in labels):
                labels.append(at)
        labels.sort()
        level = np.zeros(n)
        sizes = []
        for at in labels:
            size = float(rng.choice(STEPS))
            sizes.append(size)
            level[at:] += math.log1p(size) * (1 if rng.random() < 0.5 else -1)
        values = list(100.0 * np.exp(level + noise))
        out.append(Labelled(f"syn-{i:03d}", values, labels, cv, heavy, tuple(sizes)))
    order = rng.permutation(count)  # profiles mix no-change and changed series
    return [out[j] for j in order]


def real() -> list[Labelled]:
    data = json.loads(DATA.read_text())
    return [Labelled(s["name"], s["values"], s["labels"]) for s in data["series"]]


# --- the detectors -------------------------------------------------------------------------


def pelt_before(values: Sequence[float], tolerance: float = 0.05) -> list[int]:
    """The detector of ``perfsuite history`` before issue 65 (PELT on scaled log values)."""
    import ruptures

    if len(values) < 6:
        return []
    logs = np.log(np.asarray(values, dtype=float))
    diffs = np.diff(logs)
    sigma = 1.4826 * float(np.median(np.abs(diffs - np.median(diffs)))) / math.sqrt(2)
    sigma = max(sigma, 1e-3)
    bounds = ruptures.Pelt(model="l2", min_size=3, jump=1).fit(logs / sigma)
    bounds = bounds.predict(pen=2 * math.log(len(values)))
    starts = [0, *bounds[:-1]]
    levels = [float(np.mean(logs[s:e])) for s, e in zip(starts, bounds, strict=True)]
    return [
        bounds[k - 1]
        for k in range(1, len(levels))
        if abs(math.exp(levels[k] - levels[k - 1]) - 1) > tolerance
    ]


def perfsuite_after(group: Sequence[Labelled]) -> list[list[int]]:
    scans = [cp.scan(s.values, higher_is_better=True, min_effect=MIN_EFFECT) for s in group]
    return [[c.index for c in found] for found in cp.significant(scans)]


def otava(values: Sequence[float]) -> list[int]:
    from otava.analysis import compute_change_points

    found, _ = compute_change_points(list(values))
    return [c.index for c in found]


def asv_steps(values: Sequence[float]) -> list[int]:
    from asv.step_detect import detect_steps

    return [int(step[0]) for step in detect_steps(list(values))[1:]]


Single = Callable[[Sequence[float]], list[int]]


def run_single(fn: Single, series: Sequence[Labelled]) -> tuple[list[list[int]], float]:
    t = time.perf_counter()
    found = [fn(s.values) for s in series]
    return found, (time.perf_counter() - t) / len(series)


def run_after(series: Sequence[Labelled]) -> tuple[list[list[int]], float]:
    t = time.perf_counter()
    found: list[list[int]] = []
    for i in range(0, len(series), PROFILE):
        found += perfsuite_after(series[i : i + PROFILE])
    return found, (time.perf_counter() - t) / len(series)


# --- scoring -------------------------------------------------------------------------------


def matched(found: Sequence[int], labels: Sequence[int]) -> list[bool]:
    """For each label, whether a detection within MARGIN matched it (each used once)."""
    free = sorted(found)
    hits = []
    for label in labels:
        near = [f for f in free if abs(f - label) <= MARGIN]
        if near:
            free.remove(min(near, key=lambda f: abs(f - label)))
        hits.append(bool(near))
    return hits


@dataclass
class Score:
    tp: int = 0
    fp: int = 0
    fn: int = 0

    def add(self, found: Sequence[int], labels: Sequence[int]) -> None:
        hits = sum(matched(found, labels))
        self.tp += hits
        self.fn += len(labels) - hits
        self.fp += len(found) - hits

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def score(series: Sequence[Labelled], found: Sequence[Sequence[int]]) -> dict[str, str]:
    total, heavy = Score(), Score()
    by_cv: dict[float, Score] = defaultdict(Score)
    step_hits: dict[float, list[bool]] = defaultdict(list)
    step_hits_low: dict[float, list[bool]] = defaultdict(list)  # CV <= 3%
    false_alarm = []
    for s, f in zip(series, found, strict=True):
        total.add(f, s.labels)
        by_cv[s.cv].add(f, s.labels)
        if s.heavy:
            heavy.add(f, s.labels)
        if not s.labels:
            false_alarm.append(bool(f))
        for size, hit in zip(s.steps, matched(f, s.labels), strict=False):
            step_hits[size].append(hit)
            if s.cv <= 0.03:
                step_hits_low[size].append(hit)
    row = {
        "F1": f"{total.f1:.3f}",
        "P": f"{total.precision:.3f}",
        "R": f"{total.recall:.3f}",
        "false alarm": f"{np.mean(false_alarm):.0%}" if false_alarm else "-",
    }
    if step_hits:
        row |= {f"F1 cv{c:.0%}": f"{by_cv[c].f1:.2f}" for c in CVS}
        row |= {f"R step{z:.0%}": f"{np.mean(step_hits[z]):.2f}" for z in STEPS}
        row["R 10%@cv<=3%"] = f"{np.mean(step_hits_low[0.10]):.2f}"
        row["F1 t3"] = f"{heavy.f1:.2f}"
    return row


def table(title: str, rows: dict[str, dict[str, str]]) -> None:
    keys = list(next(iter(rows.values())))
    print(f"\n{title}")
    print("| | " + " | ".join(rows) + " |")
    print("|---|" + "---|" * len(rows))
    for k in keys:
        print(f"| {k} | " + " | ".join(r[k] for r in rows.values()) + " |")


def evaluate(series: list[Labelled], skip_before: bool = False) -> dict[str, dict[str, str]]:
    runs: dict[str, tuple[list[list[int]], float]] = {}
    if not skip_before:
        runs["perfsuite before"] = run_single(pelt_before, series)
    runs["perfsuite after"] = run_after(series)
    runs["Otava 0.8.0"] = run_single(otava, series)
    runs["asv detect_steps"] = run_single(asv_steps, series)
    out = {}
    for name, (found, per) in runs.items():
        out[name] = score(series, found) | {"ms per series": f"{per * 1e3:.1f}"}
    return out


def long_series(n: int, fns: dict[str, Single]) -> dict[str, str]:
    rng = np.random.default_rng(SEED)
    values = list(100 * rng.lognormal(0, 0.03, n) * np.where(np.arange(n) < n // 2, 1, 0.9))
    out = {}
    for name, fn in fns.items():
        t = time.perf_counter()
        fn(values)
        out[name] = f"{time.perf_counter() - t:.2f} s"
    return out


def nights(simulate: int) -> None:
    """Nights after a step until perfsuite finds it with 95% probability (one check)."""
    print("\nnights to detect a step with 95% probability (60 nights before, one check):")
    print("| spread | step | nights (closed form) | simulated, that many nights after |")
    print("|---|---|---|---|")
    rng = np.random.default_rng(SEED + 1)
    for spread in (0.12, 0.007):
        for step in (0.05, 0.10, 0.20):
            k = cp.nights_to_detect(spread, -step, before=60, min_effect=MIN_EFFECT)
            sim = "-"
            if k is not None and simulate:
                found_any = found_near = 0
                for _ in range(simulate):
                    noise = rng.normal(0, spread, 60 + k)
                    drop = np.where(np.arange(60 + k) >= 60, math.log1p(-step), 0)
                    values = 100 * np.exp(noise + drop)
                    found = cp.detect(values, higher_is_better=True, min_effect=MIN_EFFECT)
                    found = [c for c in found if c.direction == "regressed"]
                    found_any += bool(found)
                    found_near += any(abs(c.index - 60) <= MARGIN for c in found)
                sim = (
                    f"{found_any / simulate:.0%} found, {found_near / simulate:.0%} at the "
                    f"night +-{MARGIN} (of {simulate})"
                )
            print(f"| {spread:.1%} | {step:.0%} | {k if k else '> 10000 or never'} | {sim} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="40 synthetic series, no timings")
    args = ap.parse_args()
    print(f"uptime: {os.getloadavg()[0]:.2f} load (1 min), seed {SEED}, margin +-{MARGIN}")
    syn = synthetic(40, 8) if args.quick else synthetic()
    table("synthetic (TCPDBench protocol)", evaluate(syn))
    table("real (Otava + MongoDB test series)", evaluate(real()))
    if not args.quick:
        fns: dict[str, Single] = {
            "perfsuite after": lambda v: [
                c.index for c in cp.detect(v, higher_is_better=True, min_effect=MIN_EFFECT)
            ],
            "Otava 0.8.0": otava,
            "asv detect_steps": asv_steps,
        }
        print("\none series of 10,000 runs, one 10% step (perfsuite before: quadratic, not run)")
        print(long_series(10_000, fns))
    nights(0 if args.quick else 200)


if __name__ == "__main__":
    main()
