"""The drain flags in Redis: which pods' workers must claim nothing.

``{ns}:draining`` (docs/schema.md) is a hash pod -> unix ms its drain was
first seen; ``claim.lua`` gives a worker whose pod has a field nothing, so the
pod finishes what it runs and goes idle, and the eviction a drain asked for
proceeds (controller/disruption.py marks and unmarks the pod).  The controller
writes it with ``drain_flags.lua`` on every pass of a scaler, in every
namespace of the scaler's ``redis.namespace`` (a sharded list: its workers
may claim from any of them): the pods on a leaving node are flagged, the
others of the target cleared, and the flags of pods that are gone cleared.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from taskscale.keys import Keys
from taskscale.luascripts import bound_script
from taskscale.redis_urls import RedisClient
from taskscale.shards import ShardMap
from taskscale.text import as_text


@dataclass(frozen=True)
class Flags:
    """What a :func:`sync_flags` call left in Redis."""

    new: tuple[str, ...] = ()  #: pods flagged by the call (not before it)
    #: every flag: pod -> unix ms (None: a malformed time, still a flag)
    since_ms: dict[str, int | None] = field(default_factory=dict)


def sync_flags(
    client: RedisClient, key_namespace: str, flag: Collection[str], clear: Collection[str]
) -> Flags:
    """Flag the pods of ``flag`` and clear those of ``clear`` in each namespace of
    ``key_namespace``; the flags afterwards (a pod's earliest time across them)."""
    new: set[str] = set()
    since: dict[str, int | None] = {}
    for namespace in ShardMap.parse(key_namespace).namespaces:
        keys = Keys(namespace)
        reply = bound_script(client, "drain_flags")(
            keys=[keys.draining], args=[len(flag), *flag, *clear], client=client
        )
        count = int(reply[0])
        new.update(as_text(p) for p in reply[1 : 1 + count])
        rest = reply[1 + count :]
        for pod, ms in zip(rest[::2], rest[1::2], strict=True):
            name, value, seen = as_text(pod), _ms(ms), since.get(as_text(pod))
            since[name] = value if seen is None else min(seen, value or seen)
    return Flags(new=tuple(sorted(new)), since_ms=since)


def _ms(value: bytes) -> int | None:
    """A flag's time; None for a malformed one (written by hand: still a flag)."""
    try:
        return int(float(value))
    except (ValueError, OverflowError):
        return None
