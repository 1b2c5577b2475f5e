"""``taskscale stats TYPE --since 1h``: a type's history from Redis
(:mod:`taskscale.history`), one line per 10 s bucket, or ``--json``."""

from __future__ import annotations

import argparse
import json
import re
from datetime import UTC, datetime
from typing import Any

from taskscale import history
from taskscale.cli.common import add_connection_arguments, client_and_keys, guarded
from taskscale.server_clock import server_time

_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def since(text: str) -> int:
    """argparse type: a window such as 90s, 15m, 1h or 1d (at most 24 h, the history kept)."""
    match = re.fullmatch(r"(\d+)(s|m|min|h|d)?", text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a window like 90s, 15m, 1h, 1d")
    value = int(match.group(1)) * _UNITS[match.group(2) or "s"]
    if not history.BUCKET_S <= value <= history.KEEP_S:
        raise argparse.ArgumentTypeError(f"{text!r} must be between 10s and 24h")
    return value


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "stats", help="a type's history: completed, failed, queued, wait and run time per 10 s"
    )
    add_connection_arguments(p)
    p.add_argument("type", metavar="TYPE")
    p.add_argument("--since", type=since, default=3600, help="window: 90s, 15m, 1h (default), 1d")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--all", action="store_true", help="also the buckets where nothing happened (text only)"
    )
    p.set_defaults(func=guarded(_stats))


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _stats(args: argparse.Namespace) -> int:
    client, keys = client_and_keys(args)
    now = server_time(client, keys).ms
    rows = history.read(client, keys, [args.type], args.since, now_ms=now)
    if args.json:
        print(json.dumps({"type": args.type, "bucket_s": history.BUCKET_S,
                          "rows": [r.as_json() for r in rows]}))  # fmt: skip
        return 0
    total = sum(r.completed for r in rows), sum(r.failed for r in rows), sum(r.dead for r in rows)
    print(f"{args.type}: {total[0]} completed, {total[1]} failed, {total[2]} dead "
          f"in the last {args.since} s")  # fmt: skip
    print(f"{'at (UTC)':19}  {'done':>6} {'failed':>6} {'dead':>5} {'queued':>7} {'running':>7}"
          f"  {'wait p50/p95 ms':>17}  {'run p50/p95 ms':>17}")  # fmt: skip
    for r in rows:
        empty = not (r.completed or r.failed or r.dead or r.queued or r.running)
        if empty and not args.all:
            continue
        at = datetime.fromtimestamp(r.at, UTC).strftime("%Y-%m-%d %H:%M:%S")
        wait = f"{_ms(r.wait_p50_ms)}/{_ms(r.wait_p95_ms)}"
        run = f"{_ms(r.run_p50_ms)}/{_ms(r.run_p95_ms)}"
        print(f"{at:19}  {r.completed:>6} {r.failed:>6} {r.dead:>5} {r.queued:>7} {r.running:>7}"
              f"  {wait:>17}  {run:>17}")  # fmt: skip
    return 0
