"""One :class:`~taskscale.tracking.Tracker` per process, for the integrations.

Why it exists: Celery's prefork pool and RQ's work horses fork.  A tracker
(its Redis connections, its heartbeat thread, its lease) belongs to the
process that made it, so :class:`ProcessTracker` makes one lazily in each
process that runs a task and makes a new one after a fork.  It also turns a
queue's task name into a taskscale type name, or skips a name that cannot be
one (with one warning), so a foreign name never breaks the task it counts.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass

from taskscale.keys import Keys, check_name
from taskscale.redis_urls import RedisClient
from taskscale.tracking import DEFAULT_LEASE_S, Tracker

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrackingSettings:
    """Where and how the integrations count."""

    #: taskscale's Redis; None: ``TASKSCALE_REDIS_URL`` (default redis://127.0.0.1:6379/0).
    redis_url: str | None = None
    #: None: ``TASKSCALE_NAMESPACE``, else "taskscale".
    namespace: str | None = None
    #: A process dead this long has its tasks counted down by a live peer.
    lease_s: float = DEFAULT_LEASE_S

    def __post_init__(self) -> None:
        if self.lease_s <= 0:
            raise ValueError("lease_s must be positive")
        Keys.from_env(self.namespace)  # a bad namespace fails at install time


class ProcessTracker:
    """This process's tracker for one integration: made on first use, again after a fork."""

    def __init__(
        self,
        settings: TrackingSettings,
        *,
        client_factory: Callable[[], RedisClient] | None = None,
    ) -> None:
        self.settings = settings
        self.keys = Keys.from_env(settings.namespace)
        self._client_factory = client_factory
        self._lock = threading.Lock()
        self._tracker: Tracker | None = None
        self._pid = 0
        self._refused: set[str] = set()
        ref = weakref.ref(self)
        # A lock held by another thread at fork time stays held in the child.
        os.register_at_fork(after_in_child=lambda: _reset(ref))

    def get(self) -> Tracker:
        """The tracker of the calling process."""
        with self._lock:
            if self._tracker is None or self._pid != os.getpid():
                self._tracker = Tracker(self._client(), self.keys, lease_s=self.settings.lease_s)
                self._pid = os.getpid()
            return self._tracker

    def open(self) -> None:
        """Join now (see :meth:`Tracker.open`): an idle worker reaps dead peers."""
        self.get().open()

    def close(self) -> None:
        """Leave: whatever this process still counts is counted down."""
        with self._lock:
            tracker, self._tracker = self._tracker, None
            mine = self._pid == os.getpid()
        if tracker is not None and mine:
            tracker.close()

    def type_name(self, name: str) -> str | None:
        """``name`` if it is a legal task type, else None (warned once per name)."""
        try:
            return check_name("task type", name)
        except ValueError as exc:
            if name not in self._refused:
                self._refused.add(name)
                log.warning("taskscale tracking: not counted: %s", exc)
            return None

    def _client(self) -> RedisClient:
        if self._client_factory is not None:
            return self._client_factory()
        from taskscale.connection import connect

        return connect(self.settings.redis_url)


def _reset(ref: weakref.ref[ProcessTracker]) -> None:
    tracker = ref()
    if tracker is not None:
        tracker._lock = threading.Lock()
        tracker._tracker = None
