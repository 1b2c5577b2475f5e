"""Celery: ``apply_async`` on one held producer, ``celery worker --pool threads``.

Celery has no batch publish (``group`` publishes task by task), so the
benchmark calls ``apply_async`` in a loop on one producer taken from the
pool, the fastest public path. Results are ignored (no result backend).
Workers use the threads pool (``--concurrency T``), one ``celery worker``
process per worker, with gossip, mingle and heartbeat off (the usual flags
for a single-host deployment; they only affect start-up and idle traffic).
Delayed tasks: ``apply_async(eta=...)``: the worker prefetches ETA tasks
and holds them on a timer until due.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib.metadata import version as _dist_version

from celery import Celery

from bench.peers import QUEUE_NAME, probe

ENQUEUE_API = "Task.apply_async(producer=p) in a loop on one producer (no batch API)"
WORKER_CLI = (
    "celery worker --pool threads --concurrency T --loglevel WARNING "
    "--without-gossip --without-mingle --without-heartbeat (one process per worker)"
)
DELAY_API = "Task.apply_async(eta=...) (prefetched, held on the worker's timer)"

app = Celery("bench", broker=os.environ.get(probe.URL_ENV, "redis://127.0.0.1:6379/0"))
app.conf.update(
    task_ignore_result=True,
    task_default_queue=QUEUE_NAME,
    task_serializer="json",
    accept_content=["json"],
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)


@app.task(name="noop")
def noop() -> None:
    probe.body()
    probe.hit()


@app.task(name="late")
def late(due: float) -> None:
    probe.record_lateness(due)


def version() -> str:
    return _dist_version("celery")


def enqueue(url: str, n: int) -> float:
    del url  # the module-level app reads BENCH_REDIS_URL
    with app.producer_or_acquire() as producer:
        started = time.perf_counter()
        for _ in range(n):
            noop.apply_async(producer=producer)
        return time.perf_counter() - started


def schedule(url: str, dues: Sequence[float]) -> float:
    del url
    with app.producer_or_acquire() as producer:
        started = time.perf_counter()
        for due in dues:
            eta = datetime.fromtimestamp(due, tz=UTC)
            late.apply_async(args=(due,), eta=eta, producer=producer)
        return time.perf_counter() - started


def worker_commands(
    *, url: str, workers: int, threads: int, bindir: str, delayed: bool
) -> list[list[str]]:
    del url, delayed
    return [
        [
            f"{bindir}/celery",
            "-A",
            "bench.peers.celery",
            "worker",
            "--pool",
            "threads",
            "--concurrency",
            str(threads),
            "--loglevel",
            "WARNING",
            "-n",
            f"bench{index}@%h",
            "-Q",
            QUEUE_NAME,
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ]
        for index in range(workers)
    ]
