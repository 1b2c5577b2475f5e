"""Enqueues that wait for replicas: the optional guard against failover loss.

Redis replicates asynchronously.  An enqueue the master acknowledged but had
not yet sent to a replica is gone if that master dies and the replica takes
over (Sentinel or Cluster failover).  ``WAIT n timeout`` blocks until ``n``
replicas have every write *of this connection* so far, so it must follow the
enqueue script on the same connection: here both go in one pipeline, on the
client's own connection (one server, or Sentinel's current master) or on the
cluster node that serves the namespace's slot.

When fewer than ``n`` replicas confirm in time, :class:`NotReplicated` is
raised: the task *was* enqueued (retrying would duplicate it), but a failover
now could lose it -- the caller decides.  A redirect or a lost connection on
a cluster node refreshes the slot map and raises a transient error, so
:func:`taskscale.retrying.retrying` tries again on the new master.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import redis
from redis.cluster import RedisCluster
from redis.commands.core import Script
from redis.exceptions import AskError, TryAgainError

from taskscale.redis_urls import RedisClient


class NotReplicated(redis.RedisError):
    """The write was made, but fewer replicas than asked confirmed it in time."""

    def __init__(self, confirmed: int, wanted: int, timeout_s: float) -> None:
        super().__init__(
            f"enqueued, but only {confirmed} of {wanted} replica(s) confirmed it within "
            f"{timeout_s:g} s: a failover now could lose it (do not re-enqueue blindly)"
        )
        self.confirmed = confirmed
        self.wanted = wanted


def call_and_wait(
    client: RedisClient,
    script: Script,
    keys: Sequence[str],
    args: Sequence[Any],
    *,
    replicas: int,
    timeout_s: float,
) -> Any:
    """``script(keys, args)`` then ``WAIT replicas timeout`` on the same connection;
    the script's reply, or :class:`NotReplicated`."""
    target: redis.Redis
    if isinstance(client, RedisCluster):
        node = client.get_node_from_key(keys[0])  # type: ignore[no-untyped-call]
        target = node.redis_connection
    else:
        target = client
    pipe = target.pipeline(transaction=False)
    script(keys=list(keys), args=list(args), client=pipe)
    pipe.execute_command(  # type: ignore[no-untyped-call]
        "WAIT", replicas, max(1, round(timeout_s * 1000))
    )
    try:
        reply, confirmed = pipe.execute()
    except (AskError, redis.ConnectionError, redis.TimeoutError) as exc:
        if isinstance(client, RedisCluster):  # the slot moved or its master died
            with contextlib.suppress(redis.RedisError):
                client.nodes_manager.initialize()
            raise TryAgainError(f"cluster changed ({type(exc).__name__}); try again") from exc
        raise
    if int(confirmed) < replicas:
        raise NotReplicated(int(confirmed), replicas, timeout_s)
    return reply
