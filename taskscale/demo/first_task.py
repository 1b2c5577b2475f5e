"""When the first task started after each scale-up from zero, for the demo's
report: decision time and decision-to-first-task are different figures.

Why it exists: the controller decides within milliseconds of work arriving at
zero, but a local worker is a new process (interpreter, imports, Redis,
registration) and runs nothing until it is up; a plot of replicas alone
showed the target reached seconds before any task ran.  :class:`TaskStarts`
polls the type's ``ACTIVE_TASKS`` field and ``completed`` counter every 10 ms
(one pipelined round trip to the demo's own Redis) and keeps the times a
task was first seen running after none was; :func:`first_task_after` pairs
each decision with the first such start after it.
"""

from __future__ import annotations

import threading
import time

import redis

from taskscale.keys import Keys
from taskscale.redis_urls import RedisClient


class TaskStarts:
    """A thread noting when tasks of ``task_type`` start running again."""

    def __init__(
        self, client: RedisClient, keys: Keys, task_type: str, *, interval_s: float = 0.01
    ) -> None:
        self._client = client
        self._keys = keys
        self._type = task_type
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-task-starts", daemon=True)
        #: Monotonic times a task was seen running (or done) after none was.
        self.starts: list[float] = []

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _read(self) -> tuple[int, int]:
        pipe = self._client.pipeline(transaction=False)
        pipe.hget(self._keys.active, self._type)
        pipe.hget(self._keys.stats(self._type), "completed")
        active, completed = pipe.execute()
        return int(active or 0), int(completed or 0)

    def _run(self) -> None:
        running, done = False, None
        while not self._stop.wait(self._interval_s):
            try:
                active, completed = self._read()
            except redis.RedisError:
                continue
            now = time.monotonic()
            # a task shorter than one poll shows only as one more completed
            started = active > 0 or (done is not None and completed > done)
            if started and not running:
                self.starts.append(now)
            running, done = active > 0, completed


def first_task_after(decisions: list[float], starts: list[float]) -> list[float | None]:
    """For each decision time, the first start at or after it (None: none seen)."""
    found: list[float | None] = []
    for at in decisions:
        later = [s for s in starts if s >= at]
        found.append(min(later) if later else None)
    return found
