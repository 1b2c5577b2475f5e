"""Helpers of the topology tests: a worker and a scheduler running in threads."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import taskscale.examples  # noqa: F401  (registers noop, sleep, echo, fail)
from taskscale.connection import connect
from taskscale.keys import Keys
from taskscale.scheduling.scheduler import Scheduler, SchedulerSettings
from taskscale.worker import RetryPolicy, Worker, WorkerSettings


@contextmanager
def running(
    url: str, types: tuple[str, ...], *, keys: Keys, threads: int = 2, **settings: Any
) -> Iterator[tuple[Worker, Scheduler]]:
    """A worker and a scheduler for ``url``, each in a thread; stopped on exit."""
    settings.setdefault("retry", RetryPolicy(base_s=0.05, jitter=0.0))
    settings.setdefault("idle_wait_s", 0.5)
    worker = Worker(
        connect(url), WorkerSettings(types=types, threads=threads, **settings), keys=keys
    )
    scheduler = Scheduler(connect(url), keys=keys, settings=SchedulerSettings(lease_s=3.0))
    threads_ = [
        threading.Thread(target=worker.run, daemon=True),
        threading.Thread(target=scheduler.run, daemon=True),
    ]
    for thread in threads_:
        thread.start()
    try:
        yield worker, scheduler
    finally:
        worker.request_stop()
        scheduler.stop()
        for thread in threads_:
            thread.join(30)
            assert not thread.is_alive(), f"{thread.name} did not stop"
