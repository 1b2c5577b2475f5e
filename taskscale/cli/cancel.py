"""``taskscale cancel ID [--type TYPE] [--fanout F]``: remove a queued or
delayed task (or a fan-out's pending sub-task), or ask a running one to stop
(see :mod:`taskscale.cancellation`)."""

from __future__ import annotations

import argparse
from typing import Any

from taskscale.cancellation import cancel
from taskscale.cli.common import add_connection_arguments, client_and_keys, guarded


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "cancel", help="cancel a task: removed if queued or delayed, flagged if running"
    )
    add_connection_arguments(p)
    p.add_argument("id", metavar="ID", help="the task id (printed by taskscale enqueue)")
    p.add_argument("--type", default=None, help="the task's type, to narrow the search")
    p.add_argument(
        "--fanout",
        default=None,
        metavar="F",
        help="the fan-out the task is a sub-task of: also finds one still waiting for a slot",
    )
    p.set_defaults(func=guarded(_cancel))


def _cancel(args: argparse.Namespace) -> int:
    client, keys = client_and_keys(args)
    result = cancel(args.id, client=client, task_type=args.type, fanout=args.fanout, keys=keys)
    if result.state == "pending":
        print(f"task {args.id}: cancelled (pending in fan-out {result.where}, removed)")
        return 0
    if result.removed:
        print(f"task {args.id}: cancelled ({result.state} {result.where}, removed)")
        return 0
    if result.state == "running":
        print(
            f"task {args.id}: running on worker {result.where}; asked to stop "
            "(the task function sees current_task().cancelled)"
        )
        return 0
    print(f"task {args.id}: not queued, delayed or running (finished, or never enqueued)")
    return 3
