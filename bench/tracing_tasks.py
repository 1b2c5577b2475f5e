"""Worker-side helpers of bench/tracing_bench.py, loaded by ``--import``.

Why a module: the drain bench needs, inside the worker process, a task body
that does I/O as real tasks do (``incr``: one Redis INCR through the
running thread's own client, issue 27's body) and the names of the
worker's threads, so that it can split the worker's CPU by thread
(executors, claimer, reporter, the batch span processor) from
``/proc/<pid>/task/*/schedstat`` -- Python 3.11 gives threads no OS name.
"""

from __future__ import annotations

import json
import os
import threading
import time

import redis

from taskscale.tasks import task

#: Where the worker writes ``{native thread id: thread name}``.
NAMES_ENV = "TRACING_BENCH_NAMES"
INCR_KEY = "bench:incr"

_local = threading.local()


@task("incr")
def incr() -> None:
    """One Redis INCR through this thread's client (held, as a real task's)."""
    client = getattr(_local, "client", None)
    if client is None:
        client = _local.client = redis.Redis.from_url(os.environ["TASKSCALE_REDIS_URL"])
    client.incr(INCR_KEY)


def _write_names(path: str) -> None:
    for _ in range(40):  # the first 10 s: every thread has started by then
        time.sleep(0.25)
        names = {str(t.native_id): t.name for t in threading.enumerate()}
        with open(path + ".tmp", "w") as f:
            json.dump(names, f)
        os.replace(path + ".tmp", path)


if os.environ.get(NAMES_ENV):
    threading.Thread(
        target=_write_names, args=(os.environ[NAMES_ENV],), daemon=True, name="bench-names"
    ).start()
