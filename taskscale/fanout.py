"""Fan-out: one request split into many sub-tasks, at most C of them running at once.

A caller with a large batch (resize 10,000 images, call a rate-limited API
for each of 500 accounts) wants three things no plain queue gives: the batch
must not flood the workers and starve everyone else's tasks, it must not
exceed a concurrency limit the *downstream* imposes (C across every worker,
not per worker), and the caller must learn when the whole batch is over.

The design keeps the limit in Redis, not in any worker: :func:`submit_fanout`
runs one script that releases the first C sub-tasks to the ordinary ready
list and parks the rest in a per-request pending list. Each final outcome of
a sub-task (in the worker's ``complete`` / ``fail`` scripts) releases the
next one, so the slot passes on atomically and there is never a moment with
C + 1 released. Released sub-tasks are ordinary tasks: other requests' tasks
interleave with them, a dead worker's sub-task is returned by the reaper and
keeps its slot, and retries keep it too. When the last one finishes the same
script pushes one completion notice and publishes it (docs/schema.md,
"Fan-out accounting").

Waiting does not consume the notice (``BLMOVE`` of the one-element list onto
itself), so any number of waiters in any process can wait on the same id.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from redis.commands.core import Script

from taskscale import envelope, tracing
from taskscale.connection import RedisLike, client_for
from taskscale.keys import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    DEFAULT_PRIORITY,
    WAKE_TOKENS_CAP,
    Keys,
    check_name,
    parse_priority,
)
from taskscale.luascripts import bound_script
from taskscale.options import DEFAULT_MAX_RETRIES
from taskscale.producer import Call
from taskscale.redis_urls import RedisClient
from taskscale.rpc import block_in_slices
from taskscale.text import as_text

log = logging.getLogger(__name__)

#: One sub-request: a list/tuple of positional arguments, a mapping of
#: keyword arguments, or a :class:`taskscale.producer.Call` for both.
ArgSet = Sequence[Any] | Mapping[str, Any] | Call


class FanoutTimeout(TimeoutError):
    """The fan-out did not finish within the time the caller waited."""

    def __init__(self, fanout_id: str, timeout: float) -> None:
        super().__init__(f"fan-out {fanout_id} not finished after {timeout:g} s")
        self.fanout_id = fanout_id
        self.timeout = timeout


class UnknownFanout(LookupError):
    """No fan-out with this id exists (never submitted, or its keys expired)."""


@dataclass(frozen=True)
class FanoutResult:
    """The completion notice: how many sub-tasks there were and how they ended;
    with ``results`` when a streamed fan-out's ``wait(collect=True)`` asked
    (:mod:`taskscale.fanout_stream`)."""

    id: str
    total: int
    succeeded: int
    failed: int
    results: tuple[Any, ...] | None = None

    @property
    def ok(self) -> bool:
        return self.failed == 0

    @classmethod
    def from_json(cls, raw: bytes | str) -> FanoutResult:
        data = json.loads(raw)
        return cls(
            id=str(data["id"]),
            total=int(data["total"]),
            succeeded=int(data["succeeded"]),
            failed=int(data["failed"]),
        )


@dataclass(frozen=True)
class FanoutStatus:
    """A snapshot of a fan-out's state hash."""

    id: str
    task_type: str
    total: int
    limit: int
    running: int
    succeeded: int
    failed: int
    #: A streamed fan-out still taking sub-tasks (never done while open).
    open: bool = False

    @property
    def pending(self) -> int:
        """Sub-tasks not yet released."""
        return self.total - self.running - self.succeeded - self.failed

    @property
    def done(self) -> bool:
        return not self.open and self.succeeded + self.failed == self.total


@dataclass(frozen=True)
class FanoutSettings:
    """How sub-tasks are enqueued and how long the fan-out's keys are kept."""

    #: Retries of each sub-task before it counts as failed (it keeps its slot);
    #: by default the runtime's default (taskscale.options).
    max_retries: int = DEFAULT_MAX_RETRIES
    #: Seconds the state and notice are kept after the last sub-task finished.
    ttl_s: int = 86400
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES


class FanoutSubscription:
    """A background thread that calls ``callback`` once with the result.

    Subscribes to the notice channel first and only then checks whether the
    fan-out is already done, so a notice published in between is not missed;
    a guard makes the callback run exactly once either way.
    """

    def __init__(self, handle: FanoutHandle, callback: Callable[[FanoutResult], object]) -> None:
        self._handle = handle
        self._callback = callback
        self._lock = threading.Lock()
        self._fired = False
        self._stop = threading.Event()
        self._pubsub = handle.redis.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
        self._pubsub.subscribe(handle.channel)
        self._thread = threading.Thread(
            target=self._run, name=f"taskscale-fanout-{handle.id}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        try:
            early = self._handle.result()
            if early is not None:
                self._fire(early)
            while not self._stop.is_set() and not self._fired:
                message = self._pubsub.get_message(timeout=0.5)
                if message is not None and message["type"] == "message":
                    self._fire(FanoutResult.from_json(message["data"]))
        except Exception:
            log.exception("fan-out %s: subscription failed", self._handle.id)
        finally:
            self._pubsub.close()

    def _fire(self, result: FanoutResult) -> None:
        with self._lock:
            if self._fired:
                return
            self._fired = True
        try:
            self._callback(result)
        except Exception:
            log.exception("fan-out %s: completion callback raised", self._handle.id)

    @property
    def fired(self) -> bool:
        return self._fired

    def stop(self, timeout: float = 5.0) -> None:
        """Stop listening (the callback will not run after this returns)."""
        self._stop.set()
        self._thread.join(timeout)

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the callback to have run; True if it did."""
        self._thread.join(timeout)
        return self._fired


class FanoutHandle:
    """A submitted fan-out, by id; usable from any process (see :meth:`attach`)."""

    def __init__(self, client: RedisClient, fanout_id: str, *, keys: Keys) -> None:
        self.redis = client
        self.id = fanout_id
        self.keys = keys

    @classmethod
    def attach(
        cls, client: RedisClient, fanout_id: str, *, keys: Keys | None = None
    ) -> FanoutHandle:
        """A handle on a fan-out submitted elsewhere."""
        return cls(client, check_name("fan-out id", fanout_id), keys=Keys.or_env(keys))

    @property
    def channel(self) -> str:
        """Pub/sub channel the completion notice is published to (once)."""
        return self.keys.fanout_done(self.id)

    def result(self) -> FanoutResult | None:
        """The result if the fan-out is done, else None; never blocks."""
        raw = self.redis.lindex(self.keys.fanout_done(self.id), 0)
        return None if raw is None else FanoutResult.from_json(raw)

    def wait(self, timeout: float | None = None) -> FanoutResult:
        """Block until every sub-task has finished; ``None`` waits forever.

        Raises :class:`FanoutTimeout` when ``timeout`` seconds pass first and
        :class:`UnknownFanout` when there is no such fan-out.
        """
        if not self.redis.exists(self.keys.fanout(self.id), self.keys.fanout_done(self.id)):
            raise UnknownFanout(f"no fan-out {self.id} (never submitted, or expired)")
        done_key = self.keys.fanout_done(self.id)

        def attempt(block: float) -> FanoutResult | None:
            # Rotating the one-element list onto itself reads without consuming.
            raw = self.redis.blmove(done_key, done_key, block, "RIGHT", "LEFT")  # type: ignore[arg-type]
            return None if raw is None else FanoutResult.from_json(raw)

        result = block_in_slices(timeout, attempt, client=self.redis)
        if result is None:
            raise FanoutTimeout(self.id, timeout or 0.0)
        return result

    def subscribe(self, callback: Callable[[FanoutResult], object]) -> FanoutSubscription:
        """Call ``callback(result)`` once, from a background thread, when done."""
        return FanoutSubscription(self, callback)

    def status(self) -> FanoutStatus:
        """The fan-out's counters now; :class:`UnknownFanout` if it has none."""
        raw = self.redis.hgetall(self.keys.fanout(self.id))
        if not raw:
            raise UnknownFanout(f"no fan-out {self.id} (never submitted, or expired)")
        h = {as_text(k): as_text(v) for k, v in raw.items()}
        return FanoutStatus(
            id=self.id,
            task_type=h["type"],
            total=int(h["total"]),
            limit=int(h["limit"]),
            running=int(h["running"]),
            succeeded=int(h["succeeded"]),
            failed=int(h["failed"]),
            open=h.get("open") == "1",
        )


def submit_fanout(
    client: RedisLike,
    task_type: str,
    arg_sets: Sequence[ArgSet],
    *,
    limit: int,
    priority: int | str = DEFAULT_PRIORITY,
    settings: FanoutSettings | None = None,
    keys: Keys | None = None,
) -> FanoutHandle:
    """Submit one sub-task of ``task_type`` per argument set, at most ``limit`` running at once.

    Each element of ``arg_sets`` is a list/tuple of positional arguments, a
    mapping of keyword arguments, or a ``Call(args, kwargs)``. Returns at
    once; the handle waits for the result or subscribes to it. ``client`` is
    a redis-py client, a Redis URL, or None (``TASKSCALE_REDIS_URL``).
    """
    client = client_for(client)
    settings = settings or FanoutSettings()
    keys = Keys.or_env(keys)
    check_name("task type", task_type)
    level = parse_priority(priority)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"fan-out limit must be an integer >= 1, got {limit!r}")
    if isinstance(arg_sets, str | bytes) or not isinstance(arg_sets, Iterable):
        raise TypeError(f"arg_sets must be a sequence of argument sets, not {arg_sets!r:.40}")
    fanout_id = uuid.uuid4().hex
    extra: dict[str, Any] = {"fanout": fanout_id}
    trace = tracing.current()
    if trace is None:
        return _submit(client, task_type, arg_sets, fanout_id, extra, level, limit, settings, keys)
    arg_sets = list(arg_sets)
    return trace.publish(
        task_type,
        extra,
        lambda: _submit(
            client, task_type, arg_sets, fanout_id, extra, level, limit, settings, keys
        ),
        count=len(arg_sets),
    )


def _submit(
    client: RedisClient,
    task_type: str,
    arg_sets: Sequence[ArgSet],
    fanout_id: str,
    extra: dict[str, Any],
    level: int,
    limit: int,
    settings: FanoutSettings,
    keys: Keys,
) -> FanoutHandle:
    envelopes = [_envelope(task_type, arg_set, extra, level, settings) for arg_set in arg_sets]
    _submit_script(client)(
        keys=[
            keys.fanout(fanout_id),
            keys.fanout_pending(fanout_id),
            keys.queue(task_type, level),
            keys.types,
            keys.stats(task_type),
            keys.wake(task_type),
            keys.fanout_done(fanout_id),
        ],
        args=[
            fanout_id,
            task_type,
            level,
            limit,
            settings.ttl_s,
            WAKE_TOKENS_CAP,
            keys.demand_channel,
            *envelopes,
        ],
    )
    return FanoutHandle(client, fanout_id, keys=keys)


def _envelope(
    task_type: str,
    arg_set: ArgSet,
    extra: dict[str, Any],
    priority: int,
    settings: FanoutSettings,
) -> str:
    """The JSON envelope of one sub-task, without ``enqueued_ms`` (whatever
    releases it to the ready list stamps that)."""
    args, kwargs = split_arg_set(arg_set)
    _, doc = envelope.build(
        task_type,
        args,
        kwargs,
        priority=priority,
        max_retries=settings.max_retries,
        extra=extra,
        max_bytes=settings.max_payload_bytes,
    )
    return doc


def split_arg_set(arg_set: ArgSet) -> tuple[Sequence[Any], Mapping[str, Any] | None]:
    """``(args, kwargs)`` of one argument set (see :data:`ArgSet`)."""
    args: Sequence[Any]
    kwargs: Mapping[str, Any] | None
    if isinstance(arg_set, Call):
        args, kwargs = arg_set.args, arg_set.kwargs
    elif isinstance(arg_set, Mapping):
        args, kwargs = (), arg_set
    elif isinstance(arg_set, str | bytes) or not isinstance(arg_set, Sequence):
        raise TypeError(
            "each argument set must be a list/tuple (positional), a dict (keyword) or a Call, "
            f"got {type(arg_set).__name__}"
        )
    else:
        args, kwargs = arg_set, {}
    return args, kwargs


def _submit_script(client: RedisClient) -> Script:
    """``fanout_submit.lua`` registered on ``client`` (EVALSHA; reloaded after NOSCRIPT)."""
    return bound_script(client, "fanout_submit")
