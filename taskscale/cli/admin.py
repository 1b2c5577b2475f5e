"""The operators' subcommands: ``dead``, ``delayed``, ``queue``, ``task``, ``types``.

Thin wrappers over :mod:`taskscale.admin` (each change one atomic script):

    taskscale dead list TYPE [--start N] [--count N] [--json]
    taskscale dead requeue TYPE [--id ID ...]      # no --id: every dead letter
    taskscale dead purge TYPE [--id ID ...] [--yes]
    taskscale delayed list TYPE | run TYPE ID | delete TYPE ID [--yes]
    taskscale queue purge TYPE [--delayed] [--yes]
    taskscale task ID [--type TYPE] [--json]
    taskscale types forget TYPE [--force [--yes]]
    taskscale types pause TYPE | resume TYPE | paused

Errors are one line on stderr, as in :mod:`taskscale.cli.runtime`.  What
deletes says what it will delete (counts) and asks on a terminal, or needs
``--yes`` (``common.confirm``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from typing import Any

from taskscale import admin, pausing
from taskscale.cli.common import (
    UsageError,
    add_connection_arguments,
    add_yes_argument,
    client_and_keys,
    confirm,
    count,
    guarded,
    offset,
)
from taskscale.keys import Keys
from taskscale.redis_urls import RedisClient
from taskscale.scheduling.schedules import Schedules

#: Entries ``dead list`` and ``delayed list`` show unless told (--count).
SHOWN = 20


def add_parser(subparsers: Any) -> None:
    """Add dead, delayed, queue, task and types to the ``taskscale`` CLI."""
    dead = subparsers.add_parser("dead", help="list, requeue or purge dead letters of a type")
    dead_sub = dead.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = dead_sub.add_parser("list", help="dead letters, oldest first")
    add_connection_arguments(p)
    p.add_argument("type", metavar="TYPE")
    p.add_argument("--start", type=offset, default=0, help="skip this many (default 0)")
    p.add_argument("--count", type=count, default=SHOWN, help=f"show this many (default {SHOWN})")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(func=guarded(_dead_list))
    for action, what in (("requeue", "back to the tail of its queue"), ("purge", "delete")):
        p = dead_sub.add_parser(action, help=f"{what}: every dead letter of TYPE, or --id ones")
        add_connection_arguments(p)
        p.add_argument("type", metavar="TYPE")
        p.add_argument("--id", dest="ids", action="append", metavar="ID", help="repeatable")
        if action == "purge":
            add_yes_argument(p)
        p.set_defaults(func=guarded(_dead_op), op=action)

    delayed = subparsers.add_parser("delayed", help="list delayed tasks, run one now, delete one")
    delayed_sub = delayed.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = delayed_sub.add_parser("list", help="delayed tasks, soonest first")
    add_connection_arguments(p)
    p.add_argument("type", metavar="TYPE")
    p.add_argument("--count", type=count, default=SHOWN, help=f"show this many (default {SHOWN})")
    p.set_defaults(func=guarded(_delayed_list))
    for action in ("run", "delete"):
        p = delayed_sub.add_parser(action, help=f"{action} one delayed task now")
        add_connection_arguments(p)
        p.add_argument("type", metavar="TYPE")
        p.add_argument("id", metavar="ID")
        if action == "delete":
            add_yes_argument(p)
        p.set_defaults(func=guarded(_delayed_op), op=action)

    queue = subparsers.add_parser("queue", help="purge the ready tasks of a type")
    queue_sub = queue.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = queue_sub.add_parser("purge", help="delete every ready task of TYPE")
    add_connection_arguments(p)
    p.add_argument("type", metavar="TYPE")
    p.add_argument("--delayed", action="store_true", help="delete its delayed tasks too")
    add_yes_argument(p)
    p.set_defaults(func=guarded(_queue_purge))

    p = subparsers.add_parser("task", help="where a task is now: queued, delayed, running...")
    add_connection_arguments(p)
    p.add_argument("id", metavar="ID")
    p.add_argument("--type", default=None, help="the task's type (narrows the search)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=guarded(_task))

    types = subparsers.add_parser("types", help="pause, resume or forget a task type")
    types_sub = types.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = types_sub.add_parser("forget", help="drop TYPE from status, scheduler and controller")
    add_connection_arguments(p)
    p.add_argument("type", metavar="TYPE")
    p.add_argument("--force", action="store_true", help="delete its ready and delayed tasks")
    add_yes_argument(p)
    p.set_defaults(func=guarded(_forget))
    for action, what in (
        ("pause", "workers stop claiming TYPE (its tasks stay queued; running ones finish)"),
        ("resume", "workers claim TYPE again"),
    ):
        p = types_sub.add_parser(action, help=what)
        add_connection_arguments(p)
        p.add_argument("type", metavar="TYPE")
        p.set_defaults(func=guarded(_pause_or_resume))
    p = types_sub.add_parser("paused", help="the paused types, and since when")
    add_connection_arguments(p)
    p.set_defaults(func=guarded(_paused))


def _when(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000)) + "Z" if ms else "?"


def _dead_list(args: argparse.Namespace) -> int:
    client, keys = client_and_keys(args)
    letters = admin.dead_list(client, keys, args.type, start=args.start, count=args.count)
    total = int(client.llen(keys.dead(args.type)))
    if args.json:
        for d in letters:
            print(json.dumps(dataclasses.asdict(d), sort_keys=True))
        return 0
    for d in letters:
        call = json.dumps([d.fields.get("args", []), d.fields.get("kwargs", {})])
        print(f"{d.task_id or '(undecodable)'}  {_when(d.failed_ms)}  {d.error}")
        print(f"    args/kwargs {call[:200]}  retries {d.fields.get('attempts', 0)}")
        for line in d.traceback.splitlines()[-6:]:
            print(f"    | {line}")
    print(f"{len(letters)} of {total} dead letter(s) of {args.type} shown")
    return 0


def _dead_op(args: argparse.Namespace) -> int:
    client, keys = client_and_keys(args)
    if args.op == "purge":
        total = int(client.llen(keys.dead(args.type)))
        which = f"those of {len(args.ids)} id(s) among " if args.ids else ""
        if total and not confirm(args, f"{which}{total} dead letter(s) of {args.type}"):
            return 1
    run = admin.dead_requeue if args.op == "requeue" else admin.dead_purge
    n = run(client, keys, args.type, ids=args.ids)
    verb = "requeued" if args.op == "requeue" else "purged"
    print(f"{verb} {n} dead letter(s) of {args.type}")
    if args.ids and n < len(args.ids):
        print(f"{len(args.ids) - n} id(s) not among the dead letters of {args.type}")
        return 1
    return 0


def _delayed_list(args: argparse.Namespace) -> int:
    client, keys = client_and_keys(args)
    for d in admin.delayed_list(client, keys, args.type, count=args.count):
        print(f"{d.task_id}  due {_when(d.due_ms)}  retries {d.fields.get('attempts', 0)}")
    return 0


def _delayed_op(args: argparse.Namespace) -> int:
    client, keys = client_and_keys(args)
    run = admin.delayed_run_now if args.op == "run" else admin.delayed_delete
    if args.op == "delete" and not confirm(args, f"delayed task {args.id} of {args.type}"):
        return 1
    if not run(client, keys, args.type, args.id):
        raise UsageError(f"task {args.id} is not among the delayed tasks of {args.type}")
    print(f"{'made ready' if args.op == 'run' else 'deleted'}: {args.id}")
    return 0


def _queue_purge(args: argparse.Namespace) -> int:
    client, keys = client_and_keys(args)
    removes = _tasks_of(client, keys, args.type, delayed=args.delayed)
    if removes and not confirm(args, removes):
        return 1
    n = admin.queue_purge(client, keys, args.type, include_delayed=args.delayed)
    print(f"purged {n} {'ready and delayed' if args.delayed else 'ready'} task(s) of {args.type}")
    return 0


def _task(args: argparse.Namespace) -> int:
    client, keys = client_and_keys(args)
    try:
        info = admin.task_info(client, keys, args.id, task_type=args.type)
    except admin.LookupLimitReached as exc:
        raise UsageError(str(exc)) from None
    if info is None:
        doc: dict[str, Any] = {"id": args.id, "state": "unknown"}
        text = (
            f"task {args.id}: not queued, delayed, running or dead -- finished (only RPC "
            "tasks keep a result, until read or expired) or never enqueued"
        )
    else:
        doc = dataclasses.asdict(info)
        text = _describe(info)
    print(json.dumps(doc, sort_keys=True) if args.json else text)
    return 0 if info is not None else 3


def _describe(info: admin.TaskInfo) -> str:
    head = f"task {info.task_id} ({info.task_type or '?'}): {info.state}"
    if info.state == "running":
        return f"{head} on worker {info.where}"
    if info.state == "queued":
        return f"{head} at priority {info.where}"
    if info.state == "delayed":
        return f"{head} until {_when(info.due_ms or 0)}"
    if info.state == "cancelled":
        return f"{head} {info.where}"
    if info.state == "dead":
        lines = [f"{head}: {info.error}"]
        lines += [f"  | {line}" for line in info.traceback.splitlines()]
        return "\n".join(lines)
    if info.ok:
        return f"{head}, result {json.dumps(info.result)}"
    return f"{head}, failed: {info.error}"


def _tasks_of(client: RedisClient, keys: Keys, task_type: str, *, delayed: bool) -> str:
    """What purging ``task_type`` deletes, in counts ("" for nothing): its
    ready tasks, with ``delayed`` its delayed ones and the schedules whose
    pending run is among them."""
    ready = sum(int(client.llen(q)) for q in keys.queues(task_type))
    later = int(client.zcard(keys.delayed(task_type))) if delayed else 0
    if not ready and not later:
        return ""
    text = f"{ready} ready" + (f" and {later} delayed" if delayed else "")
    text += f" task(s) of {task_type}"
    if later:
        runs = [
            s.name
            for s in Schedules(client, keys=keys).all()
            if s.task_type == task_type and s.next_ms and not s.paused
        ]
        if runs:
            text += f", including the pending run of schedule(s) {', '.join(runs)}"
    return text


def _pause_or_resume(args: argparse.Namespace) -> int:
    client, keys = client_and_keys(args)
    if args.action == "pause":
        changed = pausing.pause_type(args.type, client=client, keys=keys)
        print(f"paused task type {args.type}" if changed else f"{args.type} was already paused")
    else:
        changed = pausing.resume_type(args.type, client=client, keys=keys)
        print(f"resumed task type {args.type}" if changed else f"{args.type} was not paused")
    return 0


def _paused(args: argparse.Namespace) -> int:
    client, keys = client_and_keys(args)
    for name, since in pausing.paused_types(client=client, keys=keys).items():
        print(f"{name}\tpaused since {_when(since)}")
    return 0


def _forget(args: argparse.Namespace) -> int:
    client, keys = client_and_keys(args)
    if args.force and not int(client.hget(keys.active, args.type) or 0):
        removes = _tasks_of(client, keys, args.type, delayed=True)
        if removes and not confirm(args, removes):
            return 1
    found = admin.forget_type_checked(client, keys, args.type, force=args.force)
    if found.forgotten:
        print(f"forgot task type {args.type}")
        return 0
    if found.running:
        raise UsageError(f"{args.type} has {found.running} task(s) running; try again later")
    raise UsageError(
        f"{args.type} has {found.queued} ready and {found.delayed} delayed task(s); "
        "--force deletes them"
    )
