"""The worker wing: the non-hoarding consumer and everything only it runs.

``taskscale.worker`` keeps the names users import from it; each part lives
in a module of its own (docs/architecture.md, "The worker runtime"):
:mod:`~taskscale.worker.runtime` wires them, :mod:`~taskscale.worker.claimer`
takes work, :mod:`~taskscale.worker.execution` runs one task,
:mod:`~taskscale.worker.reporter` records outcomes,
:mod:`~taskscale.worker.shutdown` drains, :mod:`~taskscale.worker.supervisor`
runs several processes.  Modules of this wing import each other by their own
names, never through this one.
"""

from taskscale.worker.execution import RetryPolicy
from taskscale.worker.runtime import Worker, run_worker
from taskscale.worker.settings import WorkerSettings, default_worker_id

__all__ = ["RetryPolicy", "Worker", "WorkerSettings", "default_worker_id", "run_worker"]
