"""The observer of a deployment whose task types are spread over namespaces.

A TaskScaler's ``redis.namespace`` may list several namespaces (shards,
taskscale.shards): each type lives in the one :class:`ShardMap` names, so
each namespace is read by its own ``observe.lua`` call (one round trip per
namespace that holds a requested type; on a cluster, each on its own node)
and the results are merged per scaler: the types of every namespace, the
workers of every namespace, and the *fewest* live schedulers of any
namespace read (a namespace with none cannot promote its due tasks, and the
policy must not count them as demand).
"""

from __future__ import annotations

from collections.abc import Mapping

from taskscale.controller.observer import Observer, ObserveRequest
from taskscale.controller.sources import SourcedObserver, SourceReader
from taskscale.controller.types import Observation
from taskscale.keys import Keys
from taskscale.redis_urls import RedisClient
from taskscale.shards import ShardMap


class ShardedObserver:
    """Same interface as :class:`Observer`; reads every namespace that holds a requested type."""

    def __init__(self, client: RedisClient, shards: ShardMap) -> None:
        self.shards = shards
        self._observers = {ns: Observer(client, Keys(ns)) for ns in shards.namespaces}

    def observe(self, requests: Mapping[str, ObserveRequest]) -> dict[str, Observation]:
        parts: dict[str, list[Observation]] = {name: [] for name in requests}
        for ns, observer in self._observers.items():
            mine = {
                name: r.narrowed(types)
                for name, r in requests.items()
                if (types := tuple(t for t in r.types if self.shards.namespace_for(t) == ns))
            }
            if not mine:
                continue
            for name, observation in observer.observe(mine).items():
                parts[name].append(observation)
        return {name: _merge(found) for name, found in parts.items()}


def _merge(parts: list[Observation]) -> Observation:
    if len(parts) == 1:
        return parts[0]
    alive = [p.schedulers_alive for p in parts if p.schedulers_alive is not None]
    return Observation(
        at=max(p.at for p in parts),
        types={t: o for p in parts for t, o in p.types.items()},
        workers=tuple(w for p in parts for w in p.workers),
        schedulers_alive=min(alive) if alive else None,
    )


AnyObserver = Observer | ShardedObserver | SourcedObserver


def namespace_keys(namespace: str) -> list[Keys]:
    """The :class:`Keys` of each namespace of ``"a"`` or ``"a,b,c"``."""
    return [Keys(ns) for ns in ShardMap.parse(namespace).namespaces]


def observer_for(client: RedisClient, namespace: str) -> AnyObserver:
    """An :class:`Observer` for one namespace, a :class:`ShardedObserver` for a
    list; either in a :class:`SourcedObserver` that reads the types of other
    sources (Celery, RQ, lists) too -- those only with one namespace."""
    shards = ShardMap.parse(namespace)
    if shards.sharded:
        return SourcedObserver(ShardedObserver(client, shards), None)
    keys = Keys(shards.namespaces[0])
    return SourcedObserver(Observer(client, keys), SourceReader(client, keys))
