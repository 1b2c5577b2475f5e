"""``taskscale limits set|list|clear``: flow control per task type
(see :mod:`taskscale.limits`)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from taskscale.cli.common import add_connection_arguments, client_and_keys, count, guarded
from taskscale.limits import DEFAULT_BURST, clear_limits, get_limits, set_limits


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "limits", help="rate limits and concurrency caps per task type, across all workers"
    )
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    s = sub.add_parser("set", help="replace a type's limits (what is not given is no limit)")
    add_connection_arguments(s)
    s.add_argument("type", metavar="TYPE")
    s.add_argument(
        "--rate", default=None, help="N/PERIOD, e.g. 100/s, 10/min, 100/hour, 5/2s, 3/500ms"
    )
    s.add_argument(
        "--burst",
        type=count,
        default=DEFAULT_BURST,
        help=f"tokens the rate bucket holds ({DEFAULT_BURST})",
    )
    s.add_argument(
        "--concurrency", type=count, default=None, help="most running at once, fleet-wide"
    )
    s.set_defaults(func=guarded(_set))
    ls = sub.add_parser("list", help="every type's limits and what runs now")
    add_connection_arguments(ls)
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    ls.set_defaults(func=guarded(_list))
    c = sub.add_parser("clear", help="remove a type's limits")
    add_connection_arguments(c)
    c.add_argument("type", metavar="TYPE")
    c.set_defaults(func=guarded(_clear))


def _set(args: argparse.Namespace) -> int:
    client, keys = client_and_keys(args)
    limits = set_limits(
        args.type,
        rate=args.rate,
        concurrency=args.concurrency,
        burst=args.burst,
        client=client,
        keys=keys,
    )
    print(f"{args.type}: {limits.describe()}")
    return 0


def _list(args: argparse.Namespace) -> int:
    client, keys = client_and_keys(args)
    limits = get_limits(client=client, keys=keys)
    running = client.hmget(keys.active, list(limits)) if limits else []
    rows = [(lim, max(0, int(r or 0))) for lim, r in zip(limits.values(), running, strict=True)]
    if args.json:
        doc = {
            lim.task_type: {
                "rate": lim.rate,
                "period_s": lim.period_s,
                "burst": lim.burst,
                "concurrency": lim.concurrency,
                "running": run,
            }
            for lim, run in rows
        }
        print(json.dumps(doc, indent=2))
        return 0
    if not rows:
        print("no limits set")
    for lim, run in rows:
        print(f"{lim.task_type}: {lim.describe()}; {run} running")
    return 0


def _clear(args: argparse.Namespace) -> int:
    client, keys = client_and_keys(args)
    had = clear_limits(args.type, client=client, keys=keys)
    print(f"{args.type}: limits cleared" if had else f"{args.type}: had no limits")
    return 0
