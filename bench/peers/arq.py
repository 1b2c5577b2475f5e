"""arq: ``ArqRedis.enqueue_job`` (no batch API), ``arq`` CLI worker.

arq has no batch enqueue; each ``enqueue_job`` is a WATCH/MULTI transaction.
The benchmark issues them concurrently from one event loop (``asyncio.gather``
over chunks of ``CONCURRENCY``), which is as fast as the public API goes.
Jobs are JSON-serialised (arq's default is pickle). Per-job INFO logging is
turned down in ``on_startup``. Delayed tasks: ``_defer_until``; the worker
polls the queue every ``poll_delay`` (0.5 s default).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib.metadata import version as _dist_version
from typing import Any

from arq import create_pool
from arq.connections import ArqRedis, RedisSettings

from bench.peers import ENQUEUE_CHUNK, QUEUE_NAME, probe

ENQUEUE_API = "ArqRedis.enqueue_job, 50 concurrent calls via asyncio.gather (no batch API)"
WORKER_CLI = "arq bench.peers.arq.WorkerSettings (max_jobs BENCH_SLOTS, else 10; a process each)"
DELAY_API = "enqueue_job(_defer_until=...) (worker polls every 0.5 s)"

CONCURRENCY = 50
_QUEUE = f"arq:{QUEUE_NAME}"


def _dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


async def noop(ctx: dict[str, Any]) -> None:
    await probe.abody()
    probe.hit()


async def late(ctx: dict[str, Any], due: float) -> None:
    probe.record_lateness(due)


async def _quiet(ctx: dict[str, Any]) -> None:
    logging.getLogger("arq").setLevel(logging.WARNING)


def _settings() -> RedisSettings:
    return RedisSettings.from_dsn(os.environ.get(probe.URL_ENV, "redis://127.0.0.1:6379/0"))


class WorkerSettings:
    functions = (noop, late)
    queue_name = _QUEUE
    redis_settings = _settings()
    job_serializer = staticmethod(_dumps)
    job_deserializer = staticmethod(json.loads)
    on_startup = _quiet
    max_jobs = probe.slots(10)  # BENCH_SLOTS (issue 11: equal concurrency), else arq's 10


def version() -> str:
    return _dist_version("arq")


async def _pool(url: str) -> ArqRedis:
    return await create_pool(
        RedisSettings.from_dsn(url),
        job_serializer=_dumps,
        job_deserializer=json.loads,
        default_queue_name=_QUEUE,
    )


async def _enqueue(url: str, n: int) -> float:
    pool = await _pool(url)
    started = time.perf_counter()
    for first in range(0, n, ENQUEUE_CHUNK):
        count = min(ENQUEUE_CHUNK, n - first)
        for sub in range(0, count, CONCURRENCY):
            calls = [pool.enqueue_job("noop") for _ in range(min(CONCURRENCY, count - sub))]
            await asyncio.gather(*calls)
    elapsed = time.perf_counter() - started
    await pool.aclose()
    return elapsed


async def _schedule(url: str, dues: Sequence[float]) -> float:
    pool = await _pool(url)
    started = time.perf_counter()
    for first in range(0, len(dues), CONCURRENCY):
        calls = [
            pool.enqueue_job("late", due, _defer_until=datetime.fromtimestamp(due, tz=UTC))
            for due in dues[first : first + CONCURRENCY]
        ]
        await asyncio.gather(*calls)
    elapsed = time.perf_counter() - started
    await pool.aclose()
    return elapsed


def enqueue(url: str, n: int) -> float:
    return asyncio.run(_enqueue(url, n))


def schedule(url: str, dues: Sequence[float]) -> float:
    return asyncio.run(_schedule(url, dues))


def worker_commands(
    *, url: str, workers: int, threads: int, bindir: str, delayed: bool
) -> list[list[str]]:
    del url, threads, delayed  # settings come from BENCH_REDIS_URL; arq's own concurrency
    return [[f"{bindir}/arq", "bench.peers.arq.WorkerSettings"] for _ in range(workers)]
