"""Other paired statistics for perfsuite ab's verdicts, to compare on the same rounds.

    python -m lab.ab_rules [--statistic t|yuen] [--value median|best] RECORD.json [...]

Re-judges the recorded rounds of ``perfsuite ab`` records with the product's rule or with a
variant, and counts the verdicts: for A/A records every ``regressed`` or ``improved`` is a
false alarm.  The rounds themselves are not replayed: a check decided early in the real run
keeps the rounds it had then.

* ``--value``: each side's value for a round, from its recorded samples: ``median`` (the
  product's) or ``best`` (the highest rate, the shortest latency: interference on a shared
  machine only slows a sample down, so the best one is the least disturbed).

* ``t``: the product's rule (:mod:`perfsuite.ab.paired`): the paired t on the log ratios,
  corrected over the family, and the sign-flip guard.
* ``yuen``: Yuen's trimmed t in place of the paired t (20% trimmed mean, winsorized
  variance, df = n - 2g - 1; Wilcox, *Introduction to Robust Estimation*), the rest as the
  product's.  A shared host's STREAM and TensorFlow rounds have heavy tails (a round
  straddling two bandwidth plateaus reads 0.6 or 1.6): one such round inflates the t-test's
  spread and leaves a real change undecided.

``statistic("yuen")`` is also used by ``lab/ab_verdicts.py --statistic yuen``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from perfsuite.ab import paired, rounds

TRIM = 0.2


def yuen(log_ratios: Sequence[float], confidence: float = paired.CONFIDENCE) -> paired.Pairs:
    """Yuen's one-sample trimmed t on the log ratios, as a :class:`paired.Pairs`."""
    x = np.sort(np.asarray(log_ratios, dtype=float))
    n = int(x.size)
    g = math.floor(TRIM * n)
    if n < 2 or g == 0:
        return _product_summarize(log_ratios, confidence)
    from scipy import stats as sps

    h = n - 2 * g
    mean = float(x[g : n - g].mean())
    w = np.clip(x, x[g], x[n - g - 1])
    sw = float(w.std(ddof=1))
    p_signs = paired.sign_flip_p(log_ratios)
    if sw == 0.0:
        return paired.Pairs(n, mean, 0.0, mean, mean, 1.0 if mean == 0 else 0.0, p_signs)
    se = sw / ((1 - 2 * g / n) * math.sqrt(n))
    df = h - 1
    half = float(sps.t.ppf(0.5 + confidence / 2, df)) * se
    p = float(2 * sps.t.sf(abs(mean / se), df))
    return paired.Pairs(n, mean, sw, mean - half, mean + half, p, p_signs)


_product_summarize = paired.summarize


@contextlib.contextmanager
def statistic(name: str) -> Iterator[None]:
    """Judge with ``name`` (t: the product's; yuen) inside the block."""
    if name == "t":
        yield
        return
    if name != "yuen":
        raise ValueError(f"unknown statistic {name!r}")
    paired.summarize = yuen  # type: ignore[assignment]
    try:
        yield
    finally:
        paired.summarize = _product_summarize


def rejudge(path: Path, plan: rounds.Plan, value: str = "median") -> Counter[str]:
    """The verdicts of a record's checks on their recorded rounds, under the current rule."""
    data = json.loads(path.read_text())
    if value != "median":
        states = rounds.evidence([_side_run(r, value) for r in data["rounds"]], plan.tolerance)
        return Counter(rounds.verdict(s) for s in rounds.judge(states, plan).values())
    states = {
        c["id"]: rounds.CheckState(
            c["id"],
            c["unit"],
            c["higher_is_better"],
            plan.tolerance if plan.tolerance is not None else c["tolerance"],
            tuple(c["log_ratios"]),
            tuple(range(1, len(c["log_ratios"]) + 1)),
            None,
        )
        for c in data["checks"]
    }
    return Counter(rounds.verdict(s) for s in rounds.judge(states, plan).values())


def _side_run(entry: dict, value: str) -> rounds.SideRun:
    """A recorded side run, each reading's samples cut down to the round's ``value``."""

    def cut(r: dict) -> tuple[float, ...]:
        samples = [float(x) for x in r["samples"]]
        if value == "best":
            return (max(samples) if r["higher_is_better"] else min(samples),)
        raise ValueError(f"unknown value {value!r}")

    readings = {
        check: rounds.Reading(
            r["unit"], r["higher_is_better"], r["tolerance"], cut(r), r["floor"],
            tuple(r["flags"]),
        )
        for check, r in entry["readings"].items()
        if r["samples"]
    }  # fmt: skip
    return rounds.SideRun(
        entry["round"], entry["side"], entry["position"], entry["seconds"],
        entry["returncode"], entry["failed"], readings,
    )  # fmt: skip


def main() -> None:
    """Print the verdicts of each record and in all."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--statistic", choices=["t", "yuen"], default="t")
    parser.add_argument("--value", choices=["median", "best"], default="median")
    parser.add_argument("records", nargs="+", type=Path)
    args = parser.parse_args()
    total: Counter[str] = Counter()
    with statistic(args.statistic):
        for path in args.records:
            got = rejudge(path, rounds.Plan(), args.value)
            total.update(got)
            print(path, dict(got))
    n = sum(total.values())
    print(
        f"{args.statistic}: {n} verdicts: "
        + ", ".join(f"{v} {total[v]} ({total[v] / n:.1%})" for v in paired.VERDICTS)
    )


if __name__ == "__main__":
    main()
