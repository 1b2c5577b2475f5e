"""What the reconciler keeps per scaler and per group of scalers.

A :class:`ScalerState` is one registered scaler: its config and actuator, the
policy's history, when its next pass is due and how many passes in a row
failed.  Scalers that share a Redis and key namespace form a
:class:`ScalerGroup`: one Redis client, one :class:`Observer` (so the passes
that fall due together read Redis in one round trip) and one
:class:`DemandListener`, opened by :func:`open_group` when the first member
joins and closed by :func:`close_group` when the last one leaves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from taskscale.controller.config import ScalerConfig
from taskscale.controller.history import History
from taskscale.controller.observer import DemandListener
from taskscale.controller.sharded import AnyObserver, namespace_keys, observer_for
from taskscale.controller.types import Actuator
from taskscale.redis_urls import RedisClient, build_client

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
    client: RedisClient
    observer: AnyObserver
    listener: DemandListener | None = None
    members: set[str] = field(default_factory=set)


def open_group(
    group_key: GroupKey,
    *,
    timeout_s: float,
    on_demand: Callable[[str], None] | None,
    on_listener_error: Callable[[BaseException], None],
) -> ScalerGroup:
    """A Redis client and observer for ``group_key``; with ``on_demand``, a
    started demand listener that calls it with each task type gone non-empty."""
    url, key_namespace = group_key
    client = build_client(  # a cluster reads its slot map here
        url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s, health_check_interval=30
    )
    keys = namespace_keys(key_namespace)  # several when types are spread over shards
    group = ScalerGroup(client=client, observer=observer_for(client, key_namespace))
    if on_demand is not None:
        group.listener = DemandListener(client, keys, on_demand, on_error=on_listener_error)
        group.listener.start()
    return group


def close_group(group: ScalerGroup) -> None:
    """Stop the group's demand listener and close its Redis client."""
    if group.listener is not None:
        group.listener.stop()
    group.client.close()
