"""Test-only tasks for the flow-control tests: each records, from inside the
task, when it was claimed (Redis clock) and started (this host's clock), and
how many of its type were running then.  Imported by worker subprocesses
(``--import limits_tasks``)."""

from __future__ import annotations

import os
import threading
import time

import redis

from taskscale.context import current_task
from taskscale.tasks import task

STARTS = "limtest:starts:"  # + type: start times (unix s, this host's clock)
CLAIMS = "limtest:claims:"  # + type: claim times (unix ms, Redis clock: current_task())
RUNNING = "limtest:running:"  # + type: INCR at start, DECR at the end
PEAKS = "limtest:peaks:"  # + type: the running count each start saw
FINISHED = "limtest:finished:"  # + type: the n of every finished run
WAITS = "limtest:waits:"  # + type: start - the enqueue time passed in

_local = threading.local()


def _client() -> redis.Redis:
    if not hasattr(_local, "client"):
        _local.client = redis.Redis.from_url(os.environ["TASKSCALE_REDIS_URL"])
    client: redis.Redis = _local.client
    return client


def _run(name: str, n: int, seconds: float) -> int:
    r = _client()
    r.rpush(CLAIMS + name, current_task().claimed_ms)
    r.rpush(STARTS + name, repr(time.time()))
    r.rpush(PEAKS + name, r.incr(RUNNING + name))
    time.sleep(seconds)
    r.decr(RUNNING + name)
    r.rpush(FINISHED + name, n)
    return n


@task("limrate")
def limrate(n: int, seconds: float) -> int:
    return _run("limrate", n, seconds)


@task("limcap")
def limcap(n: int, seconds: float) -> int:
    return _run("limcap", n, seconds)


@task("limslow")
def limslow(n: int, seconds: float) -> int:
    return _run("limslow", n, seconds)


@task("limfree")
def limfree(n: int, enqueued_at: float) -> int:
    _client().rpush(WAITS + "limfree", repr(time.time() - enqueued_at))
    return _run("limfree", n, 0.0)
