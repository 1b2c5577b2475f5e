"""taskscale: a reliable Redis task queue whose workers a Kubernetes controller scales.

Applications import this package to enqueue tasks; workers run
``taskscale worker``; the controller (``taskscale.controller``) reads the
same Redis schema to size worker Deployments. See docs/architecture.md.
"""

__version__ = "0.1.0"

from taskscale.producer import Call, Producer, ProducerSettings, enqueue, enqueue_many
from taskscale.tasks import register, task
from taskscale.tracking import Tracker, track

__all__ = [
    "Call",
    "Producer",
    "ProducerSettings",
    "Tracker",
    "__version__",
    "enqueue",
    "enqueue_many",
    "register",
    "task",
    "track",
]
