"""What the reconciler keeps per scaler and per group of scalers.

A :class:`ScalerState` is one registered scaler: its config and actuator, the
policy's history, when its next pass is due and how many passes in a row
failed.  Scalers that share a Redis and key namespace form a
:class:`ScalerGroup`: one :class:`Observer` (so the passes that fall due
together read Redis in one round trip) and one :class:`DemandListener`,
opened by :func:`open_group` when the first member joins and closed by
:func:`close_group` when the last one leaves.  Its Redis client is the one
the controller holds for the URL (:class:`RedisClients`), shared with the
other namespaces on that Redis and with the decision log.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from taskscale.controller.config import ScalerConfig
from taskscale.controller.history import History
from taskscale.controller.observer import DemandListener
from taskscale.controller.redis_clients import RedisClients
from taskscale.controller.sharded import AnyObserver, namespace_keys, observer_for
from taskscale.controller.types import Actuator
from taskscale.redis_urls import RedisClient

#: (redis url, key namespace): the scalers that share it form a group.
GroupKey = tuple[str, str]


@dataclass
class ScalerState:
    config: ScalerConfig
    actuator: Actuator
    group: GroupKey
    history: History
    next_due: float = 0.0  #: monotonic time of the next pass
    failures: int = 0
    last_current: int | None = None
    redis_failures: int = 0  #: passes in a row that could not read Redis (for the fallback)


@dataclass
class ScalerGroup:
    url: str
    client: RedisClient
    observer: AnyObserver
    listener: DemandListener | None = None
    members: set[str] = field(default_factory=set)
    #: The server's version was read and is new enough (connection.check_version):
    #: read on the group's first pass, again after a refusal (it may be upgraded).
    version_checked: bool = False


def open_group(
    group_key: GroupKey,
    *,
    clients: RedisClients,
    on_demand: Callable[[str], None] | None,
    on_listener_error: Callable[[BaseException], None],
) -> ScalerGroup:
    """An observer for ``group_key`` on the URL's client from ``clients``; with
    ``on_demand``, a started demand listener that calls it with each task type
    gone non-empty."""
    url, key_namespace = group_key
    client = clients.acquire(url)  # a cluster reads its slot map here
    try:
        keys = namespace_keys(key_namespace)  # several when types are spread over shards
        group = ScalerGroup(url=url, client=client, observer=observer_for(client, key_namespace))
    except BaseException:
        clients.release(url)
        raise
    if on_demand is not None:
        group.listener = DemandListener(client, keys, on_demand, on_error=on_listener_error)
        group.listener.start()
    return group


def close_group(group: ScalerGroup, clients: RedisClients) -> None:
    """Stop the group's demand listener and let go of its Redis client."""
    if group.listener is not None:
        group.listener.stop()
    clients.release(group.url)
