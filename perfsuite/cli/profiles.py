"""``perfsuite profiles`` and ``perfsuite backends``: what perfsuite knows and what is installed."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from perfsuite.cli.args import path_arg
from perfsuite.errors import PerfsuiteError
from perfsuite.hardware.detect import resolve
from perfsuite.hardware.profile import HardwareProfile, ProfileRegistry
from perfsuite.judge import outcome
from perfsuite.report.terminal import format_table


def profile_row(profile: HardwareProfile) -> tuple[str, str, str, str, str]:
    bw = profile.figure("memory.bandwidth_gbs")
    fp32 = profile.figure("compute.fp32_tflops")
    bw_text = f"{bw:.4g} GB/s" if bw else "-"
    fp32_text = f"{fp32:.4g} TFLOP/s" if fp32 else "-"
    return (profile.name, profile.kind, bw_text, fp32_text, profile.description)


def profiles_command(args: argparse.Namespace) -> int:
    registry = ProfileRegistry([Path(d) for d in args.profile_dir])
    if args.action == "show":
        if not args.name:
            raise PerfsuiteError("perfsuite profiles show: name a profile, or 'auto' for this host")
        profile = resolve(args.name, registry)
        print(f"# {profile.origin}")
        print(profile.to_toml(), end="")
        return outcome.EXIT_OK
    rows = [("name", "kind", "bandwidth", "fp32", "description")]
    rows += [profile_row(profile) for profile in registry.load_all()]
    here = resolve("auto", registry)
    estimated = " (compute peaks estimated)" if here.estimated else ""
    rows.append(("auto", "", "", "", f"this machine: {here.name}{estimated}"))
    print("\n".join(format_table(rows)))
    return outcome.EXIT_OK


def backends_command(args: argparse.Namespace) -> int:
    """Every backend ``--perf-backend`` accepts, whether it is installed, and how to install it."""
    from perfsuite import backends
    from perfsuite.collectives import LIBRARIES
    from perfsuite.options import installed

    def row(name: str, kind: str, module: str, hint: str) -> tuple[str, str, str, str]:
        here = installed(module)
        return (name, kind, "yes" if here else "no", "" if here else hint)

    rows = [("name", "kind", "installed", "to install")]
    rows += [
        row(name, "framework", b.module, f"pip install 'perfsuite[{b.extra}]'" if b.extra else "")
        for name, b in backends.registry().items()
    ]
    rows += [
        row(name, "collective (allreduce ranks)", module, hint)
        for name, (module, hint) in LIBRARIES.items()
    ]
    print("\n".join(format_table(rows)))
    return outcome.EXIT_OK


def add_profiles_parsers(sub: Any) -> None:
    """The ``profiles`` and ``backends`` commands' arguments."""
    profiles = sub.add_parser(
        "profiles",
        help="list hardware profiles, or show one",
        description=(
            "List the hardware profiles perfsuite knows (built in, and those in --profile-dir), "
            "with their memory bandwidth and fp32 peak, and what 'auto' resolves to on this "
            "machine; or print one profile's figures as TOML. Exit status: "
            f"{outcome.EXIT_OK} listed, {outcome.EXIT_USAGE} usage error (a bad or unknown "
            "profile; the table below)."
        ),
    )
    profiles.add_argument(
        "action",
        nargs="?",
        choices=["list", "show"],
        default="list",
        help="list every profile (the default), or show one profile's figures",
    )
    profiles.add_argument(
        "name", nargs="?", help="with show: a profile name, or 'auto' for this host"
    )
    profiles.add_argument(
        "--profile-dir",
        type=path_arg,
        action="append",
        default=[],
        metavar="DIR",
        help="an extra directory of profile TOML files; repeat for more (default: none)",
    )
    profiles.set_defaults(func=profiles_command)

    backends = sub.add_parser(
        "backends",
        help="list the backends --perf-backend accepts, and which are installed",
        description=(
            "List every framework backend --perf-backend accepts and every collective library "
            "the allreduce checks launch ranks with, whether each is installed here, and how "
            f"to install the missing ones. Exit status: {outcome.EXIT_OK} listed (the table "
            "below)."
        ),
    )
    backends.set_defaults(func=backends_command)
