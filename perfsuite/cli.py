"""The ``perfsuite`` command: ``perfsuite profiles`` and ``perfsuite profiles show NAME``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from perfsuite.errors import PerfsuiteError
from perfsuite.hardware.detect import resolve
from perfsuite.hardware.profile import HardwareProfile, ProfileRegistry


def _row(profile: HardwareProfile) -> str:
    bw = profile.figure("memory.bandwidth_gbs")
    fp32 = profile.figure("compute.fp32_tflops")
    bw_text = f"{bw:g} GB/s" if bw else "-"
    fp32_text = f"{fp32:.4g} TFLOP/s" if fp32 else "-"
    return (
        f"{profile.name:<12} {profile.kind:<4} {bw_text:>11} {fp32_text:>15}  {profile.description}"
    )


def _profiles(args: argparse.Namespace) -> int:
    registry = ProfileRegistry([Path(d) for d in args.profile_dir])
    if args.action == "show":
        if not args.name:
            raise PerfsuiteError("perfsuite profiles show: name a profile, or 'auto' for this host")
        profile = resolve(args.name, registry)
        print(f"# {profile.origin}")
        print(profile.to_toml(), end="")
        return 0
    print(f"{'name':<12} {'kind':<4} {'bandwidth':>11} {'fp32':>15}  description")
    for profile in registry.load_all():
        print(_row(profile))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``perfsuite`` command."""
    parser = argparse.ArgumentParser(prog="perfsuite", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    profiles = sub.add_parser("profiles", help="list hardware profiles, or show one")
    profiles.add_argument("action", nargs="?", choices=["list", "show"], default="list")
    profiles.add_argument("name", nargs="?", help="profile name, or 'auto' for this host")
    profiles.add_argument(
        "--profile-dir", action="append", default=[], metavar="DIR", help="extra profile directory"
    )
    profiles.set_defaults(func=_profiles)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; user errors print one line and exit 2."""
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except PerfsuiteError as exc:
        print(f"perfsuite: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
