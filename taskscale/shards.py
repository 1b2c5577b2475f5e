"""Spreading a deployment's task types over several key namespaces (shards).

Every key of a namespace shares one hash tag, so one namespace lives on one
Redis Cluster node and every script stays single-slot.  A deployment that
outgrows one node lists several namespaces, e.g. ``orders-0,orders-1,orders-2``
(``--namespace`` / ``TASKSCALE_NAMESPACE``, the TaskScaler's
``redis.namespace``), and each task type lives in exactly one of them, chosen
by a stable mapping: CRC-32 of the type name modulo the number of
namespaces (:meth:`ShardMap.namespace_for`; any language can compute it).
Producers, workers, schedulers, the controller's observer and ``taskscale
status`` all derive a type's namespace the same way, so they agree with no
coordination.  Changing the list re-maps types: drain first (docs/redis.md).

:func:`spread_namespaces` picks namespace names whose hash tags fall on
different cluster masters, so N namespaces use N masters.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from redis.cluster import RedisCluster
from redis.crc import key_slot

from taskscale.keys import Keys, check_name
from taskscale.producer import Producer, ProducerSettings
from taskscale.redis_urls import RedisClient


@dataclass(frozen=True)
class ShardMap:
    """The namespaces of one deployment and which one each task type lives in."""

    namespaces: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.namespaces:
            raise ValueError("list at least one namespace")
        for name in self.namespaces:
            check_name("namespace", name)
        if len(set(self.namespaces)) != len(self.namespaces):
            raise ValueError(f"namespaces listed twice in {','.join(self.namespaces)}")

    @classmethod
    def parse(cls, text: str) -> ShardMap:
        """``"a"`` or ``"a,b,c"`` (spaces around names are ignored)."""
        return cls(tuple(n.strip() for n in text.split(",")))

    @property
    def sharded(self) -> bool:
        return len(self.namespaces) > 1

    def namespace_for(self, task_type: str) -> str:
        """The namespace ``task_type`` lives in: CRC-32 of its name mod N."""
        check_name("task type", task_type)
        index = zlib.crc32(task_type.encode()) % len(self.namespaces)
        return self.namespaces[index]

    def keys_for(self, task_type: str) -> Keys:
        return Keys(self.namespace_for(task_type))

    def group(self, types: Iterable[str]) -> dict[str, tuple[str, ...]]:
        """namespace -> the given types that live there (namespaces with none left out)."""
        out: dict[str, list[str]] = {}
        for task_type in dict.fromkeys(types):
            out.setdefault(self.namespace_for(task_type), []).append(task_type)
        return {ns: tuple(found) for ns, found in out.items()}

    def only_namespace(self, types: Iterable[str]) -> Keys:
        """The one namespace all ``types`` live in; ValueError if they span several
        (a worker process serves one namespace: its lease and in-flight hash live there)."""
        groups = self.group(types)
        if len(groups) != 1:
            where = "; ".join(f"{ns}: {','.join(ts)}" for ns, ts in sorted(groups.items()))
            raise ValueError(
                f"these types live in different namespaces ({where}): "
                "run one worker per namespace, each with that namespace's types"
            )
        return Keys(next(iter(groups)))


class ShardedProducer:
    """Enqueues each task into its type's namespace (one :class:`Producer` per namespace)."""

    def __init__(
        self, client: RedisClient, shards: ShardMap, *, settings: ProducerSettings | None = None
    ) -> None:
        self.shards = shards
        self._producers = {
            ns: Producer(client, keys=Keys(ns), settings=settings) for ns in shards.namespaces
        }

    def for_type(self, task_type: str) -> Producer:
        """The producer of ``task_type``'s namespace (also for RPC and fan-out)."""
        return self._producers[self.shards.namespace_for(task_type)]

    def enqueue(self, task_type: str, *args: Any, **kwargs: Any) -> str:
        """:meth:`Producer.enqueue` in the type's namespace."""
        return self.for_type(task_type).enqueue(task_type, *args, **kwargs)

    def enqueue_many(self, task_type: str, calls: Any, **kwargs: Any) -> list[str]:
        """:meth:`Producer.enqueue_many` in the type's namespace."""
        return self.for_type(task_type).enqueue_many(task_type, calls, **kwargs)


def spread_namespaces(client: RedisCluster, base: str, count: int | None = None) -> tuple[str, ...]:
    """``count`` (default: one per master) namespace names ``base-K`` whose hash
    tags fall on different masters of the cluster, as it is laid out now.

    Choose them once and write them into the configuration: a later
    resharding may move a slot, which is harmless (two namespaces on one
    node), whereas a different list would re-map types.
    """
    masters = {node.name for node in client.get_primaries()}  # type: ignore[no-untyped-call]
    wanted = len(masters) if count is None else count
    if wanted > len(masters):
        raise ValueError(f"{wanted} namespaces on {len(masters)} masters: some would share")
    chosen: list[str] = []
    taken: set[str] = set()
    for k in range(100_000):
        name = f"{base}-{k}"
        slot = key_slot(Keys(name).prefix.encode())
        node = client.nodes_manager.get_node_from_slot(slot)
        if node.name not in taken:
            taken.add(node.name)
            chosen.append(name)
            if len(chosen) == wanted:
                return tuple(check_name("namespace", n) for n in chosen)
    raise RuntimeError("could not place a namespace on every master")  # pragma: no cover
