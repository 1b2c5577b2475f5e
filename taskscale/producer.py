"""The producer API: how applications enqueue tasks.

``enqueue("email", "a@b.c", delay=60)`` from anywhere, or a :class:`Producer`
bound to a client and namespace.  Every enqueue is one call of the
``enqueue.lua`` script, which validates, stamps ``enqueued_ms`` from the
Redis clock, pushes, counts, wakes idle workers and signals demand in one
atomic step; a batch (``enqueue_many``) is one script call per chunk.
Over-size envelopes are refused here, before anything reaches Redis.

Unique tasks: ``enqueue(..., unique_key="k", unique_for=60)`` enqueues
nothing and returns the id of the task holding ``k`` while that task is
queued, delayed or running (and until ``unique_for`` seconds after its
enqueue); the enqueue script decides it atomically, so any number of
concurrent producers get one task.

Task options (``options=TaskOptions(max_retries=..., timeout=...)``, or
``max_retries=``) are written into the envelope and override the defaults
the task's ``@task(...)`` declares on the worker; options left unset are not
written, so the worker's declared defaults apply.

Note: a connection error is retried, and an enqueue whose reply was lost
may then run twice (delivery is at least once, as everywhere in taskscale).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from taskscale import checks, envelope, tracing
from taskscale.connection import (
    ConnectionSettings,
    RedisUnavailable,
    client_for,
    connect,
)
from taskscale.errors import describe_error
from taskscale.keys import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    DEFAULT_PRIORITY,
    Keys,
    check_name,
    check_unique_key,
)
from taskscale.luascripts import scripts_for
from taskscale.options import TaskOptions, enqueue_fields
from taskscale.redis_urls import RedisClient
from taskscale.replication import call_and_wait
from taskscale.retrying import TRANSIENT_ERRORS, retrying
from taskscale.text import as_text

#: Envelopes per script call in ``enqueue_many`` (keeps each call short).
BATCH_CHUNK = 500


@dataclass(frozen=True)
class ProducerSettings:
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    #: Written into every envelope that sets no ``max_retries``; None leaves it
    #: to the worker (the task's ``@task(max_retries=...)``, else the runtime's).
    default_max_retries: int | None = None
    #: Give up on an unreachable Redis after this long, then raise
    #: :class:`~taskscale.connection.RedisUnavailable`. Short by default so a
    #: web request that enqueues fails fast; raise it to ride out a failover.
    retry_for_s: float = 5.0
    #: After each enqueue, WAIT until this many replicas have it (0 = don't):
    #: a failover then cannot lose an acknowledged task (taskscale.replication).
    wait_replicas: int = 0
    #: Longest WAIT; fewer confirmations raise NotReplicated.
    wait_timeout_s: float = 1.0

    def __post_init__(self) -> None:
        checks.whole("max_payload_bytes", self.max_payload_bytes, least=1)
        if self.default_max_retries is not None:
            checks.whole("default_max_retries", self.default_max_retries, least=0)
        checks.whole("wait_replicas", self.wait_replicas, least=0)
        checks.seconds("retry_for_s", self.retry_for_s)
        checks.seconds("wait_timeout_s", self.wait_timeout_s)
        if self.wait_timeout_s == 0:  # WAIT's 0 is "forever"
            raise ValueError("wait_timeout_s must be > 0 seconds (WAIT 0 would block forever)")


@dataclass(frozen=True)
class Call:
    """One task of a batch: positional and keyword arguments."""

    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.args, str | bytes | bytearray | Mapping) or not isinstance(
            self.args, Sequence
        ):
            hint = (
                " (keyword arguments go in Call(kwargs=...))"
                if isinstance(self.args, Mapping)
                else ""
            )
            raise TypeError(
                f"a call's args must be a list or tuple of arguments, not "
                f"{type(self.args).__name__}{hint}"
            )
        if self.kwargs is not None and (
            not isinstance(self.kwargs, Mapping) or not all(isinstance(k, str) for k in self.kwargs)
        ):
            raise TypeError(f"a call's kwargs must be a dict with str keys, not {self.kwargs!r}")


class Producer:
    """Enqueues tasks into one namespace through one client."""

    def __init__(
        self,
        client: RedisClient | str | None = None,
        *,
        keys: Keys | None = None,
        settings: ProducerSettings | None = None,
    ) -> None:
        self.redis = client_for(client)
        self.keys = Keys.or_env(keys)
        if settings is not None and not isinstance(settings, ProducerSettings):
            raise TypeError(f"settings must be a ProducerSettings, not {type(settings).__name__}")
        self.settings = settings or ProducerSettings()

    def enqueue(
        self,
        task_type: str,
        *args: Any,
        delay: float | None = None,
        priority: int | str = DEFAULT_PRIORITY,
        max_retries: int | None = None,
        task_id: str | None = None,
        extra: Mapping[str, Any] | None = None,
        unique_key: str | None = None,
        unique_for: float | None = None,
        options: TaskOptions | None = None,
        **kwargs: Any,
    ) -> str:
        """Enqueue ``task_type(*args, **kwargs)``; return its task id.

        ``delay`` seconds (None/0 = now); ``priority`` 0-9 or high/normal/low
        (0 most urgent); ``extra`` adds envelope fields (``reply_to``...);
        ``options`` (and ``max_retries``, which wins over ``options``) override
        the task's declared defaults for this task.
        With ``unique_key``, nothing is enqueued while another task holds the
        key (queued, delayed, running, or within ``unique_for`` seconds of its
        enqueue): the holder's id is returned instead.
        """
        retries, fields = self._options(options, max_retries)
        fields.update(extra or {})
        if unique_key is not None:
            fields["unique_key"] = check_unique_key(unique_key)
            if unique_for is not None:
                fields["unique_for_ms"] = round(checks.seconds("unique_for", unique_for) * 1000)
        elif unique_for is not None:
            raise ValueError("unique_for needs a unique_key")

        def send() -> str:
            new_id, doc = envelope.build(
                task_type,
                args,
                kwargs,
                task_id=task_id,
                priority=priority,
                max_retries=retries,
                extra=fields,
                max_bytes=self.settings.max_payload_bytes,
                prefix=self.keys.prefix,
            )
            return self._push(task_type, [doc], delay).get(0, new_id)

        trace = tracing.current()
        return send() if trace is None else trace.publish(task_type, fields, send)

    def enqueue_many(
        self,
        task_type: str,
        calls: Iterable[Call | Sequence[Any]],
        *,
        delay: float | None = None,
        priority: int | str = DEFAULT_PRIORITY,
        max_retries: int | None = None,
        options: TaskOptions | None = None,
    ) -> list[str]:
        """Enqueue one task per item of ``calls`` (a :class:`Call` or an args
        sequence); return the ids.  Each chunk of :data:`BATCH_CHUNK` is atomic."""
        retries, fields = self._options(options, max_retries)
        if isinstance(calls, str | bytes | Mapping) or not isinstance(calls, Iterable):
            raise TypeError(
                f"calls must be a list of Call or of argument lists, not {type(calls).__name__}"
            )
        trace = tracing.current()
        if trace is None:
            return self._enqueue_many(task_type, calls, delay, priority, retries, fields)
        calls = list(calls)
        return trace.publish(
            task_type,
            fields,
            lambda: self._enqueue_many(task_type, calls, delay, priority, retries, fields),
            count=len(calls),
        )

    def _enqueue_many(
        self,
        task_type: str,
        calls: Iterable[Call | Sequence[Any]],
        delay: float | None,
        priority: int | str,
        retries: int | None,
        fields: dict[str, Any],
    ) -> list[str]:
        ids: list[str] = []
        docs: list[str] = []
        for item in calls:
            call = item if isinstance(item, Call) else Call(args=item)
            task_id, doc = envelope.build(
                task_type,
                call.args,
                call.kwargs,
                priority=priority,
                max_retries=retries,
                extra=fields,
                max_bytes=self.settings.max_payload_bytes,
                prefix=self.keys.prefix,
            )
            ids.append(task_id)
            docs.append(doc)
        for start in range(0, len(docs), BATCH_CHUNK):
            self._push(task_type, docs[start : start + BATCH_CHUNK], delay)
        return ids

    def _options(
        self, options: TaskOptions | None, max_retries: int | None
    ) -> tuple[int | None, dict[str, Any]]:
        """``max_retries`` (the argument, the options', else this producer's
        default) and the envelope fields of the other options."""
        retries, fields = enqueue_fields(options, max_retries=max_retries)
        return (self.settings.default_max_retries if retries is None else retries), fields

    def _push(self, task_type: str, docs: list[str], delay: float | None) -> dict[int, str]:
        """Run the enqueue script; return {index of a skipped envelope: holder id}."""
        check_name("task type", task_type)
        delay_ms = delay_to_ms(delay)
        script = scripts_for(self.redis).enqueue
        args: list[str | int] = [self.keys.prefix, task_type, delay_ms]
        args += [self.settings.max_payload_bytes, *docs]

        def push() -> list[Any]:
            if self.settings.wait_replicas:
                return list(
                    call_and_wait(
                        self.redis,
                        script,
                        [self.keys.types],
                        args,
                        replicas=self.settings.wait_replicas,
                        timeout_s=self.settings.wait_timeout_s,
                    )
                )
            return list(script(keys=[self.keys.types], args=args, client=self.redis))

        try:
            reply = retrying(push, give_up_after_s=self.settings.retry_for_s)
        except TRANSIENT_ERRORS as exc:
            raise RedisUnavailable(
                f"could not enqueue {task_type} within {self.settings.retry_for_s:g} s: "
                + describe_error(exc, client=self.redis)
            ) from exc
        return {int(reply[i]) - 1: as_text(reply[i + 1]) for i in range(1, len(reply) - 1, 2)}


#: The longest delay accepted (10 years): a larger one is a typo, not a plan.
MAX_DELAY_S = checks.MAX_SECONDS


def delay_to_ms(delay: float | None) -> int:
    """``delay`` seconds as whole milliseconds (None/0 = now).

    NaN, infinities, negative numbers and non-numbers are refused with a
    sentence rather than answered with Python internals (``int(nan)``).
    """
    if delay is None:
        return 0
    delay = checks.seconds("delay", delay)
    return 0 if delay == 0 else max(1, round(delay * 1000))


_default: Producer | None = None
_default_lock = threading.Lock()


def default_producer() -> Producer:
    """The process-wide producer: ``TASKSCALE_REDIS_URL`` (default
    redis://127.0.0.1:6379/0) and ``TASKSCALE_NAMESPACE``."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Producer(connect(ConnectionSettings.from_env()))
        return _default


def enqueue(
    task_type: str,
    *args: Any,
    delay: float | None = None,
    priority: int | str = DEFAULT_PRIORITY,
    unique_key: str | None = None,
    unique_for: float | None = None,
    options: TaskOptions | None = None,
    **kwargs: Any,
) -> str:
    """Enqueue ``task_type(*args, **kwargs)`` with the default producer (see
    :meth:`Producer.enqueue` for ``unique_key`` / ``unique_for`` / ``options``)."""
    return default_producer().enqueue(
        task_type,
        *args,
        delay=delay,
        priority=priority,
        unique_key=unique_key,
        unique_for=unique_for,
        options=options,
        **kwargs,
    )


def enqueue_many(
    task_type: str,
    calls: Iterable[Call | Sequence[Any]],
    *,
    delay: float | None = None,
    priority: int | str = DEFAULT_PRIORITY,
    options: TaskOptions | None = None,
) -> list[str]:
    """Enqueue a batch with the default producer (see :meth:`Producer.enqueue_many`)."""
    return default_producer().enqueue_many(
        task_type, calls, delay=delay, priority=priority, options=options
    )
