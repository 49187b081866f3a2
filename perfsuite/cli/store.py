"""``perfsuite store import|info|compact``: the results store."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from perfsuite.cli.args import path_arg
from perfsuite.judge import outcome


def store_import_command(args: argparse.Namespace) -> int:
    from perfsuite.store import Store, import_dir

    done = import_dir(Store.open(Path(args.store), create=True), Path(args.dir))
    for line in done.unreadable:
        print(f"perfsuite: skipped: {line}", file=sys.stderr)
    print(
        f"{args.store}: {done.added} run(s) added, {done.already} already there"
        + (f", {len(done.unreadable)} file(s) unreadable (above)" if done.unreadable else "")
    )
    return outcome.EXIT_OK


def store_info_command(args: argparse.Namespace) -> int:
    from perfsuite.store import SCHEMA_VERSION, Store

    info = Store.open(Path(args.store)).info()
    print(
        f"{args.store}: {info.runs} run(s), {info.results} result(s) in {info.shards} "
        f"shard(s), {info.bytes / 1e6:.1f} MB; schema version "
        f"{', '.join(map(str, info.versions)) or SCHEMA_VERSION}"
    )
    for profile, runs in info.profiles:
        print(f"  {profile}: {runs} run(s)")
    return outcome.EXIT_OK


def store_compact_command(args: argparse.Namespace) -> int:
    from perfsuite.store import Store

    merged, name = Store.open(Path(args.store)).compact()
    print(f"{args.store}: merged {merged} shard(s) into {name}" if name else
          f"{args.store}: nothing to merge")  # fmt: skip
    return outcome.EXIT_OK


def add_store_parser(sub: Any) -> None:
    store = sub.add_parser(
        "store",
        help="the results store: import run records, show what it holds, compact it",
        description=(
            "The results store holds every run's readings, environment and verdicts; each "
            "pytest session appends its run to REPORT_DIR/_store. See docs/store.md. "
            f"Exit status: {outcome.EXIT_OK} done, {outcome.EXIT_USAGE} usage error."
        ),
    )
    store_sub = store.add_subparsers(dest="store_command", required=True)
    where = {
        "type": path_arg,
        "default": "reports/_store",
        "metavar": "PATH",
        "help": "the store's folder (default: reports/_store)",
    }
    imp = store_sub.add_parser(
        "import",
        help="load the run records under DIR into the store",
        description="Load every run record under DIR (at any depth) that the store lacks: "
        "importing twice adds nothing; a file that is no readable run record is named in one "
        "line and skipped.",
    )
    imp.add_argument("dir", metavar="DIR", type=path_arg, help="a folder of run records")
    imp.add_argument("--store", **where)
    imp.set_defaults(func=store_import_command)
    info = store_sub.add_parser("info", help="what the store holds")
    info.add_argument("--store", **where)
    info.set_defaults(func=store_info_command)
    compact = store_sub.add_parser(
        "compact",
        help="merge the store's shards into one (safe while writers append)",
        description="Merge every shard into one, written under a temporary name and renamed "
        "into place before the shards it replaces are removed; shards of an earlier schema "
        "version are rewritten in this version's layout.",
    )
    compact.add_argument("--store", **where)
    compact.set_defaults(func=store_compact_command)
