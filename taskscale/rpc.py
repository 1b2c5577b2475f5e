"""Synchronous and deferred RPC over the task queue.

Some callers need a task's answer, not just its execution: a web request that
renders a thumbnail on a worker pool, a CLI that asks a worker to validate a
file. Rather than a second transport, an RPC is an ordinary task whose
envelope names a reply list (``reply_to`` = ``{NS}:reply:ID``). The worker's
``complete`` / ``fail`` script pushes one JSON reply there with a TTL, in the
same atomic step that records the outcome (docs/schema.md, "RPC replies"), and
the caller BLPOPs it. Everything goes through Redis, so callers and workers
may be in different processes and on different hosts, and the task is as
reliable as any other: if its worker dies, the reaper returns it and another
worker answers.

:func:`call` blocks for the answer; :func:`call_async` returns an
:class:`RpcHandle` to fetch it later (from this or another process, by id).
A remote exception is raised locally as :class:`RemoteError` carrying the
remote type and message; no answer in time is :class:`TaskTimeout`, whose
message says what the task is waiting for (no live worker serves its type,
still queued behind others, running, a delayed retry with no scheduler).
A call keeps the task's retries (``CallOptions.max_retries`` None) and gets
one reply, from the attempt that succeeded or the last that failed;
``CallOptions(max_retries=0)`` makes the first error the reply.

The task of a timed-out call stays queued, as a Celery ``AsyncResult.get``
timeout leaves its task: with an autoscaler the worker may be one
scale-from-zero away. A caller that must not wait for a worker that does not
exist yet sets ``CallOptions(require_worker=True)``: :class:`NoLiveWorker`
is raised before anything is enqueued.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from taskscale import tracing
from taskscale.connection import RedisLike, client_for
from taskscale.keys import DEFAULT_MAX_PAYLOAD_BYTES, DEFAULT_PRIORITY, Keys, check_name
from taskscale.options import OPTION, TaskOptions
from taskscale.producer import Producer, ProducerSettings
from taskscale.redis_urls import RedisClient, connection_kwargs
from taskscale.serving import explain_no_reply, live_workers_serving

T = TypeVar("T")

#: Longest single blocking call; a long wait is made of several. It must stay
#: well below the client's socket timeout (redis-py's default is 5 s): a read
#: that times out after the server popped the reply would lose the reply.
MAX_BLOCK_S = 1.0
#: Shortest blocking call: Redis rounds timeouts to milliseconds.
_MIN_BLOCK_S = 0.01


class RemoteError(Exception):
    """The task raised (and had no retries left) on the worker."""

    def __init__(self, task_id: str, error_type: str, message: str) -> None:
        super().__init__(f"{error_type}: {message} (remote task {task_id})")
        self.task_id = task_id
        self.error_type = error_type
        self.message = message


class TaskTimeout(TimeoutError):
    """No reply arrived in time. The task may still run; its reply will expire.

    ``cause`` says what the task was waiting for when the time ran out ("" when
    Redis could not tell), e.g. that no live worker serves its type."""

    def __init__(self, task_id: str, timeout: float, cause: str = "") -> None:
        text = f"no reply from task {task_id} within {timeout:g} s"
        super().__init__(f"{text}: {cause}" if cause else text)
        self.task_id = task_id
        self.timeout = timeout
        self.cause = cause


class NoLiveWorker(LookupError):
    """``CallOptions(require_worker=True)`` and no live worker serves the type:
    nothing was enqueued."""

    def __init__(self, task_type: str) -> None:
        super().__init__(
            f"no live worker serves {task_type!r}; the call was not enqueued "
            "(require_worker=True; leave it False to wait for a worker to start)"
        )
        self.task_type = task_type


@dataclass(frozen=True)
class CallOptions:
    """How an RPC task is enqueued."""

    priority: int | str = DEFAULT_PRIORITY
    #: Seconds the reply is kept for a caller that comes back late; None
    #: leaves it to the task's ``@task(result_ttl=...)``, else the runtime's
    #: (the option ``result_ttl``: taskscale.options).
    reply_ttl_s: int | None = None
    #: Retries before the error is the reply.  None (the default): the task's
    #: own, as for any enqueue -- ``task_options.max_retries``, else its
    #: ``@task(max_retries=...)``, else the worker's (3) -- so a task that
    #: fails once and then succeeds answers with its result, after its
    #: backoff (a retry is promoted by a ``taskscale scheduler``).  0: the
    #: first error is the reply, at once.  Either way the call gets one reply.
    max_retries: int | None = None
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    #: Other options of this task (timeout, backoff...); ``max_retries`` (when
    #: not None) and ``reply_ttl_s`` above win over theirs.
    task_options: TaskOptions | None = None
    #: Raise :class:`NoLiveWorker` instead of enqueueing when no live worker
    #: serves the type (off by default: an autoscaled type may be at zero).
    require_worker: bool = False

    def __post_init__(self) -> None:
        if self.max_retries is not None:
            OPTION["max_retries"].check("max_retries", self.max_retries)
        if self.reply_ttl_s is not None:  # the task option result_ttl, set per call
            OPTION["result_ttl"].check("reply_ttl_s", self.reply_ttl_s)
        if self.task_options is not None and not isinstance(self.task_options, TaskOptions):
            kind = type(self.task_options).__name__
            raise TypeError(f"task_options must be a TaskOptions, not {kind}")


@dataclass(frozen=True)
class Reply:
    """A decoded reply: the result, or the remote error's type and message."""

    task_id: str
    ok: bool
    result: Any = None
    error_type: str = ""
    error: str = ""

    @classmethod
    def from_json(cls, raw: bytes | str) -> Reply:
        data = json.loads(raw)
        if not isinstance(data, dict) or "ok" not in data:
            raise ValueError(f"malformed RPC reply: {raw!r:.200}")
        return cls(
            task_id=str(data.get("id", "")),
            ok=bool(data["ok"]),
            result=data.get("result"),
            error_type=str(data.get("error_type") or "Exception"),
            error=str(data.get("error") or ""),
        )

    def unwrap(self) -> Any:
        """The result, or :class:`RemoteError`."""
        if not self.ok:
            raise RemoteError(self.task_id, self.error_type, self.error)
        return self.result


class RpcHandle:
    """A pending RPC result. ``get`` consumes the reply: one reader per task."""

    def __init__(
        self, client: RedisClient, task_id: str, *, keys: Keys, task_type: str | None = None
    ) -> None:
        self.redis = client
        self.id = task_id
        self.keys = keys
        #: The task's type, when known: it narrows the search a timeout makes.
        self.task_type = task_type
        self._reply: Reply | None = None

    @classmethod
    def attach(
        cls,
        client: RedisClient,
        task_id: str,
        *,
        keys: Keys | None = None,
        task_type: str | None = None,
    ) -> RpcHandle:
        """A handle on an RPC enqueued elsewhere (e.g. by another process)."""
        task_id = check_name("task id", task_id)
        return cls(client, task_id, keys=Keys.or_env(keys), task_type=task_type)

    @property
    def reply_key(self) -> str:
        return self.keys.reply(self.id)

    def ready(self) -> bool:
        """True once the reply has arrived (a ``get`` would not block)."""
        return self._reply is not None or bool(self.redis.llen(self.reply_key))

    def get(self, timeout: float | None = 30.0) -> Any:
        """The task's result; blocks up to ``timeout`` s (None: forever, 0: don't block).

        Raises :class:`RemoteError` if the task failed, :class:`TaskTimeout`
        (saying what the task waits for) if no reply came in time.
        """
        if self._reply is None:
            raw = self._pop(timeout)
            if raw is None:
                cause = explain_no_reply(
                    self.redis, self.keys, task_id=self.id, task_type=self.task_type
                )
                raise TaskTimeout(self.id, timeout or 0.0, cause)
            self._reply = Reply.from_json(raw)
        return self._reply.unwrap()

    def _pop(self, timeout: float | None) -> bytes | None:
        if timeout == 0:
            return _as_bytes(self.redis.lpop(self.reply_key))

        def attempt(block: float) -> bytes | None:
            popped = self.redis.blpop([self.reply_key], block)
            return None if popped is None else _as_bytes(popped[1])

        return block_in_slices(timeout, attempt, client=self.redis)


def call_async(
    client: RedisLike,
    task_type: str,
    *args: Any,
    options: CallOptions | None = None,
    keys: Keys | None = None,
    **kwargs: Any,
) -> RpcHandle:
    """Enqueue ``task_type(*args, **kwargs)`` as an RPC and return its handle at once.

    ``client`` is a redis-py client, a Redis URL, or None (``TASKSCALE_REDIS_URL``).
    """
    client = client_for(client)
    options = options or CallOptions()
    keys = Keys.or_env(keys)
    if options.require_worker and not live_workers_serving(client, keys, task_type):
        raise NoLiveWorker(task_type)
    task_id = uuid.uuid4().hex
    producer = Producer(
        client,
        keys=keys,
        settings=ProducerSettings(max_payload_bytes=options.max_payload_bytes),
    )
    task_options = options.task_options
    if options.reply_ttl_s is not None:  # the call's wins over its task options'
        task_options = replace(task_options or TaskOptions(), result_ttl=options.reply_ttl_s)
    producer.enqueue(
        task_type,
        *args,
        task_id=task_id,
        priority=options.priority,
        max_retries=options.max_retries,
        extra={"reply_to": keys.reply(task_id)},
        options=task_options,
        **kwargs,
    )
    return RpcHandle(client, task_id, keys=keys, task_type=task_type)


def call(
    client: RedisLike,
    task_type: str,
    *args: Any,
    timeout: float | None = 30.0,
    options: CallOptions | None = None,
    keys: Keys | None = None,
    **kwargs: Any,
) -> Any:
    """Run ``task_type(*args, **kwargs)`` on a worker and return its result.

    ``timeout``, ``options`` and ``keys`` are this function's own; every
    other keyword argument goes to the task. Raises :class:`RemoteError` if
    the task failed, :class:`TaskTimeout` if no reply arrived in ``timeout`` s
    (its message says why: e.g. no live worker serves the type), and
    :class:`NoLiveWorker` without enqueueing if ``options.require_worker`` and
    no live worker serves the type.

    Retries: the task's own (``CallOptions.max_retries`` None, the default),
    so the reply is the result of the attempt that succeeded or the error of
    the last; ``options=CallOptions(max_retries=0)`` makes the first error
    the reply at once.  Keep ``timeout`` above the retries' backoff.
    """

    def wait() -> Any:
        return call_async(client, task_type, *args, options=options, keys=keys, **kwargs).get(
            timeout
        )

    trace = tracing.current()
    return wait() if trace is None else trace.call(task_type, wait)


def block_in_slices(
    timeout: float | None,
    attempt: Callable[[float], T | None],
    *,
    client: RedisClient | None = None,
) -> T | None:
    """Call ``attempt(seconds)`` (a blocking Redis read) until it returns a
    value or ``timeout`` s have passed (``None``: forever), in slices of at
    most :data:`MAX_BLOCK_S` and at most half ``client``'s socket timeout."""
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise ValueError(f"timeout must be a number of seconds or None, not {timeout!r}")
        if math.isnan(timeout) or timeout < 0:
            raise ValueError(f"timeout must be seconds >= 0 or None (no limit), not {timeout!r}")
        if math.isinf(timeout):
            timeout = None
    longest = _longest_block(client)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if deadline is None:
            block = longest
        else:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            block = max(_MIN_BLOCK_S, min(longest, remaining))
        value = attempt(block)
        if value is not None:
            return value


def _longest_block(client: RedisClient | None) -> float:
    if client is None:
        return MAX_BLOCK_S
    socket_timeout = connection_kwargs(client).get("socket_timeout")
    if isinstance(socket_timeout, int | float) and socket_timeout > 0:
        return max(_MIN_BLOCK_S, min(MAX_BLOCK_S, socket_timeout / 2))
    return MAX_BLOCK_S


def _as_bytes(value: object) -> bytes | None:
    """A reply as bytes whether or not the client decodes responses."""
    if isinstance(value, str):
        return value.encode()
    return value if isinstance(value, bytes) else None
