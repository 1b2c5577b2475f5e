"""What every benchmark task does inside a worker process, for every system.

The drain and lateness figures must be taken the same way for six systems
whose own bookkeeping differs (some keep results, some delete jobs, some ack
before running). So the task bodies are ours and identical everywhere: a
no-op that counts itself and stamps the wall clock, and a delayed task that
records how late it started. A daemon thread in each worker process flushes
those numbers to Redis every ``FLUSH_INTERVAL`` seconds, so the per-task cost
is a dict update and a ``time.time()`` call, not a Redis round trip.

Keys (bench-only, outside every system's namespace):

* ``bench:probes`` -- SET of probe ids (one per worker process);
* ``bench:probe:<id>`` -- HASH ``count``, ``first`` (unix s of the first
  task), ``last`` (unix s of the latest task);
* ``bench:late`` -- LIST of JSON arrays of lateness values in seconds;
* ``bench:incr`` -- the counter the ``incr`` body increments.

Issue 11 measures three task bodies, chosen by ``BENCH_BODY`` in the worker's
environment (the same for every system): ``empty`` (only the probe),
``incr`` (one Redis INCR through a client of the running thread -- a
``threading.local`` client for thread workers, one asyncio client per event
loop for async ones, as a real task would hold its connection) and ``sleep``
(``time.sleep(0.001)`` / ``await asyncio.sleep(0.001)``). Thread peers call
:func:`body`, async peers ``await`` :func:`abody`, before :func:`hit`.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from typing import Any

import redis

URL_ENV = "BENCH_REDIS_URL"
PROBES_KEY = "bench:probes"
PROBE_KEY_PREFIX = "bench:probe:"
LATE_KEY = "bench:late"
INCR_KEY = "bench:incr"
FLUSH_INTERVAL = 0.05
BODY_ENV = "BENCH_BODY"
#: Concurrency per worker process (threads, or jobs / slots for async peers).
SLOTS_ENV = "BENCH_SLOTS"
BODIES = ("empty", "incr", "sleep")
SLEEP_S = 0.001

BODY = os.environ.get(BODY_ENV, "empty")
if BODY not in BODIES:
    raise SystemExit(f"{BODY_ENV}={BODY!r}: choose from {', '.join(BODIES)}")


def slots(default: int = 8) -> int:
    """The per-process concurrency the harness asked for."""
    return int(os.environ.get(SLOTS_ENV, default))


_local = threading.local()
_aclients: dict[int, Any] = {}


def _url() -> str:
    return os.environ.get(URL_ENV, "redis://127.0.0.1:6379/0")


def body() -> None:
    """The task body of a thread worker (``BENCH_BODY``)."""
    if BODY == "incr":
        client = getattr(_local, "client", None)
        if client is None:
            client = _local.client = redis.Redis.from_url(_url())
        client.incr(INCR_KEY)
    elif BODY == "sleep":
        time.sleep(SLEEP_S)


async def abody() -> None:
    """The task body of an async worker (``BENCH_BODY``)."""
    if BODY == "incr":
        loop = id(asyncio.get_running_loop())
        client = _aclients.get(loop)
        if client is None:
            import redis.asyncio

            client = _aclients[loop] = redis.asyncio.Redis.from_url(_url())
        await client.incr(INCR_KEY)
    elif BODY == "sleep":
        await asyncio.sleep(SLEEP_S)


_counts: dict[int, int] = {}
_stamps = {"first": 0.0, "last": 0.0}
_late: list[float] = []
_lock = threading.Lock()
_flusher = {"running": False}


def _forget_flusher() -> None:
    # A forked worker child inherits the flag but not the thread, and must
    # not share its parent's body connections.
    _flusher["running"] = False
    _aclients.clear()
    _local.__dict__.clear()


os.register_at_fork(after_in_child=_forget_flusher)


def hit() -> None:
    """Count one finished no-op in this process (thread-safe without a lock:
    each thread only writes its own dict entry)."""
    now = time.time()
    tid = threading.get_ident()
    _counts[tid] = _counts.get(tid, 0) + 1
    if not _stamps["first"]:
        _stamps["first"] = now
    _stamps["last"] = now
    if not _flusher["running"]:
        _start_flusher()


def record_lateness(due: float) -> None:
    """Record how late (seconds, may be negative) a delayed task started."""
    _late.append(time.time() - due)
    hit()


def _start_flusher() -> None:
    with _lock:
        if _flusher["running"]:
            return
        _flusher["running"] = True
    url = _url()
    threading.Thread(target=_flush_forever, args=(url,), name="bench-probe", daemon=True).start()


def _flush_forever(url: str) -> None:
    client = redis.Redis.from_url(url)
    probe_id = f"{os.uname().nodename}-{os.getpid()}"
    client.sadd(PROBES_KEY, probe_id)
    while True:
        _flush(client, probe_id)
        time.sleep(FLUSH_INTERVAL)


def _flush(client: redis.Redis, probe_id: str) -> None:
    count = sum(list(_counts.values()))
    late: list[float] = []
    while _late:
        late.append(_late.pop())
    pipe = client.pipeline(transaction=False)
    pipe.hset(
        PROBE_KEY_PREFIX + probe_id,
        mapping={"count": count, "first": _stamps["first"], "last": _stamps["last"]},
    )
    if late:
        pipe.rpush(LATE_KEY, json.dumps(late))
    pipe.execute()
