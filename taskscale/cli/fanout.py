"""``taskscale fanout ID [--results] [--json]``: where a fan-out stands.

Reads the fan-out's state hash (docs/schema.md, "Fan-out accounting") and,
with ``--results``, the results a streamed fan-out collected so far, in
submission order. Read-only; works for submitted and streamed fan-outs.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from taskscale.cli.common import add_connection_arguments, client_and_keys, guarded
from taskscale.fanout import UnknownFanout
from taskscale.fanout_stream import FanoutStream
from taskscale.keys import check_name


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("fanout", help="show a fan-out's progress (and collected results)")
    add_connection_arguments(p)
    p.add_argument("id", metavar="ID", help="the fan-out id")
    p.add_argument("--results", action="store_true", help="also list the results collected")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=guarded(_fanout))


def _fanout(args: argparse.Namespace) -> int:
    client, keys = client_and_keys(args)
    stream = FanoutStream(client, check_name("fan-out id", args.id), keys=keys)
    try:
        status = stream.status()
    except UnknownFanout as exc:
        print(str(exc))
        return 3
    raw = client.hmget(keys.fanout(args.id), ["collect_max_bytes", "results_dropped"])
    collecting = int(raw[0] or 0) > 0
    state = "open" if status.open else ("done" if status.done else "closed, running")
    doc: dict[str, Any] = {
        "id": args.id,
        "type": status.task_type,
        "state": state,
        "total": status.total,
        "limit": status.limit,
        "running": status.running,
        "pending": status.pending,
        "succeeded": status.succeeded,
        "failed": status.failed,
        "collects_results": collecting,
        "results_dropped": int(raw[1] or 0),
    }
    results = stream.results() if args.results else []
    if args.json:
        if args.results:
            doc["results"] = [vars(r) for r in results]
        print(json.dumps(doc, indent=2, sort_keys=True))
        return 0
    print(
        f"fan-out {args.id} ({status.task_type}): {state}; {status.total} sub-tasks, "
        f"{status.succeeded} succeeded, {status.failed} failed, {status.running} running "
        f"(limit {status.limit}), {status.pending} pending"
    )
    if collecting:
        print(f"results collected; {doc['results_dropped']} dropped by the size limit")
    for r in results:
        if r.dropped:
            text = "(dropped: over the size limit)"
        elif r.ok:
            text = json.dumps(r.result)
        else:
            text = f"{r.error_type}: {r.error}"
        print(f"  {r.index}: {'ok' if r.ok else 'error'} {text}")
    return 0
