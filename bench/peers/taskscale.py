"""taskscale: ``Producer.enqueue_many`` and ``taskscale worker`` / ``scheduler``.

``enqueue_many`` is the batch API: one ``enqueue.lua`` call per chunk of
``taskscale.producer.BATCH_CHUNK`` envelopes. Workers are separate
``taskscale worker`` processes with ``--threads T``; delayed tasks use
``enqueue(delay=...)`` and one ``taskscale scheduler`` process.

Three variants (``bench.peers.VARIANTS``; the child learns which from
``BENCH_VARIANT``), the same tasks and bodies:

* ``taskscale`` -- sync tasks on ``--threads T``, W worker commands;
* ``taskscale-async`` -- the tasks registered as ``async def``, run by
  ``--async-slots T`` (one thread for sync tasks, none of which come);
* ``taskscale-procs`` -- one ``taskscale worker --processes W`` command.

A variant whose flag the installed worker does not have is skipped (the
harness asks :func:`unsupported`); ``taskscale-procs`` then would be the
same W separate processes as ``taskscale``, which is what ``--processes``
starts.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence
from importlib.metadata import version as _dist_version

from bench.peers import ENQUEUE_CHUNK, VARIANT_ENV, probe
from taskscale.producer import Producer
from taskscale.tasks import TaskRegistry, task

ENQUEUE_API = "Producer.enqueue_many in chunks of 1000 (one enqueue.lua call per 500)"
DELAY_API = "Producer.enqueue(delay=s) + one taskscale scheduler process"

NOOP_TYPE = "noop"
ASYNC_NOOP_TYPE = "anoop"
LATE_TYPE = "late"
VARIANT = os.environ.get(VARIANT_ENV, "taskscale")
#: How each variant's workers are started (:func:`worker_commands`), for the results' metadata.
WORKER_CLIS = {
    "taskscale": "taskscale worker --types noop,late --threads T (one process per worker)",
    "taskscale-async": "taskscale worker --types anoop,late --threads 1 --async-slots T "
    "(one process per worker)",
    "taskscale-procs": "taskscale worker --types noop,late --threads T --processes W "
    "(one supervisor of W worker processes)",
}
WORKER_CLI = WORKER_CLIS.get(VARIANT, WORKER_CLIS["taskscale"])
CAN_ASYNC = hasattr(TaskRegistry, "is_async")


@task(NOOP_TYPE)
def noop() -> None:
    probe.body()
    probe.hit()


if CAN_ASYNC:  # registering an async def before the runtime runs them would fail every task

    @task(ASYNC_NOOP_TYPE)
    async def anoop() -> None:
        await probe.abody()
        probe.hit()


@task(LATE_TYPE)
def late(due: float) -> None:
    probe.record_lateness(due)


def version() -> str:
    return _dist_version("taskscale")


def _worker_flags(bindir: str) -> str:
    done = subprocess.run(
        [f"{bindir}/taskscale", "worker", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.stdout


def unsupported(bindir: str) -> str:
    """Why this variant can't run with the installed worker, or ''."""
    flags = _worker_flags(bindir)
    if VARIANT == "taskscale-async" and ("--async-slots" not in flags or not CAN_ASYNC):
        return "taskscale worker has no --async-slots (async tasks not merged)"
    if VARIANT == "taskscale-procs" and "--processes" not in flags:
        return "taskscale worker has no --processes (not merged)"
    return ""


def _type() -> str:
    return ASYNC_NOOP_TYPE if VARIANT == "taskscale-async" else NOOP_TYPE


def enqueue(url: str, n: int) -> float:
    producer = Producer(url)
    kind = _type()
    started = time.perf_counter()
    for first in range(0, n, ENQUEUE_CHUNK):
        producer.enqueue_many(kind, [() for _ in range(min(ENQUEUE_CHUNK, n - first))])
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
    if VARIANT == "taskscale-async":
        worker += ["--types", f"{ASYNC_NOOP_TYPE},{LATE_TYPE}", "--threads", "1"]
        worker += ["--async-slots", str(threads)]
    else:
        worker += ["--types", f"{NOOP_TYPE},{LATE_TYPE}", "--threads", str(threads)]
    worker += ["--redis-url", url]
    if VARIANT == "taskscale-procs":
        commands = [[*worker, "--processes", str(workers)]]
    else:
        commands = [list(worker) for _ in range(workers)]
    if delayed:
        commands.append([f"{bindir}/taskscale", "scheduler", "--redis-url", url])
    return commands
