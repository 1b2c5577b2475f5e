"""``taskscale scripts export DIR``: the Lua scripts as other languages load
them (includes expanded) and their manifest (:mod:`taskscale.contract`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from taskscale.contract import MANIFEST, export


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "scripts", help="the Lua scripts and their contract, for clients in other languages"
    )
    sub = p.add_subparsers(dest="scripts_command", metavar="ACTION", required=True)
    e = sub.add_parser(
        "export",
        help="write every script with its includes expanded, plus manifest.json",
        description="Write every Lua script as Redis receives it (SCRIPT LOAD the file "
        "as it is) and manifest.json: per script its SHA1, KEYS, ARGV, return value "
        "and error texts, and the schema version (docs/schema.md).",
    )
    e.add_argument("directory", type=Path, metavar="DIR", help="created if missing")
    e.set_defaults(func=_export)


def _export(args: argparse.Namespace) -> int:
    written = export(args.directory)
    print(
        f"{len(written['scripts'])} scripts and {MANIFEST} (schema version "
        f"{written['schema_version']}) written to {args.directory}"
    )
    return 0
