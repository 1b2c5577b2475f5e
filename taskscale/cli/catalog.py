"""``taskscale catalog [--json]``: the task types live workers serve, with
their functions' signatures (see :mod:`taskscale.catalog`); a type enqueued
that no live worker serves is flagged (a warning: at zero replicas it is normal)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from taskscale.catalog import read_catalog, signature_text
from taskscale.cli.common import add_connection_arguments, client_and_keys, guarded


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "catalog", help="the task types live workers serve, with their parameters"
    )
    add_connection_arguments(p)
    p.add_argument("--json", action="store_true", help="the whole catalog as JSON")
    p.set_defaults(func=guarded(_catalog))


def render(catalog: dict[str, Any]) -> str:
    """The catalog as text: one block per type, then the warnings."""
    lines: list[str] = []
    for name, entry in catalog["types"].items():
        workers = len(entry["workers"])
        where = f"{workers} worker(s)" if workers else "no live worker"
        function = ("async " if entry.get("async") else "") + (entry.get("function") or "?")
        lines.append(f"{name}  {function}{signature_text(entry)}  [{where}]")
        if entry.get("doc"):
            lines.append(f"    {entry['doc']}")
        if entry.get("version"):
            lines.append(f"    version {entry['version']}")
        if entry["variants"] > 1:
            lines.append(f"    {entry['variants']} different descriptions among its workers")
    if not catalog["types"]:
        lines.append("(no task types: no live worker and nothing enqueued)")
    for name in catalog["unserved"]:
        entry = catalog["types"][name]
        why = "no live worker serves it" if not entry["workers"] else "no function registered"
        lines.append(f"WARNING: {name} is enqueued and {why}")
    return "\n".join(lines)


def _catalog(args: argparse.Namespace) -> int:
    client, keys = client_and_keys(args)
    catalog = read_catalog(client, keys)
    print(json.dumps(catalog, indent=2, sort_keys=True) if args.json else render(catalog))
    return 0
