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
* ``bench:late`` -- LIST of JSON arrays of lateness values in seconds.
"""

from __future__ import annotations

import json
import os
import threading
import time

import redis

URL_ENV = "BENCH_REDIS_URL"
PROBES_KEY = "bench:probes"
PROBE_KEY_PREFIX = "bench:probe:"
LATE_KEY = "bench:late"
FLUSH_INTERVAL = 0.05

_counts: dict[int, int] = {}
_stamps = {"first": 0.0, "last": 0.0}
_late: list[float] = []
_lock = threading.Lock()
_flusher = {"running": False}


def _forget_flusher() -> None:
    # A forked worker child inherits the flag but not the thread.
    _flusher["running"] = False


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
    url = os.environ.get(URL_ENV, "redis://127.0.0.1:6379/0")
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
