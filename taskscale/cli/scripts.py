"""``taskscale scripts export DIR``: the Lua scripts as other languages load
them (includes expanded) and their manifest; ``taskscale scripts doc``: the
per-script reference of docs/schema.md, from the same headers
(:mod:`taskscale.contract`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from taskscale.contract import BEGIN, END, MANIFEST, export, render_reference, with_reference


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
    d = sub.add_parser(
        "doc",
        help="print the per-script reference of docs/schema.md (from the script headers)",
    )
    d.add_argument(
        "--update",
        type=Path,
        metavar="FILE",
        help="replace the generated part of FILE (docs/schema.md) instead of printing it",
    )
    d.set_defaults(func=_doc)


def _export(args: argparse.Namespace) -> int:
    try:
        written = export(args.directory)
    except OSError as exc:
        print(f"taskscale scripts export: {exc}", file=sys.stderr)
        return 1
    print(
        f"{len(written['scripts'])} scripts and {MANIFEST} (schema version "
        f"{written['schema_version']}) written to {args.directory}"
    )
    return 0


def _doc(args: argparse.Namespace) -> int:
    if args.update is None:
        print(render_reference())
        return 0
    try:
        text = args.update.read_text(encoding="utf-8")
        if BEGIN not in text or END not in text:
            print(
                f"taskscale scripts doc: {args.update} has no generated part to replace "
                f"(the lines {BEGIN!r} and {END!r})",
                file=sys.stderr,
            )
            return 2
        args.update.write_text(with_reference(text), encoding="utf-8")
    except OSError as exc:
        print(f"taskscale scripts doc: {exc}", file=sys.stderr)
        return 1
    print(f"{args.update}: the script reference rewritten from the headers")
    return 0
