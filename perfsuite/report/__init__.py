"""Rendering of results: the terminal summary, the Markdown summary and the HTML report."""

from __future__ import annotations

from perfsuite.model import FloorVerdict

# What a floor's reference is, when it is not a datasheet peak: (figure prefix, short name).
NOT_A_PEAK = (
    ("compute limit", "compute limit"),
    ("host.shm_copy_gbs", "shm copy"),
    ("roofline", "the roofline bound"),
    ("POP rule of thumb", "ideal"),
)


def reference_name(floor: FloorVerdict) -> str:
    """What the check's best value was set against: "peak", or what the reference really is.

    The input pipeline is set against the compute limit (how many samples a second the
    device could train on), the CPU allreduce against this machine's shared-memory copy,
    a conv layer against its roofline bound; none of them is a peak.
    """
    for prefix, name in NOT_A_PEAK:
        if floor.figure.startswith(prefix):
            return name
    return "peak"


def of_reference(floor: FloorVerdict) -> str:
    """The best value against its reference, labelled: "85.0% of peak", "1.7x compute limit".

    A share of a peak or a bound reads as a percentage; a rate against the compute limit can
    be many times it, so it reads as a multiple.  "" without a reference.
    """
    share = floor.fraction_of_peak
    if share is None:
        return ""
    name = reference_name(floor)
    text = f"{share:.3g}x {name}" if name == "compute limit" else f"{share:.1%} of {name}"
    return text + (" (est.)" if floor.estimated else "")
