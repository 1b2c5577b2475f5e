"""Scaling decisions into Redis, where the dashboard's scaling page reads them.

:class:`DecisionLog` is a reconciler :class:`~taskscale.controller.outcome.Reporter`
that passes every outcome on to another reporter (Kubernetes status and
Events, or the demo's console) and also records it in the scaler's own Redis
with ``scaler_report.lua``: the last pass (current and desired replicas, the
sentence) every time, and a decision appended to a capped list when it says
something new -- a scale, another desired count or reason, a problem -- so the
timeline shows changes, not one identical line per poll.

The scaler's Redis URL may come from a Secret, which only the caller resolves:
:meth:`DecisionLog.bind` tells the log where each scaler's Redis is.  Its
client is the one the controller holds for that URL (the ``clients`` shared
with the reconciler), not a second connection pool.  A
scaler whose ``redis.namespace`` lists several namespaces (its types spread
over shards) records in the *first* of the list (:func:`decisions_keys`); the
dashboard reads every namespace of the list.  Writing is best effort: a
Redis error is logged once per scaler and never reaches the reconcile loop.
Reader: :mod:`taskscale.scaling`; schema: docs/schema.md.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import redis

from taskscale.controller.config import ScalerConfig
from taskscale.controller.outcome import PassOutcome, Reporter
from taskscale.controller.redis_clients import RedisClients
from taskscale.controller.types import ReasonCode
from taskscale.keys import Keys
from taskscale.luascripts import bound_script
from taskscale.redis_urls import RedisClient
from taskscale.shards import ShardMap

log = logging.getLogger("taskscale.controller.decisions")

#: Decisions kept per scaler.
DECISIONS_CAP = 200
#: How long a scaler that stopped reporting stays listed (1 day).
KEEP_MS = 86_400_000


def decisions_keys(key_namespace: str) -> Keys:
    """Where the decisions of a scaler with ``redis.namespace`` = ``key_namespace``
    are recorded: that namespace, or the first of a list (``"a,b,c"`` -> ``a``)."""
    return Keys(ShardMap.parse(key_namespace).namespaces[0])


def pass_record(outcome: PassOutcome) -> dict[str, Any]:
    """The JSON of one pass: what the scaling page shows of a scaler."""
    config, decision, protection = outcome.config, outcome.decision, outcome.protection
    return {
        "scaler": config.key,
        "target": config.target,
        "types": [t.name for t in config.policy.types],
        "min": config.policy.min_replicas,
        "max": config.policy.max_replicas,
        "tasks_per_replica": config.policy.tasks_per_replica,
        "at": round(outcome.at, 3),
        "current": outcome.current,
        "desired": None if decision is None else decision.desired,
        "scaled": outcome.scaled,
        "reason_code": None if decision is None else decision.reason_code,
        "reason": "" if decision is None else decision.reason,
        # a scale-down waiting for the target's rollout (rules/rollout_hold.py)
        "rollout_hold": decision is not None and decision.reason_code == ReasonCode.ROLLOUT_HOLD,
        "problem": outcome.problem,
        "message": outcome.message,
        # Job mode: the Jobs by phase (current/desired are then active Jobs)
        "jobs": None if outcome.jobs is None else outcome.jobs.as_dict(),
        "protected": None if protection is None else sorted(protection.protected),
        "draining": None if protection is None else dict(sorted(protection.draining.items())),
    }


class DecisionLog:
    """A Reporter that records each pass in Redis and hands it on to ``inner``."""

    def __init__(
        self,
        inner: Reporter | None = None,
        *,
        cap: int = DECISIONS_CAP,
        clients: RedisClients | None = None,
    ) -> None:
        self._inner = inner
        self._cap = cap
        #: One client per Redis URL: pass the reconciler's to share its clients.
        self._pool = clients or RedisClients()
        self._lock = threading.Lock()
        self._where: dict[str, tuple[RedisClient, Keys]] = {}
        self._clients: dict[str, RedisClient] = {}
        self._url_of: dict[str, str] = {}
        self._last: dict[str, tuple[Any, ...]] = {}
        self._failing: set[str] = set()

    def bind(self, config: ScalerConfig, redis_url: str) -> None:
        """Record ``config``'s passes in the Redis at ``redis_url``."""
        with self._lock:
            client = self._clients.get(redis_url)
            if client is None:
                client = self._clients[redis_url] = self._pool.acquire(redis_url)
            self._where[config.key] = (client, decisions_keys(config.redis.key_namespace))
            previous, self._url_of[config.key] = self._url_of.get(config.key), redis_url
            unused = self._unused(previous)
        if unused:
            self._pool.release(unused)

    def forget(self, scaler_key: str) -> None:
        """Stop recording ``scaler_key``'s passes; a URL no scaler uses any
        more is given back to the shared clients (closed when nothing else
        holds it)."""
        with self._lock:
            self._where.pop(scaler_key, None)
            self._last.pop(scaler_key, None)
            unused = self._unused(self._url_of.pop(scaler_key, None))
        if unused:
            self._pool.release(unused)

    def _unused(self, url: str | None) -> str | None:
        """``url`` if no scaler is bound to it any more (its client dropped);
        call with the lock held."""
        if url is None or url in self._url_of.values() or url not in self._clients:
            return None
        del self._clients[url]
        return url

    def report(self, outcome: PassOutcome) -> None:
        if self._inner is not None:
            self._inner.report(outcome)
        key = outcome.config.key
        with self._lock:
            where = self._where.get(key)
        if where is None:
            return
        record = pass_record(outcome)
        signature = (
            record["current"],
            record["desired"],
            record["reason_code"],
            record["problem"],
        )
        new = outcome.scaled or signature != self._last.get(key)
        try:
            self._write(where, key, record, new)
        except redis.RedisError as exc:
            if key not in self._failing:
                log.warning("%s: decision not recorded in Redis: %s", key, exc)
                self._failing.add(key)
            return
        self._failing.discard(key)
        if new:
            self._last[key] = signature

    def _write(
        self, where: tuple[RedisClient, Keys], key: str, record: dict[str, Any], new: bool
    ) -> None:
        client, keys = where
        text = json.dumps(record, sort_keys=True, separators=(",", ":"))
        bound_script(client, "scaler_report")(
            keys=[keys.scalers, keys.scaler(key), keys.decisions(key)],
            args=[key, text, text if new else "", self._cap, KEEP_MS],
            client=client,
        )

    def close(self) -> None:
        with self._lock:
            urls = list(self._clients)
            self._clients.clear()
            self._where.clear()
            self._url_of.clear()
        for url in urls:
            self._pool.release(url)
