"""taskscale: a reliable Redis task queue whose workers a Kubernetes controller scales.

Applications import this package to enqueue tasks; workers run
``taskscale worker``; the controller (``taskscale.controller``) reads the
same Redis schema to size worker Deployments. See docs/architecture.md.
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version

try:  # single source: pyproject.toml's version, via the installed metadata
    __version__ = _dist_version("taskscale")
except PackageNotFoundError:  # pragma: no cover - a source tree never installed
    __version__ = "0+unknown"

from taskscale.cancellation import CancelResult, cancel
from taskscale.context import TaskContext, current_task
from taskscale.limits import TypeLimits, clear_limits, get_limits, set_limits
from taskscale.options import TaskOptions
from taskscale.pausing import pause_type, paused_types, resume_type
from taskscale.producer import Call, Producer, ProducerSettings, enqueue, enqueue_many
from taskscale.scheduling.schedules import ScheduleInfo, Schedules, schedule
from taskscale.tasks import register, task
from taskscale.tracking import Tracker, track
from taskscale.workflows import Workflow, batch, chain, dag, group, step

__all__ = [
    "Call",
    "CancelResult",
    "Producer",
    "ProducerSettings",
    "ScheduleInfo",
    "Schedules",
    "TaskContext",
    "TaskOptions",
    "Tracker",
    "TypeLimits",
    "Workflow",
    "__version__",
    "batch",
    "cancel",
    "chain",
    "clear_limits",
    "current_task",
    "dag",
    "enqueue",
    "enqueue_many",
    "get_limits",
    "group",
    "pause_type",
    "paused_types",
    "register",
    "resume_type",
    "schedule",
    "set_limits",
    "step",
    "task",
    "track",
]
