"""Observer sources: the demand of Celery, RQ and plain-list workers, read from Redis.

Why it exists: a TaskScaler may scale workers that are not taskscale's
(source_spec.py says how a type names its source).  Their waiting work is in
the keys their libraries lay out (taskscale.keys names them); their running
work is counted in taskscale's ``ACTIVE_TASKS``/``IDLE_SINCE`` by the
integrations or ``taskscale.track``.  :class:`SourceReader` reads all of it
for every such type in one read-only ``sources.lua`` call on the Redis clock,
and :class:`SourcedObserver` puts those types beside the ones observe.lua
reads, so the policy sees one :class:`Observation` per scaler whatever the
source.  A scaler whose types are all of other sources costs one round trip
(sources.lua); a scaler that mixes costs two.

What each source counts (docs/sources.md):

- ``celery``: queued = every list of each queue (the queue's own list and its
  priority-step lists); in flight = the larger of the task names'
  ``ACTIVE_TASKS`` and the queue's messages in kombu's ``unacked`` hash
  (prefetched, ETA/countdown-held, or -- with ``acks_late`` -- running: every
  one of them is held by a live worker).  The larger, not the sum, so a
  running ``acks_late`` task counted in both is counted once.
- ``rq``: queued = the queue's list plus its scheduled jobs already due (RQ's
  scheduler runs inside a worker, so a due job needs a worker, not a
  taskscale scheduler); upcoming = scheduled jobs due within the warm-up lead;
  in flight = the larger of ``ACTIVE_TASKS`` and the StartedJobRegistry's
  unexpired jobs (the same job in both is counted once).
- ``list``: queued = the lists' lengths; in flight = ``ACTIVE_TASKS``.

For every source, the rate floor's counters are the ``stats`` hashes of the
type's task names, which the integrations and ``taskscale.track`` keep.

Busy pods: the integrations' processes record the pod they run in
(``POD_NAME``) beside their lease (taskscale.tracking), so the same call reads
which live tracked process runs which task names.  A process running one of
a scaler's task names becomes a :class:`WorkerObservation` of that scaler
(its pod, busy = every task it runs, threads unknown: 0), and the policy's
busy-pod hold, pod-deletion-cost and a local pool's choice of whom to stop
see Celery and RQ workers as they see taskscale's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import redis

from taskscale.controller.observer import ObserveRequest
from taskscale.controller.source_spec import CELERY, LIST, RQ, TypeSource
from taskscale.controller.types import Observation, TypeObservation, WorkerObservation
from taskscale.keys import (
    CELERY_UNACKED,
    Keys,
    celery_queue_lists,
    rq_queue,
    rq_scheduled,
    rq_started,
)
from taskscale.luascripts import bound_script
from taskscale.redis_urls import RedisClient
from taskscale.server_clock import ServerTime
from taskscale.text import as_text

#: Most entries of kombu's unacked hash read per pass; a larger hash is
#: sampled and the counts scaled (each entry is a whole message: reading
#: 10,000 held Redis for about half a second, docs/sources.md).
UNACKED_SAMPLE = 1000
#: Most live tracked processes read per pass (the ones with the soonest lease
#: expiry first); each costs an HVALS of its few running tasks and an HGET.
TRACKED_PROCESSES = 2000


class NativeObserver(Protocol):
    """observe.lua's side: :class:`Observer` or :class:`ShardedObserver`."""

    def observe(self, requests: Mapping[str, ObserveRequest]) -> dict[str, Observation]: ...


@dataclass(frozen=True)
class SourceReading:
    """What one sources.lua call read: the Redis time and a row per type."""

    at: float
    #: One per (source, look-ahead) asked for, in the order asked.
    types: tuple[TypeObservation, ...]
    #: Live tracked processes running something: (process id, pod, task names).
    processes: tuple[tuple[str, str, tuple[str, ...]], ...] = ()


class SourceReader:
    """Reads the types of other sources with one ``EVALSHA`` of sources.lua."""

    def __init__(self, client: RedisClient, keys: Keys) -> None:
        self._client = client
        self._keys = keys
        self._script = bound_script(client, "sources")

    def read(self, wanted: Sequence[tuple[TypeSource, float]]) -> SourceReading:
        """Read each (source, look-ahead seconds) once; raise redis.RedisError."""
        with_unacked = any(s.kind == CELERY for s, _ in wanted)
        script_keys = [self._keys.active, self._keys.idle_since]
        if with_unacked:
            script_keys.append(CELERY_UNACKED)
        args: list[str | int] = [UNACKED_SAMPLE if with_unacked else 0, len(wanted)]
        for source, lead_s in wanted:
            lists, started, scheduled = _keys_of(source)
            script_keys += [*lists, *started, *scheduled]
            script_keys += [self._keys.stats(task) for task in source.tasks]
            routing = source.queues if source.kind == CELERY else ()
            args += [len(lists), len(started), len(scheduled), max(0, round(lead_s * 1000))]
            args += [len(routing), *routing, len(source.tasks), *source.tasks]
        script_keys += [self._keys.tracked_processes, self._keys.tracked_pods]
        args += [TRACKED_PROCESSES, self._keys.prefix]
        reply = self._script(keys=script_keys, args=args, client=self._client)
        try:
            seconds, micros, rows, processes = reply
            pairs = zip(wanted, rows, strict=True)
            types = tuple(_type_observation(source, row) for (source, _), row in pairs)
            return SourceReading(
                at=ServerTime.from_reply(seconds, micros).unix_s,
                types=types,
                processes=tuple(
                    (
                        as_text(pid, errors="replace"),
                        as_text(pod, errors="replace"),
                        tuple(as_text(n, errors="replace") for n in names),
                    )
                    for pid, pod, names in processes
                ),
            )
        except (TypeError, ValueError) as exc:
            raise redis.DataError(f"sources: unexpected reply: {exc}") from exc


def _keys_of(source: TypeSource) -> tuple[list[str], list[str], list[str]]:
    """(lists, running-job zsets, scheduled-job zsets) of one type."""
    if source.kind == CELERY:
        return [k for q in source.queues for k in celery_queue_lists(q)], [], []
    if source.kind == RQ:
        qs = source.queues
        return [rq_queue(q) for q in qs], [rq_started(q) for q in qs], [rq_scheduled(q) for q in qs]
    if source.kind == LIST:
        return list(source.queues), [], []
    raise ValueError(f"unknown source {source.kind!r}")


def tracked_workers(
    sources: Sequence[TypeSource], processes: Sequence[tuple[str, str, tuple[str, ...]]]
) -> tuple[WorkerObservation, ...]:
    """The tracked processes that run one of ``sources``' task names, as
    workers of their types: busy = every task the process runs (a pod busy
    with anything must not be stopped), threads 0 (not known)."""
    types_of: dict[str, set[str]] = {}
    for source in sources:
        for task in source.tasks:
            types_of.setdefault(task, set()).add(source.task_type)
    out = []
    for pid, pod, names in processes:
        served = {t for name in names for t in types_of.get(name, ())}
        if served:
            out.append(WorkerObservation(pid, pod, tuple(sorted(served)), 0, len(names)))
    return tuple(out)


def _type_observation(source: TypeSource, row: Sequence[Any]) -> TypeObservation:
    queued, reserved, running, due, upcoming, active, idle, *stats = row
    claimed, completed, failed, service_ms = (int(v) for v in stats)
    return TypeObservation(
        task_type=source.task_type,
        # RQ's due jobs wait for a worker (its scheduler runs in one): ready work
        queued=int(queued) + int(due),
        upcoming=int(upcoming),
        # held by a worker: counted once whether the registry, kombu or ACTIVE_TASKS saw it
        active=max(int(active), int(reserved), int(running)),
        idle_since=float(idle) if idle else None,
        # kept by the integrations / taskscale.track per task name: the rate floor's inputs
        claimed_total=claimed,
        completed_total=completed,
        failed_total=failed,
        service_ms_total=service_ms,
    )


class SourcedObserver:
    """The observer of a group: observe.lua for taskscale's types, sources.lua
    for the rest, merged per scaler (same interface as :class:`Observer`)."""

    def __init__(self, native: NativeObserver, reader: SourceReader | None) -> None:
        self.native = native
        self._reader = reader

    def observe(self, requests: Mapping[str, ObserveRequest]) -> dict[str, Observation]:
        foreign = {name: {s.task_type: s for s in r.sources} for name, r in requests.items()}
        native_requests = {
            name: r.narrowed(types)
            for name, r in requests.items()
            if (types := tuple(t for t in r.types if t not in foreign[name]))
        }
        out = self.native.observe(native_requests) if native_requests else {}
        wanted = list(dict.fromkeys((s, r.lead_s) for r in requests.values() for s in r.sources))
        if not wanted:
            return out
        if self._reader is None:
            raise redis.DataError("celery, rq and list sources need a single key namespace")
        reading = self._reader.read(wanted)
        by_source = dict(zip(wanted, reading.types, strict=True))
        merged = {}
        for name, r in requests.items():
            mine = {s.task_type: by_source[(s, r.lead_s)] for s in r.sources}
            base = out.get(name) or Observation(at=reading.at, types={})
            merged[name] = Observation(
                at=base.at,
                types={t: base.types.get(t) or mine[t] for t in r.types},
                workers=base.workers + tracked_workers(r.sources, reading.processes),
                schedulers_alive=base.schedulers_alive,
            )
        return merged
