"""taskscale: ``Producer.enqueue_many`` and ``taskscale worker`` / ``scheduler``.

``enqueue_many`` is the batch API: one ``enqueue.lua`` call per chunk of
``taskscale.producer.BATCH_CHUNK`` envelopes. Workers are separate
``taskscale worker`` processes with ``--threads T``; delayed tasks use
``enqueue(delay=...)`` and one ``taskscale scheduler`` process.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from importlib.metadata import version as _dist_version

from bench.peers import ENQUEUE_CHUNK, probe
from taskscale.producer import Producer
from taskscale.tasks import task

ENQUEUE_API = "Producer.enqueue_many in chunks of 1000 (one enqueue.lua call per 500)"
WORKER_CLI = "taskscale worker --types noop,late --threads T (one process per worker)"
DELAY_API = "Producer.enqueue(delay=s) + one taskscale scheduler process"

NOOP_TYPE = "noop"
LATE_TYPE = "late"


@task(NOOP_TYPE)
def noop() -> None:
    probe.hit()


@task(LATE_TYPE)
def late(due: float) -> None:
    probe.record_lateness(due)


def version() -> str:
    return _dist_version("taskscale")


def enqueue(url: str, n: int) -> float:
    producer = Producer(url)
    started = time.perf_counter()
    for first in range(0, n, ENQUEUE_CHUNK):
        producer.enqueue_many(NOOP_TYPE, [() for _ in range(min(ENQUEUE_CHUNK, n - first))])
    return time.perf_counter() - started


def schedule(url: str, dues: Sequence[float]) -> float:
    producer = Producer(url)
    started = time.perf_counter()
    for due in dues:
        producer.enqueue(LATE_TYPE, due, delay=max(0.0, due - time.time()))
    return time.perf_counter() - started


def worker_commands(
    *, url: str, workers: int, threads: int, bindir: str, delayed: bool
) -> list[list[str]]:
    worker = [f"{bindir}/taskscale", "worker", "--import", "bench.peers.taskscale"]
    worker += ["--types", f"{NOOP_TYPE},{LATE_TYPE}", "--threads", str(threads)]
    worker += ["--redis-url", url]
    commands = [list(worker) for _ in range(workers)]
    if delayed:
        commands.append([f"{bindir}/taskscale", "scheduler", "--redis-url", url])
    return commands
