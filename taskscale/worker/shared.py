"""What the parts of one worker share, handed to each as one object.

The claimer, the reporter and the shutdown (:mod:`taskscale.worker.claimer`,
:mod:`~taskscale.worker.reporter`, :mod:`~taskscale.worker.shutdown`) all talk
to the same Redis under the same names with the same scripts, count in the
same :class:`~taskscale.worker.tally.Tally` and watch the same stop events.
:class:`Shared` holds those once; each part takes it plus only what is its
own, so adding a shared thing touches this module and the part that uses it,
not every constructor between them.  The parts copy what they use onto
themselves when built, so their per-task loops read one attribute, as before.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from taskscale.health import HealthState
from taskscale.key_types import WrongKeys
from taskscale.keys import Keys
from taskscale.luascripts import Scripts
from taskscale.metrics import WorkerMetrics
from taskscale.redis_urls import RedisClient
from taskscale.worker.execution import Outcome
from taskscale.worker.once import OnceBudget
from taskscale.worker.settings import WorkerSettings
from taskscale.worker.tally import Tally


@dataclass(frozen=True)
class Shared:
    """One worker's connection, names, identity, counts and stop events."""

    client: RedisClient
    keys: Keys
    settings: WorkerSettings
    #: The worker id (its registry record, in-flight hash and lease) and its pod.
    id: str
    pod: str
    scripts: Scripts
    #: A Redis error that retrying can't fix: the worker stops and exits 1.
    on_fatal: Callable[[BaseException], None]
    metrics: WorkerMetrics | None = None
    health: HealthState | None = None
    tally: Tally = field(default_factory=Tally)
    #: Finished tasks' outcomes (and the reporter's STOP), for the reporter.
    outbox: queue.SimpleQueue[Outcome | object] = field(default_factory=queue.SimpleQueue)
    #: Set by the first stop request: the claimers stop claiming.
    stopping: threading.Event = field(default_factory=threading.Event)
    #: Set by a second stop request: the grace period ends now.
    forced: threading.Event = field(default_factory=threading.Event)
    #: Set when the worker is exiting: stop retrying Redis.
    abandon: threading.Event = field(default_factory=threading.Event)
    #: Keys a script refused as of the wrong type: reported, their types held
    #: back (taskscale.key_types); built by the worker.
    wrong_keys: WrongKeys | None = None
    #: ``--once``: the one task this worker may claim (taskscale.worker.once).
    once: OnceBudget | None = None
