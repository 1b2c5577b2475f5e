"""The systems the worker-runtime benchmark compares, one module each.

Every module here exposes the same small surface, so ``bench.runtime_bench``
can drive them all the same way without importing any of them (they are
imported only by ``bench.peers.run`` child processes and by the workers
themselves, inside the peer virtualenv made by ``bench/setup_peers.sh``):

* ``ENQUEUE_API``, ``WORKER_CLI``, ``DELAY_API``: one-line descriptions of
  the public API and CLI the benchmark uses (printed in the report);
* ``version() -> str``;
* ``enqueue(url, n) -> float``: enqueue ``n`` no-ops as fast as the public
  API allows, return the seconds spent in the API calls;
* ``schedule(url, dues) -> float``: enqueue one delayed task per due time
  (unix seconds) through the system's native delay mechanism;
* ``worker_commands(url=, workers=, threads=, bindir=, delayed=)``: argv
  lists, each started as its own process group; together they run
  ``workers`` worker processes (plus whatever the system needs to run
  delayed tasks when ``delayed`` is true).

The task bodies call ``bench.peers.probe`` so that completion and lateness
are measured identically for every system.
"""

from __future__ import annotations

PEERS: tuple[str, ...] = ("taskscale", "rq", "arq", "dramatiq", "celery", "saq")
"""Benchmark order; taskscale first, the Python peers after it."""

VARIANTS: dict[str, str] = {"taskscale-async": "taskscale", "taskscale-procs": "taskscale"}
"""Further ways of running a system: variant name -> its module (issue 11).
The child learns which one it runs from ``VARIANT_ENV``; a module may say a
variant can't run here (``unsupported(bindir) -> str``)."""

VARIANT_ENV = "BENCH_VARIANT"

QUEUE_NAME = "bench"
"""The queue (or task type) every system's benchmark tasks go to."""

ENQUEUE_CHUNK = 1000
"""Tasks handed to a batch API per call, so 100k tasks never sit in one
client-side buffer (and so async peers bound their concurrent calls)."""
