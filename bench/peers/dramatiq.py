"""dramatiq: ``Actor.send`` (no batch API), ``dramatiq`` CLI.

dramatiq's ``group`` and ``pipeline`` enqueue message by message, so the
benchmark calls ``send`` in a loop. One ``dramatiq`` command starts all the
worker processes (``--processes W --threads T``). Delayed tasks:
``send_with_options(delay=ms)``: the message goes to the delay queue and the
worker holds it until its eta, then runs it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from importlib.metadata import version as _dist_version

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from bench.peers import QUEUE_NAME, probe

ENQUEUE_API = "Actor.send in a loop (no batch API; group() loops too)"
WORKER_CLI = "dramatiq bench.peers.dramatiq --processes W --threads T"
DELAY_API = "Actor.send_with_options(delay=ms) (delay queue, held by the worker until due)"

broker = RedisBroker(url=os.environ.get(probe.URL_ENV, "redis://127.0.0.1:6379/0"))
dramatiq.set_broker(broker)


@dramatiq.actor(queue_name=QUEUE_NAME, max_retries=0)
def noop() -> None:
    probe.body()
    probe.hit()


@dramatiq.actor(queue_name=QUEUE_NAME, max_retries=0)
def late(due: float) -> None:
    probe.record_lateness(due)


def version() -> str:
    return _dist_version("dramatiq")


def enqueue(url: str, n: int) -> float:
    del url  # the module-level broker reads BENCH_REDIS_URL
    started = time.perf_counter()
    for _ in range(n):
        noop.send()
    return time.perf_counter() - started


def schedule(url: str, dues: Sequence[float]) -> float:
    del url
    started = time.perf_counter()
    for due in dues:
        delay_ms = max(0, int((due - time.time()) * 1000))
        late.send_with_options(args=(due,), delay=delay_ms)
    return time.perf_counter() - started


def worker_commands(
    *, url: str, workers: int, threads: int, bindir: str, delayed: bool
) -> list[list[str]]:
    del url, delayed
    return [
        [
            f"{bindir}/dramatiq",
            "bench.peers.dramatiq",
            "--processes",
            str(workers),
            "--threads",
            str(threads),
        ]
    ]
