"""The end-of-session terminal summary: the checks, then the verdicts.

One line for floors, one for baselines, and the session's outcome, all from the one
outcome rule.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from perfsuite.hardware.profile import HardwareProfile
from perfsuite.judge import outcome, stats
from perfsuite.model import Crash, FlagKind, Result
from perfsuite.model.finished import Finished, NotSaved, Refusal, Refused
from perfsuite.report import of_reference
from perfsuite.report.explain import (
    FLAG_REFUSALS,
    cannot_detect_note,
    flag_words,
    flags_words,
    floor_reason,
    load_tag,
    mode_tag,
    reference_tag,
)
from perfsuite.report.headline import floor_label, headline, worst_named
from perfsuite.report.notes import (
    baseline_note,
    load_remedy,
    machine_note,
    verdict_advice,
    young_baseline_note,
)

Line = tuple[str, dict[str, Any]]
# Regressed (or improved) checks named one per line; the rest are counted.
NAMED = 10
# Results kept out of a baseline, named on one line; the rest are counted.
REFUSED_NAMED = 5
FLOOR_LABELS = (
    "fail",
    "fail (under load)",
    "warning",
    "warning (est.)",
    "pass",
    "pass (above est. peak)",
    "no-reference",
    "no-reference (above est. peak)",
)


def format_table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligned columns, two spaces apart."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


def cores_span(values: Sequence[float]) -> str:
    """``0.56-1.71 cores``, or ``0.90 cores`` when they round alike ("" for none)."""
    if not values:
        return ""
    low, high = f"{min(values):.2f}", f"{max(values):.2f}"
    return f"{low if low == high else f'{low}-{high}'} cores"


def printable(text: str) -> str:
    r"""``text`` with each control or format character shown escaped (``\x1b``, ``\n``).

    Free text from a record (a crash's message, why a run is incomplete) is shown on the
    terminal; an escape sequence in it must not drive the terminal.
    """
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def short_id(node_id: str) -> str:
    """The test name with its parameters, without the file path."""
    return node_id.rsplit("::", 1)[-1]


def _value(result: Result) -> str:
    best = stats.best(result.samples, result.higher_is_better)
    return f"{best:.4g} {result.unit}"


def _peak(result: Result) -> str:
    return of_reference(result.floor) or "-"


def change(result: Result) -> str:
    """The change against the baseline with its confidence interval, or '-'."""
    b = result.baseline
    if b.ratio is None:
        return "-"
    if b.ci_low is None or b.ci_high is None:
        return f"{b.ratio - 1:+.1%}"
    return f"{b.ratio - 1:+.1%} [{b.ci_low - 1:+.1%}, {b.ci_high - 1:+.1%}]"


def format_result_lines(profile: HardwareProfile, results: Iterable[Result]) -> list[str]:
    """The per-check table: check, metric, best value, against what reference, change, verdicts."""
    rows = [
        (
            "check",
            "metric",
            "best",
            "vs reference",
            "vs baseline [CI]",
            "floor",
            "baseline",
            "outcome",
        )
    ]
    for r in outcome.worst_first(results):
        status = r.waiver.status if r.waiver else ""
        base = f"{r.baseline.verdict} (waiver {status})" if status else r.baseline.verdict
        rows.append(
            (
                short_id(r.id),
                r.metric,
                _value(r),
                _peak(r),
                change(r),
                floor_label(r),
                base,
                outcome.of(r),
            )
        )
    estimated = f"; estimated: {', '.join(sorted(profile.estimated))}" if profile.estimated else ""
    return [f"profile {profile.name}: {profile.description}{estimated}", *format_table(rows)]


def _counts(counter: Counter[str], order: Sequence[str]) -> str:
    return ", ".join(f"{counter[k]} {k}" for k in order if counter.get(k))


def skip_warning_lines(warnings: Counter[str]) -> list[Line]:
    """One line per distinct warning carried by skip reasons, with how many checks it cost."""
    return [
        (f"warning: {text} ({n} check(s) skipped)", {"yellow": True, "bold": True})
        for text, n in warnings.most_common()
    ]


def progress_line(done: int, total: int, elapsed_s: float) -> str:
    """``perfsuite: 12 of 86 tests in 1:05, about 4:00 to go`` (no estimate before one).

    It counts pytest's tests, as pytest's summary does; the verdict counts the checks'
    results (a test that skips has none, a sweep's test may have several).
    """
    text = f"perfsuite: {done} of {total} tests in {clock(elapsed_s)}"
    if 0 < done < total:
        text += f", about {clock(elapsed_s / done * (total - done))} to go"
    return text


def clock(seconds: float) -> str:
    """Minutes and seconds, ``4:05`` (a negative time left reads ``0:00``)."""
    minutes, secs = divmod(round(max(0.0, seconds)), 60)
    return f"{minutes}:{secs:02d}"


def verdict_lines(
    results: Sequence[Result],
    fail_on: Iterable[str],
    *,
    crashed: Sequence[Crash] = (),
    incomplete: str = "",
) -> list[Line]:
    """Two short lines (floors, baselines), the crashed checks, and the session's outcome."""
    floors = Counter(floor_label(r) for r in results)
    bases = Counter(r.baseline.verdict for r in results)
    lines: list[Line] = [
        (
            "floors:    " + (_counts(floors, FLOOR_LABELS) or "none"),
            {},
        ),
        (
            "baselines: "
            + (_counts(bases, ("regressed", "noisy", "improved", "ok", "new")) or "none"),
            {},
        ),
    ]
    for crash in crashed[:NAMED]:
        lines.append(
            (f"crashed: {short_id(crash.id)} ({crash.phase}): {crash.message}", {"red": True})
        )
    if len(crashed) > NAMED:
        lines.append((f"crashed: {len(crashed) - NAMED} more", {"red": True}))
    verdict = outcome.session_verdict(results, fail_on, crashed=crashed, incomplete=incomplete)
    text = f"perfsuite: {headline(verdict)}"
    if verdict.state == "interrupted":
        text += (
            f": {incomplete}; the checks that did not run are unknown, the record is marked "
            "incomplete and no baseline was saved"
        )
        lines.append((text, {"red": True, "bold": True}))
    elif verdict.state == "failed":
        text += f": {worst_named(verdict)}"
        lines.append((text, {"red": True, "bold": True}))
    elif verdict.state in ("inconclusive", "empty", "measured"):
        advice = verdict_advice(verdict)
        text += f": {advice}" if advice else ""
        colour = {"yellow": True} if verdict.state != "measured" else {"cyan": True}
        lines.append((text, {**colour, "bold": True}))
    else:
        lines.append((text, {"green": True, "bold": True}))
    return lines


REFUSAL_WORDS = {
    Refused.FAILED: "failed",
    Refused.REGRESSED: "regressed",
    Refused.REGRESSED_WAIVED: "regressed (waived)",
    Refused.QUICK: "quick mode",
}


def refusal_words(refusals: Iterable[Refusal]) -> list[str]:
    """Why a result was kept out of a baseline: each reason once, in words, in order."""
    out: list[str] = []
    for refusal in refusals:
        flag = refusal.flag
        if flag is None:
            words = REFUSAL_WORDS.get(refusal.why, str(refusal.why))
        else:
            words = FLAG_REFUSALS.get(flag.kind, "measured " + flags_words((flag,)))
        if words not in out:
            out.append(words)
    return out


def not_saved_words(done: Finished) -> str:
    """Why a run saved no baseline at all ("" when nothing stopped it)."""
    if done.not_saved is NotSaved.INCOMPLETE:
        return (
            f"the run is incomplete ({done.record.incomplete}); an incomplete run never saves one"
        )
    if done.not_saved is NotSaved.CRASHED:
        return (
            f"{len(done.record.crashed)} selected check(s) crashed, so the run is not a whole "
            "baseline; --perf-force-baseline saves the checks that measured"
        )
    return ""


def baseline_notice(done: Finished, results: Sequence[Result]) -> str:
    """The reports' line on a baseline that was asked for and not saved whole ("" otherwise)."""
    if not done.save_failed:
        return ""
    return baseline_lines(done, results)[0][0].removeprefix("perfsuite: ")


def empty_line(selected: int) -> str:
    """The verdict of a session whose selected perf checks all skipped: a failure."""
    return (
        f"perfsuite: FAILED: {selected} perf check(s) were selected but none measured anything "
        "(pytest -rs lists the skip reasons); --perf-allow-empty lets such a session pass"
    )


def baseline_lines(done: Finished, results: Sequence[Result]) -> list[Line]:
    """The last line of a run asked to save a baseline: saved, or NOT saved and why.

    One line, each reason once with its count (the figures behind a load as a range); the
    checks by name are listed above it, in the perfsuite section.
    """
    if not done.asked:
        return []
    if done.not_saved:
        return [
            (f"perfsuite: baseline NOT saved: {not_saved_words(done)}", {"red": True, "bold": True})
        ]
    if not done.refused:
        if not done.baseline_path:
            why = "see the error above" if done.errors else "no check measured anything"
            return [(f"perfsuite: baseline NOT saved ({why})", {"red": True, "bold": True})]
        return [(f"perfsuite: baseline saved: {done.saved} entries", {"green": True})]
    refused = {i: refusal_words(r) for i, r in done.refused.items()}
    reasons = Counter(why for whys in refused.values() for why in whys)
    load = FLAG_REFUSALS[FlagKind.FOREIGN_LOAD]
    loads = [
        cores
        for r in results
        if load in refused.get(r.id, ()) and (cores := r.noise.foreign_cores) is not None
    ]

    def shown(why: str, n: int) -> str:
        return f"{n} {why} ({cores_span(loads)})" if why == load and loads else f"{n} {why}"

    total = len(results)
    head = (
        f"baseline NOT saved for {len(refused)} of {total} checks"
        if done.baseline_path
        else f"baseline NOT saved: {len(refused)} of {total} checks refused"
    )
    remedy = load_remedy([r for r in results if load in refused.get(r.id, ())], saving=True)
    advice = (
        f"{remedy}; --perf-force-baseline saves them anyway, and their load widens the baseline"
    )
    if load not in reasons:
        advice = "--perf-force-baseline saves them anyway"
    text = (
        f"perfsuite: {head}: "
        + ", ".join(shown(w, n) for w, n in reasons.most_common())
        + f"; {advice}"
    )
    return [(text, {"red": True, "bold": True})]


def note_lines(results: Sequence[Result]) -> list[str]:
    """Waiver notes, then noise, noisy and blind checks grouped into one line each."""
    notes = []
    for r in results:
        waiver = r.waiver
        if waiver is not None and waiver.status == "stale":
            notes.append(
                f"stale waiver: {short_id(r.id)} no longer regresses "
                f"(waiver {waiver.test!r}: {waiver.reason})"
            )
        elif waiver is not None and waiver.status == "expired":
            notes.append(
                f"expired waiver: {waiver.test!r} expired on {waiver.expires}; "
                f"{short_id(r.id)} was judged without it"
            )
    loaded = [r for r in results if r.noise_flags]
    if loaded:
        notes.append(
            f"noise: {len(loaded)} check(s) measured under foreign load or throttling "
            f"(e.g. {short_id(loaded[0].id)}: {flag_words(loaded[0].noise_flags[0])})"
        )
    young = young_baseline_note(results)
    if young:
        notes.append(young)
    machine = machine_note(results)
    if machine:
        notes.append(machine)
    back_to_back = baseline_note(results)
    if back_to_back:
        notes.append(back_to_back)
    ordered = outcome.worst_first(results)
    for kind in ("regressed", "improved"):
        changed = [r for r in ordered if r.baseline.verdict == kind]
        for r in changed[:NAMED]:
            tags = (r.baseline.reason, load_tag(r), reference_tag(r), mode_tag(r))
            why = "; ".join(x for x in tags if x)
            notes.append(f"{kind}: {short_id(r.id)}: {why}")
        if len(changed) > NAMED:
            notes.append(f"{kind}: {len(changed) - NAMED} more; details in the report")
    noisy = [r for r in ordered if r.baseline.verdict == "noisy"]
    if noisy:
        notes.append(
            f"noisy: {len(noisy)} check(s) could not be judged (e.g. {short_id(noisy[0].id)}: "
            f"{noisy[0].baseline.reason}); details in the report"
        )
    blind = [r for r in results if r.baseline.cannot_detect is not None]
    if blind:
        worst = max(blind, key=lambda r: r.baseline.detectable or 0)
        notes.append(
            f"detectability: {len(blind)} of {sum(r.baseline.verdict != 'new' for r in results)} "
            f"compared check(s) cannot detect their tolerance; worst: {short_id(worst.id)}: "
            f"{cannot_detect_note(worst.baseline)}"
        )
    return notes + no_floor_lines(results)


def no_floor_lines(results: Sequence[Result]) -> list[str]:
    """One line per reason a check has no floor verdict, with its count, most first.

    The counts add up to the floors line's ``no-reference`` labels (with those marked
    ``(above est. peak)``); the report gives each check's reason in full.
    """
    why = Counter(
        (r.check, short_reason(floor_reason(r.floor)))
        for r in results
        if r.floor.verdict == "no-reference"
    )
    if not why:
        return []
    lines = [f"no floor: {n} {check}: {reason}" for (check, reason), n in why.most_common()]
    total = sum(why.values())
    if len(why) > 1:
        lines.append(
            f"no floor: {total} in all; each check's reason is in the run record and the report"
        )
    return lines


def short_reason(reason: str) -> str:
    """A reason's head, the part before its first ": " (the whole reason if there is none)."""
    return reason.partition(": ")[0].strip() or reason


def summary_lines(
    profile: HardwareProfile, seam: Sequence[str], done: Finished, *, save_baseline: bool
) -> list[Line]:
    """The perfsuite section of the terminal summary, up to the verdict lines.

    ``seam``: the plugins that replaced machine readings or samples.  :func:`verdict_lines`
    come last, after pytest's own short summary.
    """
    results = done.record.results
    lines: list[Line] = [(line, {}) for line in format_result_lines(profile, results)]
    if seam:
        lines.append(
            (
                "measurement seam: readings or samples replaced by "
                + ", ".join(seam)
                + " (perfsuite's hooks); the figures are not this machine's alone",
                {"yellow": True},
            )
        )
    lines += [(note, {}) for note in note_lines(results)]
    if done.record_path:
        lines.append((f"run record: {done.record_path}", {}))
    if done.html_path:
        lines.append((f"HTML report: {done.html_path}", {}))
    if save_baseline:
        if done.baseline_path:
            lines.append((f"baseline saved: {done.saved} entries into {done.baseline_path}", {}))
        if done.refused:
            names = sorted(done.refused)
            shown = ", ".join(
                f"{short_id(n)} ({'; '.join(refusal_words(done.refused[n]))})"
                for n in names[:REFUSED_NAMED]
            )
            more = f", and {len(names) - REFUSED_NAMED} more" if len(names) > REFUSED_NAMED else ""
            lines.append((f"baseline: refused {shown}{more}", {"yellow": True}))
    for error in done.errors:
        lines.append((f"ERROR: {error}", {"red": True, "bold": True}))
    if done.late:
        late = Counter(r.outcome for r in results if r.id in set(done.late))
        size = max((r.baseline.family_size or 1 for r in results), default=1)
        lines.append(
            (
                "whole family: "
                + ", ".join(f"{n} {kind}" for kind, n in late.most_common())
                + f" once all {size} comparisons were in (significant only then; their "
                "tests are counted with that outcome)",
                {"yellow": True},
            )
        )
    return lines
