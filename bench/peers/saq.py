"""saq: ``Queue.enqueue`` (no batch API), ``saq`` CLI worker.

saq's ``enqueue`` is one Lua call per job and it has no bulk form
(``Queue.batch`` only groups jobs for cancellation), so the benchmark issues
them concurrently from one event loop, ``CONCURRENCY`` at a time. One ``saq``
command starts all worker processes (``--workers W``); each runs
``concurrency`` jobs at once (10, saq's default). Delayed tasks: the job's
``scheduled`` field (epoch seconds; given as a float so it is not rounded);
the worker's schedule timer moves due jobs once per second (default).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from importlib.metadata import version as _dist_version
from typing import Any

from saq import Queue

from bench.peers import ENQUEUE_CHUNK, QUEUE_NAME, probe

ENQUEUE_API = "Queue.enqueue, 50 concurrent calls via asyncio.gather (no batch API)"
WORKER_CLI = "saq bench.peers.saq.settings --workers W (concurrency BENCH_SLOTS, else 10)"
DELAY_API = "Queue.enqueue(scheduled=epoch s) (worker's schedule timer: every 1 s)"

CONCURRENCY = 50


async def noop(ctx: dict[str, Any]) -> None:
    await probe.abody()
    probe.hit()


async def late(ctx: dict[str, Any], *, due: float) -> None:
    probe.record_lateness(due)


def settings() -> dict[str, Any]:
    url = os.environ.get(probe.URL_ENV, "redis://127.0.0.1:6379/0")
    return {
        "queue": Queue.from_url(url, name=QUEUE_NAME),
        "functions": [noop, late],
        "concurrency": probe.slots(10),  # BENCH_SLOTS (issue 11), else saq's default 10
    }


def version() -> str:
    return _dist_version("saq")


async def _enqueue(url: str, n: int) -> float:
    queue = Queue.from_url(url, name=QUEUE_NAME)
    await queue.connect()
    started = time.perf_counter()
    for first in range(0, n, ENQUEUE_CHUNK):
        count = min(ENQUEUE_CHUNK, n - first)
        for sub in range(0, count, CONCURRENCY):
            calls = [queue.enqueue("noop") for _ in range(min(CONCURRENCY, count - sub))]
            await asyncio.gather(*calls)
    elapsed = time.perf_counter() - started
    await queue.disconnect()
    return elapsed


async def _schedule(url: str, dues: Sequence[float]) -> float:
    queue = Queue.from_url(url, name=QUEUE_NAME)
    await queue.connect()
    started = time.perf_counter()
    for first in range(0, len(dues), CONCURRENCY):
        calls = [
            queue.enqueue("late", due=due, scheduled=due)  # type: ignore[arg-type]
            for due in dues[first : first + CONCURRENCY]
        ]
        await asyncio.gather(*calls)
    elapsed = time.perf_counter() - started
    await queue.disconnect()
    return elapsed


def enqueue(url: str, n: int) -> float:
    return asyncio.run(_enqueue(url, n))


def schedule(url: str, dues: Sequence[float]) -> float:
    return asyncio.run(_schedule(url, dues))


def worker_commands(
    *, url: str, workers: int, threads: int, bindir: str, delayed: bool
) -> list[list[str]]:
    del url, threads, delayed  # settings() reads BENCH_REDIS_URL; saq's own concurrency
    return [[f"{bindir}/saq", "bench.peers.saq.settings", "--workers", str(workers), "-q"]]
