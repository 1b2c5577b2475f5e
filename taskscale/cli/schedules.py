"""``taskscale schedules add|list|remove|pause|resume``: periodic schedules
from the command line (see :mod:`taskscale.scheduling.schedules`)."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from taskscale.cli.common import (
    UsageError,
    add_connection_arguments,
    add_yes_argument,
    client_and_keys,
    confirm,
    guarded,
    json_arg,
    seconds,
)
from taskscale.keys import DEFAULT_PRIORITY, check_name, check_schedule_name, parse_priority
from taskscale.options import DEFAULT_MAX_RETRIES
from taskscale.scheduling.schedule_times import timing
from taskscale.scheduling.schedules import ScheduleInfo, Schedules, render
from taskscale.server_clock import server_time


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("schedules", help="periodic schedules: add, list, pause, remove")
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    a = sub.add_parser("add", help="create or replace a schedule (same definition: no change)")
    add_connection_arguments(a)
    a.add_argument("name", metavar="NAME", help="schedule name (1-100 of A-Z a-z 0-9 _ . -)")
    a.add_argument("type", metavar="TYPE", help="task type to enqueue")
    when = a.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", help='cron expression, e.g. "*/5 * * * *" (6 fields: seconds)')
    when.add_argument("--every", type=seconds, help="interval in seconds (from the epoch)")
    a.add_argument("--tz", default=None, help="time zone of --cron (IANA name; default UTC)")
    a.add_argument("--args", default="[]", help="JSON array of positional arguments")
    a.add_argument("--kwargs", default="{}", help="JSON object of keyword arguments")
    a.add_argument(
        "--priority",
        default=str(DEFAULT_PRIORITY),
        help="0-9 (0 most urgent) or high/normal/low",
    )
    a.add_argument(
        "--max-retries",
        type=int,
        default=None,
        help=f"retries of each occurrence (default: the task's own, else {DEFAULT_MAX_RETRIES})",
    )
    a.add_argument(
        "--catch-up",
        action="store_true",
        help="after downtime run every missed occurrence (default: the missed ones once)",
    )
    a.set_defaults(func=guarded(_add))

    ls = sub.add_parser("list", help="every schedule, its next occurrence and state")
    add_connection_arguments(ls)
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    ls.set_defaults(func=guarded(_list))

    for action, text in (
        ("remove", "delete a schedule and its pending occurrence"),
        ("pause", "stop a schedule (its pending occurrence is withdrawn)"),
        ("resume", "start a paused schedule again from the next occurrence"),
    ):
        c = sub.add_parser(action, help=text)
        add_connection_arguments(c)
        c.add_argument("name", metavar="NAME", help="schedule name")
        if action == "remove":
            add_yes_argument(c)
        c.set_defaults(func=guarded(_control))


def _add(args: argparse.Namespace) -> int:
    # Everything typed is checked before Redis is dialled.
    check_schedule_name(args.name)
    check_name("task type", args.type)
    parse_priority(args.priority)
    timing(cron=args.cron, every=args.every, tz=args.tz, catch_up=args.catch_up)
    if args.max_retries is not None and args.max_retries < 0:
        raise UsageError(f"--max-retries must be >= 0, not {args.max_retries}")
    call_args = json_arg(args.args, list, "--args")
    call_kwargs = json_arg(args.kwargs, dict, "--kwargs")
    client, keys = client_and_keys(args)
    outcome, info = Schedules(client, keys=keys).add(
        args.name,
        args.type,
        *call_args,
        cron=args.cron,
        every=args.every,
        tz=args.tz,
        priority=args.priority,
        max_retries=args.max_retries,
        catch_up=args.catch_up,
        **call_kwargs,
    )
    print(f"schedule {info.name}: {outcome}; {_when(info)}")
    return 0


def _list(args: argparse.Namespace) -> int:
    client, keys = client_and_keys(args)
    found = Schedules(client, keys=keys).all()
    if args.json:
        print(json.dumps([s.as_dict() for s in found], indent=2, sort_keys=True))
        return 0
    now_s = server_time(client, keys).unix_s
    print("\n".join(render([s.as_dict() for s in found], now_s=now_s)))
    return 0


def _control(args: argparse.Namespace) -> int:
    check_schedule_name(args.name)
    client, keys = client_and_keys(args)
    schedules = Schedules(client, keys=keys)
    if args.action == "remove":
        info = schedules.get(args.name)
        pending = " and its pending run" if info is not None and info.next_ms else ""
        if info is not None and not confirm(args, f"schedule {args.name}{pending}"):
            return 1
    result = getattr(schedules, args.action)(args.name)
    if result == "missing":
        print(f"schedule {args.name}: no such schedule")
        return 1
    past = {"remove": "removed", "pause": "paused", "resume": "resumed"}[args.action]
    if result == "unchanged":
        print(f"schedule {args.name}: already {past}")
        return 0
    info = schedules.get(args.name)
    tail = f"; {_when(info)}" if info is not None and not info.paused else ""
    print(f"schedule {args.name}: {past}{tail}")
    return 0


def _when(info: ScheduleInfo) -> str:
    if info.error:
        return f"broken: {info.error}"
    if info.paused:
        return "paused"
    if not info.next_ms:
        return "next occurrence not yet computed (no scheduler yet)"
    at = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(info.next_ms / 1000))
    return f"next occurrence {at} UTC"
