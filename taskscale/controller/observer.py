"""Read Redis into the controller's :class:`Observation` -- one round trip per poll.

Why one round trip: a controller may size many scalers with hundreds of task
types on one Redis, and every poll must see all of them at the same instant
on the same clock.  The read is one read-only Lua script (``observe.lua``,
flagged ``no-writes``): it takes ``TIME`` itself, so "due" and "upcoming"
delayed tasks are counted against the Redis clock the enqueue and promote
scripts use, never the controller's.  A plain pipeline could not do that --
it cannot feed the server's time into a ``ZCOUNT`` of the same batch -- nor
read the worker records whose ids it has not seen yet (bench/reconcile_bench.py
measures both; the script is 4-6x faster for 1000 types).  Per-type key names
are built inside the script from (before, after) templates derived from
taskscale.keys: passing 12 names per type as KEYS cost more than the reads.

This module also holds the :class:`DemandListener`, the other half of the
controller's Redis input: a subscriber to the demand channel the enqueue
script publishes on when a ready queue goes from empty to non-empty, so a
target at zero replicas wakes at once instead of at the next poll.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis
from redis.client import PubSub

from taskscale.backoff import exponential
from taskscale.controller.source_spec import TypeSource
from taskscale.controller.types import Observation, TypeObservation, WorkerObservation
from taskscale.keys import DEFAULT_PRIORITY, PRIORITY_LEVELS, Keys, check_name
from taskscale.limits import TypeLimits
from taskscale.luascripts import bound_script
from taskscale.redis_urls import RedisClient
from taskscale.server_clock import ServerTime
from taskscale.text import as_text

log = logging.getLogger(__name__)

#: Stats counters read per type, in the order of TypeObservation's *_total fields.
_STAT_FIELDS: tuple[str, ...] = (
    "enqueued",
    "claimed",
    "completed",
    "failed",
    "service_ms",
    "wait_ms",
    "dead",
    "cancelled",
    "unique_hits",
    "dead_dropped",
)


@dataclass(frozen=True)
class ObserveRequest:
    """What one scaler wants read: its task types and its warm-up lead."""

    types: tuple[str, ...]
    #: Delayed tasks due within this many seconds after now are "upcoming".
    lead_s: float
    #: Types read from another source (Celery, RQ, lists; see sources.py);
    #: only :class:`SourcedObserver` reads them, :class:`Observer` ignores them.
    sources: tuple[TypeSource, ...] = ()


@dataclass(frozen=True)
class _Plan:
    """The script's arguments for one set of requests (cached between polls)."""

    types: tuple[str, ...]
    keys: tuple[str, ...]
    args: tuple[str | int, ...]
    #: (type, lead ms) of each look-ahead window, in the script's order.
    windows: tuple[tuple[str, int], ...]


class Observer:
    """Reads every type of every scaler sharing one Redis and namespace.

    ``observe`` is one ``EVALSHA`` (loaded on first use, reloaded after a
    ``SCRIPT FLUSH`` or a server restart).  Types requested by several scalers
    are read once.  Raises :class:`redis.RedisError` when Redis can't be read
    or returns data that does not fit the schema; the caller holds its
    replicas then (fail-static), it never reads missing data as "idle".
    """

    def __init__(self, client: RedisClient, keys: Keys) -> None:
        self._client = client
        self._keys = keys
        self._script = bound_script(client, "observe")
        self._plan_cache: tuple[object, _Plan] | None = None

    def observe(self, requests: Mapping[str, ObserveRequest]) -> dict[str, Observation]:
        """One round trip; returns one :class:`Observation` per request name."""
        plan = self._plan(requests)
        reply = self._script(keys=list(plan.keys), args=list(plan.args), client=self._client)
        return _assemble(reply, plan, requests)

    def _plan(self, requests: Mapping[str, ObserveRequest]) -> _Plan:
        signature = tuple(sorted((name, r.types, r.lead_s) for name, r in requests.items()))
        if self._plan_cache is not None and self._plan_cache[0] == signature:
            return self._plan_cache[1]
        plan = _build_plan(self._keys, requests)
        self._plan_cache = (signature, plan)
        return plan


def _build_plan(keys: Keys, requests: Mapping[str, ObserveRequest]) -> _Plan:
    """Deduplicate types across requests and lay out observe.lua's KEYS and ARGV."""
    types = tuple(dict.fromkeys(t for r in requests.values() for t in r.types))
    for t in types:
        check_name("task type", t)  # it becomes part of key names inside the script
    index = {t: i + 1 for i, t in enumerate(types)}
    windows = tuple(dict.fromkeys((t, _lead_ms(r)) for r in requests.values() for t in r.types))
    lists = [_template(functools.partial(keys.queue, priority=p)) for p in _levels_common_first()]
    args: list[str | int] = [
        keys.worker(""),
        *_template(keys.delayed),
        *_template(keys.stats),
        len(lists),
        *(part for pair in lists for part in pair),
        len(types),
        *types,
        len(_STAT_FIELDS),
        *_STAT_FIELDS,
        len(windows),
        *(value for t, lead_ms in windows for value in (index[t], lead_ms)),
    ]
    script_keys = (keys.active, keys.idle_since, keys.workers, keys.schedulers, keys.limits)
    return _Plan(types, script_keys, tuple(args), windows)


#: Stands for the type name while a key template is derived from Keys.
_MARK = "\x00"


def _template(key_of_type: Callable[[str], str]) -> tuple[str, str]:
    """(before, after) around the type name in a per-type key, derived from
    taskscale.keys so the script never spells a key name itself."""
    before, after = key_of_type(_MARK).split(_MARK)
    return before, after


def _levels_common_first() -> list[int]:
    """Priority levels, the default first: the script stops reading a type's
    lists once it has seen every non-empty one, and most tasks use the default."""
    return [DEFAULT_PRIORITY, *(p for p in range(PRIORITY_LEVELS) if p != DEFAULT_PRIORITY)]


def _assemble(
    reply: Any, plan: _Plan, requests: Mapping[str, ObserveRequest]
) -> dict[str, Observation]:
    try:
        (
            seconds,
            micros,
            active,
            idle,
            per_type,
            upcoming,
            flat_workers,
            schedulers,
            ages,
            lims,
        ) = reply
        at = ServerTime.from_reply(seconds, micros).unix_s
        position = {t: i for i, t in enumerate(plan.types)}
        by_window = {
            (t, lead_ms): _with_ages(
                _type_observation(
                    t, active[position[t]], idle[position[t]], per_type[position[t]], ahead
                ),
                ages[position[t]],
            )
            for (t, lead_ms), ahead in zip(plan.windows, upcoming, strict=True)
        }
        workers = _workers(flat_workers)
        by_window = {
            key: _with_limits(obs, lims[position[key[0]]]) for key, obs in by_window.items()
        }
    except (TypeError, ValueError) as exc:
        raise redis.DataError(f"observe: Redis data does not match the schema: {exc}") from exc
    out: dict[str, Observation] = {}
    for name, request in requests.items():
        lead_ms = _lead_ms(request)
        served = set(request.types)
        out[name] = Observation(
            at=at,
            types={t: by_window[(t, lead_ms)] for t in request.types},
            workers=tuple(w for w in workers if served.intersection(w.types)),
            schedulers_alive=int(schedulers),
        )
    return out


def _lead_ms(request: ObserveRequest) -> int:
    return max(0, round(request.lead_s * 1000))


def _type_observation(
    task_type: str, active: Any, idle: Any, row: Sequence[Any], upcoming: Any
) -> TypeObservation:
    queued, due, *stats = row
    counters = [_int_or_zero(v) for v in stats]
    return TypeObservation(
        task_type=task_type,
        queued=int(queued),
        due=int(due),
        upcoming=int(upcoming),
        active=max(0, _int_or_zero(active)),
        idle_since=None if idle is None else float(idle),
        enqueued_total=counters[0],
        claimed_total=counters[1],
        completed_total=counters[2],
        failed_total=counters[3],
        service_ms_total=counters[4],
        wait_ms_total=counters[5],
        dead_total=counters[6],
        cancelled_total=counters[7],
        unique_hits_total=counters[8],
        dead_dropped_total=counters[9],
    )


def _with_ages(obs: TypeObservation, ages: Sequence[Any]) -> TypeObservation:
    """Add the oldest ready and due waits ({ms, ms}, -1 = none) to ``obs``."""
    ready_ms, due_ms = (int(v) for v in ages)
    return dataclasses.replace(
        obs,
        oldest_ready_s=ready_ms / 1000.0 if ready_ms >= 0 else None,
        oldest_due_s=due_ms / 1000.0 if due_ms >= 0 else None,
    )


def _with_limits(obs: TypeObservation, spec: Any) -> TypeObservation:
    """Add the type's flow-control limits (a field that does not decode is none,
    as it is for claim.lua)."""
    if spec is None:
        return obs
    try:
        limits = TypeLimits.from_json(obs.task_type, spec)
    except (ValueError, TypeError):
        return obs
    return dataclasses.replace(
        obs, concurrency_limit=limits.concurrency, rate_limit_per_s=limits.rate_per_s
    )


def _int_or_zero(value: Any) -> int:
    return 0 if value is None else int(value)


def _workers(flat: Sequence[Any]) -> tuple[WorkerObservation, ...]:
    if len(flat) % 5:
        raise ValueError("worker rows are not 5 fields each")
    rows = (flat[i : i + 5] for i in range(0, len(flat), 5))
    return tuple(
        WorkerObservation(
            worker_id=as_text(wid),
            pod=as_text(pod),
            types=tuple(t for t in as_text(types).split(",") if t),
            threads=int(threads),
            busy=max(0, int(busy)),
        )
        for wid, pod, types, threads, busy in rows
    )


@dataclass(frozen=True)
class ListenerSettings:
    """Timing of the :class:`DemandListener`'s loop."""

    #: How long one wait for a message blocks (bounds the reaction to stop()).
    poll_s: float = 0.5
    #: Backoff after a Redis error: starts here, doubles, capped at max.
    retry_initial_s: float = 0.1
    retry_max_s: float = 5.0


class DemandListener:
    """Calls ``on_demand(task_type)`` for every demand signal, from a daemon thread.

    The enqueue and promote scripts publish a type's name on
    ``keys.demand_channel`` when its ready queue goes from empty to
    non-empty.  The listener survives Redis restarts: after an error it
    backs off and subscribes again.  A signal published while it was
    disconnected is lost, which is harmless -- the reconciler's regular poll
    is level-triggered and sees the queue anyway; the signal only makes it
    sooner.  Exceptions raised by ``on_demand`` are logged, never fatal.
    """

    def __init__(
        self,
        client: RedisClient,
        keys: Keys | Sequence[Keys],
        on_demand: Callable[[str], None],
        *,
        settings: ListenerSettings | None = None,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self._client = client
        self._on_error = on_error
        # every namespace's channel (several when types are spread over shards)
        self._channels = [k.demand_channel for k in ([keys] if isinstance(keys, Keys) else keys)]
        self._on_demand = on_demand
        self._settings = settings or ListenerSettings()
        self._stop = threading.Event()
        self._subscribed = threading.Event()
        self._thread: threading.Thread | None = None
        self._had_subscription = False

    def start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, name="taskscale-demand-listener", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def wait_subscribed(self, timeout: float) -> bool:
        """True once the subscription is confirmed (signals sent before are missed)."""
        return self._subscribed.wait(timeout)

    def _run(self) -> None:
        failures = 0  # in a row: a confirmed subscription starts the backoff over
        while not self._stop.is_set():
            try:
                self._listen()
                return
            except (redis.RedisError, OSError) as exc:
                if self._had_subscription:
                    failures = 0
                delay = exponential(
                    failures,
                    base_s=self._settings.retry_initial_s,
                    cap_s=self._settings.retry_max_s,
                )
                failures += 1
                log.warning("demand listener: %s; resubscribing in %.1f s", exc, delay)
                if self._on_error is not None:
                    self._on_error(exc)
                self._stop.wait(delay)

    def _listen(self) -> None:
        self._had_subscription = False
        # redis-py leaves pubsub() unannotated; it returns a redis.client.PubSub.
        pubsub: PubSub = self._client.pubsub()  # type: ignore[no-untyped-call]
        try:
            pubsub.subscribe(*self._channels)
            while not self._stop.is_set():
                message = pubsub.get_message(timeout=self._settings.poll_s)
                if message is None:
                    continue
                if message["type"] == "subscribe":
                    self._had_subscription = True
                    if int(message["data"]) == len(self._channels):  # all confirmed
                        self._subscribed.set()
                elif message["type"] == "message":
                    self._dispatch(as_text(message["data"]))
        finally:
            self._subscribed.clear()
            pubsub.close()

    def _dispatch(self, task_type: str) -> None:
        try:
            self._on_demand(task_type)
        except Exception:
            log.exception("demand listener: on_demand(%r) failed", task_type)
