"""RQ: ``Queue.enqueue_many`` (one pipeline per chunk), ``SimpleWorker``.

RQ's default worker forks a work horse per job (hundreds of jobs/s at best);
``rq.worker.SimpleWorker`` runs jobs in the worker process and is what one
would choose for short tasks, so that is the one measured. JSON serializer
(RQ's default is pickle). Delayed tasks: ``Queue.enqueue_at`` and a worker
started ``--with-scheduler`` (RQ's scheduler polls once per second).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib.metadata import version as _dist_version

from redis import Redis
from rq import Queue
from rq.serializers import JSONSerializer

from bench.peers import ENQUEUE_CHUNK, QUEUE_NAME, probe

ENQUEUE_API = "Queue.enqueue_many(Queue.prepare_data(...)) in chunks of 1000 (one pipeline each)"
WORKER_CLI = "rq worker -w rq.worker.SimpleWorker -S json -q (one process per worker)"
DELAY_API = "Queue.enqueue_at + rq worker --with-scheduler (polls every 1 s)"


def noop() -> None:
    probe.body()
    probe.hit()


def late(due: float) -> None:
    probe.record_lateness(due)


def version() -> str:
    return _dist_version("rq")


def _queue(url: str) -> Queue:
    return Queue(QUEUE_NAME, connection=Redis.from_url(url), serializer=JSONSerializer)


def enqueue(url: str, n: int) -> float:
    queue = _queue(url)
    started = time.perf_counter()
    for first in range(0, n, ENQUEUE_CHUNK):
        count = min(ENQUEUE_CHUNK, n - first)
        queue.enqueue_many([Queue.prepare_data(noop) for _ in range(count)])
    return time.perf_counter() - started


def schedule(url: str, dues: Sequence[float]) -> float:
    queue = _queue(url)
    started = time.perf_counter()
    for due in dues:
        queue.enqueue_at(datetime.fromtimestamp(due, tz=UTC), late, due)
    return time.perf_counter() - started


def worker_commands(
    *, url: str, workers: int, threads: int, bindir: str, delayed: bool
) -> list[list[str]]:
    del threads  # an RQ worker runs one job at a time
    argv = [f"{bindir}/rq", "worker", "-u", url, "-w", "rq.worker.SimpleWorker", "-S", "json"]
    argv += ["-q", "--disable-job-desc-logging"]
    commands = []
    for index in range(workers):
        scheduler = ["--with-scheduler"] if delayed and index == 0 else []
        commands.append([*argv, *scheduler, QUEUE_NAME])
    return commands
