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
import math
import os
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import redis

from taskscale.connection import (
    DEFAULT_REDIS_URL,
    REDIS_URL_ENV,
    RedisUnavailable,
    check,
    connect,
    describe_error,
)
from taskscale.keys import (
    DEFAULT_DEAD_LETTER_CAP,
    DEFAULT_MAX_PAYLOAD_BYTES,
    DEFAULT_NAMESPACE,
    NAMESPACE_ENV,
    Keys,
    check_name,
    parse_priority,
)
from taskscale.listening import ListenError
from taskscale.logs import add_logging_arguments, configure_logging
from taskscale.producer import MAX_DELAY_S
from taskscale.redis_urls import RedisClient
from taskscale.shards import ShardMap

if TYPE_CHECKING:
    from taskscale.worker import Worker

log = logging.getLogger("taskscale")


class UsageError(Exception):
    """A mistake in the command line; printed as one line."""


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--redis-url",
        default=os.environ.get(REDIS_URL_ENV, DEFAULT_REDIS_URL),
        help=f"Redis URL (env {REDIS_URL_ENV}; default {DEFAULT_REDIS_URL})",
    )
    parser.add_argument(
        "--namespace",
        default=os.environ.get(NAMESPACE_ENV, DEFAULT_NAMESPACE),
        help=f"key namespace, or several (a,b,c) to spread types over shards: "
        f"docs/redis.md (env {NAMESPACE_ENV}; default {DEFAULT_NAMESPACE})",
    )
    add_logging_arguments(parser)


#: The longest duration an option takes (10 years): beyond it a number is a
#: typo, and Redis's integer milliseconds would overflow.
MAX_SECONDS = MAX_DELAY_S
#: The largest count an option takes.
MAX_COUNT = 1_000_000_000
#: The most threads a worker runs tasks on.
MAX_THREADS = 1024
#: The most ``async def`` tasks a worker runs at once.
MAX_ASYNC_SLOTS = 100_000


def seconds(text: str) -> float:
    """argparse type: a finite number of seconds >= 0 (not nan, inf or -1),
    at most :data:`MAX_SECONDS`."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number of seconds >= 0")
    if value > MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"{text!r} must be at most {MAX_SECONDS} s (10 years)")
    return value


def whole(text: str, *, least: int = 0, most: int = MAX_COUNT) -> int:
    """A whole number from ``least`` to ``most``, or an argparse error naming it."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least {least}")
    if value > most:
        raise argparse.ArgumentTypeError(f"{text!r} must be at most {most}")
    return value


def count(text: str) -> int:
    """argparse type: a whole number from 1 to :data:`MAX_COUNT`."""
    return whole(text, least=1)


def offset(text: str) -> int:
    """argparse type: a whole number from 0 to :data:`MAX_COUNT`."""
    return whole(text, least=0)


def threads(text: str) -> int:
    """argparse type: a worker's thread count, 1 to :data:`MAX_THREADS`."""
    return whole(text, least=1, most=MAX_THREADS)


def async_slots(text: str) -> int:
    """argparse type: how many ``async def`` tasks a worker runs at once."""
    return whole(text, least=1, most=MAX_ASYNC_SLOTS)


def port(text: str) -> int:
    """argparse type: a TCP port, 0-65535 (0: any free port)."""
    return whole(text, least=0, most=65535)


def processes(text: str) -> int:
    """argparse type: a number of worker processes, or ``auto`` (the CPU limit)."""
    if text.strip().lower() == "auto":
        from taskscale.cpu_limit import auto_processes

        return min(auto_processes(), MAX_THREADS)
    return whole(text, least=1, most=MAX_THREADS)


def add_parser(subparsers: Any) -> None:
    """Add worker, scheduler, enqueue and status to the ``taskscale`` CLI."""
    p = subparsers.add_parser("worker", help="run tasks of some types on N threads")
    _common(p)
    p.add_argument("--types", required=True, help="comma-separated task types to serve")
    p.add_argument("--threads", type=threads, default=4, help="tasks run at once (default 4)")
    p.add_argument(
        "--async-slots",
        type=async_slots,
        default=100,
        help="async def tasks run at once on the event loop (default 100)",
    )
    p.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="module that registers task functions (repeatable)",
    )
    p.add_argument("--lease", type=seconds, default=10.0, help="lease seconds (default 10)")
    p.add_argument("--heartbeat", type=seconds, default=2.0, help="heartbeat seconds (default 2)")
    p.add_argument("--grace", type=seconds, default=30.0, help="shutdown grace, s (default 30)")
    p.add_argument("--idle-wait", type=seconds, default=2.0, help="longest idle BLPOP, seconds")
    p.add_argument(
        "--max-lost",
        type=count,
        default=5,
        help="dead-letter a task whose worker died this many times running it (default 5)",
    )
    p.add_argument(
        "--dead-letter-cap",
        type=offset,
        default=DEFAULT_DEAD_LETTER_CAP,
        help="dead letters kept per type, oldest dropped beyond (0 = no cap; "
        f"env TASKSCALE_DEAD_LETTER_CAP; default {DEFAULT_DEAD_LETTER_CAP})",
    )
    p.add_argument("--worker-id", default=None, help="worker id (default pod-pid-random)")
    p.add_argument("--metrics-port", type=port, default=None, help="serve Prometheus metrics here")
    p.add_argument(
        "--processes",
        type=processes,
        default=1,
        help="worker processes, or auto: the container's CPU limit (default 1; docs/operating.md)",
    )
    p.set_defaults(func=_guarded(_worker), worker_parser=p)

    p = subparsers.add_parser("scheduler", help="promote due delayed tasks and reap dead workers")
    _common(p)
    p.add_argument("--lease", type=seconds, default=10.0, help="worker lease, s (reap period/2)")
    p.add_argument("--batch", type=count, default=1000, help="most promoted per type per call")
    p.add_argument("--max-sleep", type=seconds, default=1.0, help="longest sleep, seconds")
    p.add_argument(
        "--metrics-port",
        type=port,
        default=None,
        help="serve Prometheus metrics, /healthz and /readyz here",
    )
    p.set_defaults(func=_guarded(_scheduler))

    p = subparsers.add_parser("enqueue", help="enqueue tasks")
    _common(p)
    p.add_argument("type", metavar="TYPE", help="task type")
    p.add_argument("--args", default="[]", help="JSON array of positional arguments")
    p.add_argument("--kwargs", default="{}", help="JSON object of keyword arguments")
    p.add_argument("--delay", type=seconds, default=0.0, help="seconds before it is due")
    p.add_argument("--priority", default="5", help="0-9 (0 most urgent) or high/normal/low")
    p.add_argument("--max-retries", type=offset, default=None, help="retries before dead-lettering")
    p.add_argument(
        "--timeout", type=seconds, default=None, help="run timeout, seconds (default: the task's)"
    )
    p.add_argument("--count", type=count, default=1, help="enqueue this many copies")
    p.add_argument("--max-bytes", type=count, default=DEFAULT_MAX_PAYLOAD_BYTES, help="size limit")
    p.add_argument(
        "--wait-replicas",
        type=offset,
        default=0,
        help="WAIT until this many replicas have the task (0 = don't; docs/redis.md)",
    )
    p.set_defaults(func=_guarded(_enqueue))

    p = subparsers.add_parser("status", help="queues, delayed, active and workers per type")
    _common(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_guarded(_status))


def _guarded(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Run a subcommand; turn the errors a user can fix into one line."""

    def guarded(args: argparse.Namespace) -> int:
        configure_logging(args)
        try:
            return run(args)
        except (UsageError, ValueError, RedisUnavailable) as exc:
            print(f"taskscale {args.command}: {exc}", file=sys.stderr)
            return 2 if isinstance(exc, UsageError | ValueError) else 1
        except ListenError as exc:  # a metrics or dashboard port
            print(f"taskscale {args.command}: {exc}", file=sys.stderr)
            return exc.exit_code
        except redis.RedisError as exc:
            print(f"taskscale {args.command}: {describe_error(exc)}", file=sys.stderr)
            return 1

    return guarded


def _client(args: argparse.Namespace) -> tuple[RedisClient, Keys]:
    """A checked client and the namespace of the command: with several
    namespaces (shards), the one of its task type (``args.type``)."""
    shards = ShardMap.parse(args.namespace)
    task_type = getattr(args, "type", None)
    if not shards.sharded:
        keys = Keys(shards.namespaces[0])
    elif isinstance(task_type, str):
        keys = shards.keys_for(task_type)
    else:
        raise UsageError(
            f"--namespace lists {len(shards.namespaces)} namespaces; "
            f"{args.command} works on one: name it"
        )
    client, _ = _sharded_client(args)
    return client, keys


def _sharded_client(args: argparse.Namespace) -> tuple[RedisClient, ShardMap]:
    shards = ShardMap.parse(args.namespace)
    client = connect(args.redis_url)
    check(client)
    return client, shards


def _worker(args: argparse.Namespace) -> int:
    import signal

    from taskscale.tasks import registry
    from taskscale.worker import WorkerSettings, run_worker

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
        worker_id=args.worker_id,
    )
    missing = [t for t in settings.types if t not in registry]
    if missing:
        log.warning(
            "no function registered for %s (use --import): such tasks will be dead-lettered",
            ",".join(missing),
        )
    keys = ShardMap.parse(args.namespace).only_namespace(settings.types)
    if args.processes > 1:  # a supervisor of worker processes (taskscale/supervisor.py)
        from taskscale.supervisor import run_supervisor

        return run_supervisor(args.worker_parser, args, early_signals=early)
    client, _ = _sharded_client(args)

    def replay(worker: Worker) -> None:
        for _ in early:
            worker.request_stop()

    return run_worker(client, settings, keys=keys, metrics_port=args.metrics_port, on_ready=replay)


def _scheduler(args: argparse.Namespace) -> int:
    from taskscale.scheduler import Scheduler, SchedulerSettings
    from taskscale.scheduler_metrics import SchedulerMetrics
    from taskscale.signals import on_stop_signals

    settings = SchedulerSettings(  # checked before Redis is dialled
        promote_batch=args.batch, max_sleep_s=args.max_sleep, lease_s=args.lease
    )
    client, shards = _sharded_client(args)
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


def _json_arg(text: str, kind: type, flag: str) -> Any:
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except ValueError as exc:
        raise UsageError(f"{flag} is not valid JSON: {exc}") from None
    if not isinstance(value, kind):
        raise UsageError(f"{flag} must be a JSON {'array' if kind is list else 'object'}")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (JSON has no NaN or Infinity)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is too large for a JSON number")
    return value


def _enqueue(args: argparse.Namespace) -> int:
    from taskscale.options import TaskOptions
    from taskscale.producer import Call, Producer, ProducerSettings

    call = Call(_json_arg(args.args, list, "--args"), _json_arg(args.kwargs, dict, "--kwargs"))
    # Everything the user typed is checked before Redis is dialled, so a
    # typo is reported as such even when the server is down.
    check_name("task type", args.type)
    parse_priority(args.priority)
    try:
        options = TaskOptions(timeout=args.timeout)
    except ValueError as exc:
        raise UsageError(f"--timeout: {exc}") from None
    client, keys = _client(args)
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

    client, shards = _sharded_client(args)
    status = collect_namespaces(client, shards.namespaces)
    if args.json:
        for t in status["types"].values():
            t.pop("stats", None)
        print(json.dumps(status, indent=2, sort_keys=True))
    else:
        print(render(status))
    return 0
