"""Read Redis into the controller's :class:`Observation` -- one round trip per poll.

Why one round trip: a controller may size many scalers with hundreds of task
types on one Redis, and every poll must see all of them at the same instant
on the same clock.  The read is one read-only Lua script (``observe.lua``,
flagged ``no-writes``): it takes ``TIME`` itself, so "due" and "upcoming"
delayed tasks are counted against the Redis clock the enqueue and promote
scripts use, never the controller's.  A plain pipeline could not do that --
it cannot feed the server's time into a ``ZCOUNT`` of the same batch -- nor
read the worker records whose ids it has not seen yet (bench/reconcile_bench.py
measures both).  A type's ready tasks are one field of the ``QUEUED`` hash
the scripts keep (docs/schema.md, "The ready count"); the heads of its ready
lists are decoded, and its earliest due delayed task read (for the oldest
wait), on every pass only for the types a request names in ``ages`` -- those
with a queue-wait target -- and for the others every ``ages_every_s``; a
delayed set is otherwise only counted.  The script's arguments are laid out once per
set of requests (observe_plan.py).

This module also holds the :class:`DemandListener`, the other half of the
controller's Redis input: a subscriber to the demand channel the enqueue
script publishes on when a ready queue goes from empty to non-empty, so a
target at zero replicas wakes at once instead of at the next poll.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis
from redis.client import PubSub

from taskscale.backoff import exponential
from taskscale.controller.observe_plan import (
    EVERY_PASS_STATS,
    STAT_FIELDS,
    Plan,
    build_plan,
)
from taskscale.controller.observe_plan import ObserveRequest as ObserveRequest
from taskscale.controller.types import Observation, TypeObservation, WorkerObservation
from taskscale.keys import Keys
from taskscale.limits import TypeLimits
from taskscale.luascripts import bound_script
from taskscale.redis_urls import RedisClient
from taskscale.server_clock import ServerTime
from taskscale.text import as_text

log = logging.getLogger(__name__)


class Observer:
    """Reads every type of every scaler sharing one Redis and namespace.

    ``observe`` is one ``EVALSHA`` (loaded on first use, reloaded after a
    ``SCRIPT FLUSH`` or a server restart).  Types requested by several scalers
    are read once.  Raises :class:`redis.RedisError` when Redis can't be read
    or returns data that does not fit the schema; the caller holds its
    replicas then (fail-static), it never reads missing data as "idle".

    The oldest ready and oldest due task of a type a request does not name
    in ``ages`` are read at most every ``ages_every_s`` seconds; in between
    their last reading is reported (None once the type has no ready, or no
    due, task).  So are the stats
    counters the policy does not use on every pass (EVERY_PASS_STATS): they
    are read on the same full passes and reported from the last one between.
    """

    def __init__(self, client: RedisClient, keys: Keys, *, ages_every_s: float = 10.0) -> None:
        self._client = client
        self._keys = keys
        self._script = bound_script(client, "observe")
        self._plan_cache: tuple[object, Plan] | None = None
        self.ages_every_s = ages_every_s
        self._ages_read_at = -float("inf")  # time.monotonic() of the last full read
        self._ready_ms: dict[str, int] = {}  # type -> its last oldest-ready reading
        self._due_ms: dict[str, int] = {}  # type -> its last oldest-due reading
        self._stats: dict[str, list[int]] = {}  # type -> its STAT_FIELDS at the last full read

    def observe(self, requests: Mapping[str, ObserveRequest]) -> dict[str, Observation]:
        """One round trip; returns one :class:`Observation` per request name."""
        plan = self._plan(requests)
        started = time.monotonic()
        full = started - self._ages_read_at >= self.ages_every_s
        aged = plan.all_ages if full else plan.every_pass_ages
        fields = STAT_FIELDS if full else STAT_FIELDS[EVERY_PASS_STATS]
        args = [*plan.args, aged, len(fields), *fields]
        reply = self._script(keys=list(plan.keys), args=args, client=self._client)
        if full:
            self._ages_read_at = started
            self._stats.clear()  # refilled for the types read now (drops the gone ones)
        ages = (self._ready_ms, self._due_ms)
        return _assemble(reply, plan, requests, ages, self._stats, full)

    def _plan(self, requests: Mapping[str, ObserveRequest]) -> Plan:
        signature = tuple(sorted((n, r.types, r.lead_s, r.ages) for n, r in requests.items()))
        if self._plan_cache is not None and self._plan_cache[0] == signature:
            return self._plan_cache[1]
        plan = build_plan(self._keys, requests)
        self._plan_cache = (signature, plan)
        return plan


def _assemble(
    reply: Any,
    plan: Plan,
    requests: Mapping[str, ObserveRequest],
    ages: tuple[dict[str, int], dict[str, int]],
    stats: dict[str, list[int]],
    full: bool,
) -> dict[str, Observation]:
    try:
        (
            seconds,
            micros,
            idle,
            per_type,
            upcoming,
            bad,
            flat_workers,
            schedulers,
            lims,
            paused,
        ) = reply
        if bad is not None:
            raise ValueError(f"not a number: {as_text(bad)}")
        at = ServerTime.from_reply(seconds, micros).unix_s
        rows = _type_rows(plan.types, idle, per_type, lims, paused, ages, stats, full)
        by_window = []  # in plan.windows' order
        taken = set()  # rows already given to a window: a type's second is a copy
        for i, ahead in zip(plan.window_types, upcoming, strict=True):
            values = rows[i]
            if i in taken:
                values = dict(values)
            taken.add(i)
            values["upcoming"] = ahead  # the window's own; the rest is the type's
            by_window.append(TypeObservation.from_fields(values))
        workers = _workers(flat_workers)
        alive = int(schedulers)
    except (TypeError, ValueError, IndexError) as exc:
        raise redis.DataError(f"observe: Redis data does not match the schema: {exc}") from exc
    served = _served(workers, plan.type_requests)
    pick = by_window.__getitem__
    out: dict[str, Observation] = {}
    for name, request in requests.items():
        # runs per scaler per pass: its windows picked by index, its workers
        # gathered once per worker above (no per-scaler set of every type's)
        out[name] = Observation.of(
            at,
            dict(zip(request.types, map(pick, plan.request_windows[name]), strict=True)),
            tuple(served.get(name, ())),
            alive,
        )
    return out


#: A type's TypeObservation fields by name, ``upcoming`` left to each window
#: (it depends on the window's lead).
_Row = dict[str, object]


def _type_rows(
    types: Sequence[str],
    idle: Sequence[Any],
    per_type: Sequence[Any],
    lims: Sequence[Any],
    paused: Sequence[Any],
    ages: tuple[dict[str, int], dict[str, int]],
    stats: dict[str, list[int]],
    full: bool,
) -> list[_Row]:
    """Every type's reading, in one pass over the script's flat reply
    (per type: queued, due, ready age ms, due age ms, active, the stats
    fields read, all integers; -1 = none, -2 = the age was not read).
    Keeps ``ages`` (the last oldest-ready and oldest-due readings, reported
    between the passes that read them) and ``stats`` (the
    counters: all of STAT_FIELDS on a full pass, the EVERY_PASS_STATS ones
    in place otherwise; a type first seen between full passes reads 0 for
    the others until the next).  The limits are decoded as claim.lua does:
    a field that does not decode is none."""
    m = len(STAT_FIELDS) if full else len(STAT_FIELDS[EVERY_PASS_STATS])
    width = 5 + m
    if len(per_type) != width * len(types):
        raise ValueError(f"{len(per_type)} per-type values for {len(types)} types")
    rows: list[_Row] = []
    ready_ms, due_ms_of = ages
    # the reply's columns, sliced at C speed, zipped back per type
    columns = zip(
        types,
        idle,
        per_type[0::width],
        per_type[1::width],
        per_type[2::width],
        per_type[3::width],
        per_type[4::width],
        strict=True,
    )
    base = 5
    for i, (t, since, queued, due, ready, due_ms, active) in enumerate(columns):
        if full:
            counters = stats[t] = list(per_type[base : base + m])
        else:
            counters = stats.get(t) or stats.setdefault(t, [0] * len(STAT_FIELDS))
            counters[EVERY_PASS_STATS] = per_type[base : base + m]
        base += width
        if ready != -2:
            ready_ms[t] = ready
        elif not queued:
            ready_ms[t] = -1  # nothing ready: no stale age
        ready = ready_ms.get(t, -1)
        if due_ms != -2:  # -2: due tasks, their age not read this pass
            due_ms_of[t] = due_ms
        else:
            due_ms = due_ms_of.get(t, -1)
        concurrency, rate = None, None
        spec = lims[i] if lims else None  # empty: no type has limits
        if spec is not None:
            try:
                limits = TypeLimits.from_json(t, spec)
                concurrency, rate = limits.concurrency, limits.rate_per_s
            except (ValueError, TypeError):
                pass
        c = counters  # STAT_FIELDS: 6 counters, the ages, 4 more
        rows.append(
            {
                "task_type": t,
                "queued": queued,
                "due": due,
                "upcoming": 0,
                "active": active,
                "idle_since": None if since is None else float(since),
                "enqueued_total": c[0],
                "claimed_total": c[1],
                "completed_total": c[2],
                "failed_total": c[3],
                "service_ms_total": c[4],
                "wait_ms_total": c[5],
                "oldest_ready_s": ready / 1000.0 if ready >= 0 else None,
                "oldest_due_s": due_ms / 1000.0 if due_ms >= 0 else None,
                "dead_total": c[6],
                "cancelled_total": c[7],
                "unique_hits_total": c[8],
                "dead_dropped_total": c[9],
                "concurrency_limit": concurrency,
                "rate_limit_per_s": rate,
                "paused": bool(paused) and paused[i] is not None,  # empty: none paused
            }
        )
    return rows


def _served(
    workers: Sequence[WorkerObservation], type_requests: Mapping[str, tuple[str, ...]]
) -> dict[str, list[WorkerObservation]]:
    """Request name -> the workers serving one of its types, each once and in
    ``workers``' order: which workers a scaler sees, from each worker's types
    (not every scaler's types against every worker: 100 x 100)."""
    index: dict[str, list[WorkerObservation]] = {}
    for w in workers:
        for t in w.types:
            for name in type_requests.get(t, ()):
                seen = index.get(name)
                if seen is None:
                    index[name] = [w]
                elif seen[-1] is not w:  # a worker's second type of the same scaler
                    seen.append(w)
    return index


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
