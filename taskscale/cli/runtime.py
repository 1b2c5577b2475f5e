"""The runtime's subcommands: ``worker``, ``scheduler``, ``enqueue``, ``status``.

Each takes ``--redis-url`` (env ``TASKSCALE_REDIS_URL``) and ``--namespace``
(env ``TASKSCALE_NAMESPACE``).  Errors a user can fix (a wrong URL, an
unreachable server, a key of the wrong type, bad JSON) are printed as one
line on stderr with a non-zero exit code, never as a traceback (2: the
command line is wrong; 1: Redis, or a port that can't be opened here).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
import threading
from typing import TYPE_CHECKING, Any

from taskscale.cli.common import (
    UsageError,
    add_connection_arguments,
    add_setting,
    async_slots,
    client_and_keys,
    count,
    guarded,
    json_arg,
    offset,
    port,
    processes,
    seconds,
    sharded_client,
    threads,
)
from taskscale.keys import DEFAULT_PRIORITY, Keys, check_name, parse_priority
from taskscale.producer import ProducerSettings
from taskscale.scheduling.scheduler import SchedulerSettings
from taskscale.shards import ShardMap
from taskscale.worker.settings import WorkerSettings

if TYPE_CHECKING:
    from taskscale.worker.runtime import Worker

log = logging.getLogger("taskscale")


def add_parser(subparsers: Any) -> None:
    """Add worker, scheduler, enqueue and status to the ``taskscale`` CLI."""
    p = subparsers.add_parser("worker", help="run tasks of some types on N threads")
    add_connection_arguments(p)
    p.add_argument("--types", required=True, help="comma-separated task types to serve")
    W = WorkerSettings
    add_setting(p, "--threads", W, "threads", type=threads, help="tasks run at once")
    add_setting(
        p,
        "--async-slots",
        W,
        "async_slots",
        type=async_slots,
        help="async def tasks run at once on the event loop",
    )
    p.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="module that registers task functions (repeatable)",
    )
    add_setting(p, "--lease", W, "lease_s", type=seconds, help="lease seconds")
    add_setting(p, "--heartbeat", W, "heartbeat_s", type=seconds, help="heartbeat seconds")
    add_setting(p, "--grace", W, "grace_s", type=seconds, help="shutdown grace, s")
    add_setting(p, "--idle-wait", W, "idle_wait_s", type=seconds, help="longest idle BLPOP, s")
    add_setting(
        p,
        "--max-lost",
        W,
        "max_lost",
        type=count,
        help="dead-letter a task whose worker died this many times running it",
    )
    add_setting(
        p,
        "--dead-letter-cap",
        W,
        "dead_letter_cap",
        type=offset,
        help="dead letters kept per type, oldest dropped beyond; 0 = no cap, "
        "env TASKSCALE_DEAD_LETTER_CAP",
    )
    add_setting(
        p,
        "--recent-cap",
        W,
        "recent_cap",
        type=offset,
        help="recently finished runs kept per type for the console (0..10000, 0 = none), "
        "env TASKSCALE_RECENT_CAP",
    )
    p.add_argument(
        "--once",
        action="store_true",
        help="claim one task, run it, record its outcome and exit 0 (a Job pod's worker)",
    )
    add_setting(
        p,
        "--once-wait",
        W,
        "once_wait_s",
        type=seconds,
        help="with --once: seconds to wait for a task before exiting 0 without one",
    )
    p.add_argument("--worker-id", default=None, help="worker id (default pod-pid-random)")
    p.add_argument("--metrics-port", type=port, default=None, help="serve Prometheus metrics here")
    p.add_argument(
        "--processes",
        type=processes,
        default=1,
        help="worker processes, or auto: the container's CPU limit (default 1; docs/operating.md)",
    )
    p.set_defaults(func=guarded(_worker), worker_parser=p)

    p = subparsers.add_parser("scheduler", help="promote due delayed tasks and reap dead workers")
    add_connection_arguments(p)
    S = SchedulerSettings
    add_setting(p, "--lease", S, "lease_s", type=seconds, help="worker lease, s (reap period/2)")
    add_setting(
        p, "--batch", S, "promote_batch", type=count, help="most promoted per type per call"
    )
    add_setting(p, "--max-sleep", S, "max_sleep_s", type=seconds, help="longest sleep, seconds")
    add_setting(
        p,
        "--workflow-lost-after",
        S,
        "workflow_lost_after_s",
        type=seconds,
        help="a workflow step ready this long whose task is nowhere fails its workflow, s",
    )
    p.add_argument(
        "--metrics-port",
        type=port,
        default=None,
        help="serve Prometheus metrics, /healthz and /readyz here",
    )
    p.set_defaults(func=guarded(_scheduler))

    p = subparsers.add_parser("enqueue", help="enqueue tasks")
    add_connection_arguments(p)
    p.add_argument("type", metavar="TYPE", help="task type")
    p.add_argument("--args", default="[]", help="JSON array of positional arguments")
    p.add_argument("--kwargs", default="{}", help="JSON object of keyword arguments")
    p.add_argument("--delay", type=seconds, default=0.0, help="seconds before it is due")
    p.add_argument(
        "--priority", default=str(DEFAULT_PRIORITY), help="0-9 (0 most urgent) or high/normal/low"
    )
    p.add_argument("--max-retries", type=offset, default=None, help="retries before dead-lettering")
    p.add_argument(
        "--timeout", type=seconds, default=None, help="run timeout, seconds (default: the task's)"
    )
    p.add_argument("--count", type=count, default=1, help="enqueue this many copies")
    P = ProducerSettings
    add_setting(p, "--max-bytes", P, "max_payload_bytes", type=count, help="size limit, bytes")
    add_setting(
        p,
        "--wait-replicas",
        P,
        "wait_replicas",
        type=offset,
        help="WAIT until this many replicas have the task (0 = don't; docs/redis.md)",
    )
    p.set_defaults(func=guarded(_enqueue))

    p = subparsers.add_parser("status", help="queues, delayed, active and workers per type")
    add_connection_arguments(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=guarded(_status))


def _worker(args: argparse.Namespace) -> int:
    import signal

    from taskscale.tasks import registry
    from taskscale.worker.runtime import run_worker

    early: list[int] = []  # a SIGTERM while still starting up is honoured, not fatal
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda signum, _frame: early.append(signum))

    # Like `rq worker` and `celery -A`: a module beside the current directory
    # imports without PYTHONPATH (python -m puts the cwd first; a console
    # script does not).
    if args.imports and os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    for module in args.imports:
        if not all(part.isidentifier() for part in module.split(".")):
            raise UsageError(f"invalid task module name {module!r}: use a dotted name, app.tasks")
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise UsageError(f"cannot import task module {module!r}: {exc}") from None
    settings = WorkerSettings(
        types=tuple(t.strip() for t in args.types.split(",") if t.strip()),
        threads=args.threads,
        async_slots=args.async_slots,
        lease_s=args.lease,
        heartbeat_s=args.heartbeat,
        grace_s=args.grace,
        idle_wait_s=args.idle_wait,
        max_lost=args.max_lost,
        dead_letter_cap=args.dead_letter_cap,
        recent_cap=args.recent_cap,
        worker_id=args.worker_id,
        once=args.once,
        once_wait_s=args.once_wait,
    )
    missing = [t for t in settings.types if t not in registry]
    if missing:  # a typo or a forgotten --import must not dead-letter the type's tasks
        imported = ", ".join(args.imports) or "none"
        raise UsageError(
            f"no function registered for {', '.join(missing)} (modules imported: {imported}); "
            "name the module that defines it with --import, or fix --types"
        )
    keys = ShardMap.parse(args.namespace).only_namespace(settings.types)
    if args.once and args.processes != 1:
        raise UsageError("--once runs one task in one process: leave out --processes")
    if args.processes > 1:  # a supervisor of worker processes (taskscale/worker/supervisor.py)
        from taskscale.worker.supervisor import run_supervisor

        return run_supervisor(args.worker_parser, args, early_signals=early)
    client, _ = sharded_client(args)

    def replay(worker: Worker) -> None:
        for _ in early:
            worker.request_stop()

    return run_worker(client, settings, keys=keys, metrics_port=args.metrics_port, on_ready=replay)


def _scheduler(args: argparse.Namespace) -> int:
    from taskscale.scheduling.scheduler import Scheduler, SchedulerSettings
    from taskscale.scheduling.scheduler_metrics import SchedulerMetrics
    from taskscale.signals import on_stop_signals

    settings = SchedulerSettings(  # checked before Redis is dialled
        promote_batch=args.batch,
        max_sleep_s=args.max_sleep,
        lease_s=args.lease,
        workflow_lost_after_s=args.workflow_lost_after,
    )
    client, shards = sharded_client(args)
    # one metrics registry for the process: every namespace's scheduler counts into it
    metrics = SchedulerMetrics(lease_s=args.lease)
    if args.metrics_port is not None:
        metrics.serve(port=args.metrics_port)
    # one scheduler per namespace (shard), all in this process
    schedulers = [
        Scheduler(client, keys=Keys(ns), settings=settings, metrics=metrics)
        for ns in shards.namespaces
    ]

    def stop(_signum: int) -> None:
        for scheduler in schedulers:
            scheduler.stop()

    on_stop_signals(stop)  # on a thread: Scheduler.stop takes locks
    log.info("scheduler started (namespace %s)", ",".join(shards.namespaces))
    threads = [threading.Thread(target=s.run, daemon=True) for s in schedulers[1:]]
    for thread in threads:
        thread.start()
    code = schedulers[0].run()
    for thread in threads:
        thread.join()
    return code


def _enqueue(args: argparse.Namespace) -> int:
    from taskscale.options import TaskOptions
    from taskscale.producer import Call, Producer

    most = args.max_bytes  # an argument as large as the envelope may be
    call = Call(
        json_arg(args.args, list, "--args", max_bytes=most),
        json_arg(args.kwargs, dict, "--kwargs", max_bytes=most),
    )
    # Everything the user typed is checked before Redis is dialled, so a
    # typo is reported as such even when the server is down.
    check_name("task type", args.type)
    parse_priority(args.priority)
    try:
        options = TaskOptions(timeout=args.timeout)
    except ValueError as exc:
        raise UsageError(f"--timeout: {exc}") from None
    client, keys = client_and_keys(args)
    producer = Producer(
        client,
        keys=keys,
        settings=ProducerSettings(
            max_payload_bytes=args.max_bytes, wait_replicas=args.wait_replicas
        ),
    )
    ids = producer.enqueue_many(
        args.type,
        [call] * args.count,
        delay=args.delay,
        priority=args.priority,
        max_retries=args.max_retries,
        options=options,
    )
    for task_id in ids:
        print(task_id)
    return 0


def _status(args: argparse.Namespace) -> int:
    from taskscale.status import collect_namespaces, render

    client, shards = sharded_client(args)
    status = collect_namespaces(client, shards.namespaces)
    if args.json:
        for t in status["types"].values():
            t.pop("stats", None)
        print(json.dumps(status, indent=2, sort_keys=True))
    else:
        print(render(status))
    return 0
