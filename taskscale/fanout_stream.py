"""Streamed fan-out: open, add sub-tasks while earlier ones run, close; collect results.

:func:`taskscale.fanout.submit_fanout` needs every piece of a request before
the first one runs. A producer that splits a large input as it reads it (a
file line by line, an API page by page) should not have to wait for the end
of the input: :func:`open_fanout` creates the fan-out in Redis
(``fanout_open.lua``), :meth:`FanoutStream.add` adds sub-tasks in as many
calls as needed (``fanout_add.lua``: each gets the next position and either a
free slot -- it runs now -- or a place in the pending list, so the limit of C
released at once holds across all adds and all workers), and
:meth:`FanoutStream.close` says that no more will come (``fanout_close.lua``).
Completion is signalled only when the fan-out is closed *and* every sub-task
added has its final outcome, whichever happens last; the notice, waiters and
subscribers are those of :mod:`taskscale.fanout`.

Results: opened with ``collect=True``, each sub-task's result -- or its
error type and message -- is stored under its position by the very script
that records its outcome, and ``wait(collect=True)`` returns them in
submission order. Two bounds keep them from filling Redis:
``max_result_bytes`` for all results together (a result past it is kept as
a small ``dropped`` marker that still says whether the sub-task succeeded),
and ``result_ttl``, seconds the results are kept once the fan-out is done.

While open, the fan-out's keys expire ``ttl`` seconds after its last add or
outcome, so a producer that dies before closing leaves nothing behind for
ever. Use the stream as a context manager so it is closed even when the
producing code raises (sub-tasks already added still run).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any

import redis

from taskscale import envelope
from taskscale.checks import MAX_SECONDS
from taskscale.connection import RedisLike, client_for
from taskscale.fanout import ArgSet, FanoutHandle, FanoutResult, UnknownFanout, split_arg_set
from taskscale.keys import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    DEFAULT_PRIORITY,
    WAKE_TOKENS_CAP,
    Keys,
    check_name,
    parse_priority,
)
from taskscale.luascripts import bound_script as _script
from taskscale.options import TaskOptions, enqueue_fields
from taskscale.redis_urls import RedisClient
from taskscale.rpc import RemoteError
from taskscale.text import as_text

#: Default bound of all collected results of one fan-out, in bytes of JSON.
DEFAULT_MAX_RESULT_BYTES = 8 * 1024 * 1024
#: Default seconds a fan-out's state (and results) are kept once done.
DEFAULT_TTL_S = 86400
#: Most sub-tasks per ``fanout_add`` call (a long add is several short scripts).
ADD_CHUNK = 1000


class FanoutClosed(RuntimeError):
    """Sub-tasks were added to a fan-out that is already closed."""


class ResultsExpired(LookupError):
    """The fan-out's collected results are gone (their TTL passed)."""


@dataclass(frozen=True)
class SubResult:
    """The outcome of one sub-task, at its position in submission order."""

    index: int
    ok: bool
    task_id: str | None = None
    result: Any = None
    error_type: str = ""
    error: str = ""
    #: True when the result was over the fan-out's size limit and not kept.
    dropped: bool = False

    def unwrap(self) -> Any:
        """The result; :class:`RemoteError` for a failed sub-task;
        :class:`LookupError` for a result dropped by the size limit."""
        if not self.ok:
            raise RemoteError(self.task_id or "?", self.error_type or "Exception", self.error)
        if self.dropped:
            raise LookupError(f"result {self.index} was over the fan-out's size limit")
        return self.result

    @classmethod
    def from_json(cls, index: int, raw: bytes | str) -> SubResult:
        data = json.loads(raw)
        return cls(
            index=index,
            ok=bool(data.get("ok")),
            task_id=data.get("id"),
            result=data.get("result"),
            error_type=str(data.get("error_type") or ("" if data.get("ok") else "Exception")),
            error=str(data.get("error") or ""),
            dropped=bool(data.get("dropped")),
        )


@dataclass(frozen=True)
class StreamSettings:
    """How a stream's sub-tasks are built."""

    #: Options of every sub-task (unset ones: the task's declared defaults).
    options: TaskOptions | None = None
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES


def _raise_script_error(exc: redis.ResponseError, fanout_id: str) -> None:
    text = str(exc)
    if "FANOUT_CLOSED" in text:
        raise FanoutClosed(f"fan-out {fanout_id} is closed: no more sub-tasks") from None
    if "FANOUT_UNKNOWN" in text:
        raise UnknownFanout(f"no fan-out {fanout_id} (never opened, or expired)") from None
    raise exc


class FanoutStream(FanoutHandle):
    """An open (or closed) streamed fan-out; usable from any process by id
    (``FanoutStream.attach(client, id)``)."""

    def __init__(
        self,
        client: RedisClient,
        fanout_id: str,
        *,
        keys: Keys,
        settings: StreamSettings | None = None,
    ) -> None:
        super().__init__(client, fanout_id, keys=keys)
        self.settings = settings or StreamSettings()
        self._target: tuple[str, int] | None = None

    def _type_and_priority(self) -> tuple[str, int]:
        if self._target is None:
            task_type, level = self.redis.hmget(self.keys.fanout(self.id), ["type", "priority"])
            if task_type is None or level is None:
                raise UnknownFanout(f"no fan-out {self.id} (never opened, or expired)")
            self._target = (as_text(task_type), int(level))
        return self._target

    def add(self, arg_sets: Iterable[ArgSet]) -> list[str]:
        """Add one sub-task per argument set (as for ``submit_fanout``);
        return their task ids. Raises :class:`FanoutClosed` after :meth:`close`.
        Each chunk of :data:`ADD_CHUNK` is one atomic script call with
        consecutive positions."""
        if isinstance(arg_sets, str | bytes):
            raise TypeError("arg_sets must be a sequence of argument sets, not a string")
        task_type, level = self._type_and_priority()
        retries, extra = enqueue_fields(self.settings.options)
        extra["fanout"] = self.id
        ids: list[str] = []
        docs: list[str] = []
        for arg_set in arg_sets:
            args, kwargs = split_arg_set(arg_set)
            task_id, doc = envelope.build(
                task_type,
                args,
                kwargs,
                priority=level,
                max_retries=retries,
                extra=extra,
                max_bytes=self.settings.max_payload_bytes,
            )
            ids.append(task_id)
            docs.append(doc)
        keys = [
            self.keys.fanout(self.id),
            self.keys.fanout_pending(self.id),
            self.keys.queue(task_type, level),
            self.keys.types,
            self.keys.stats(task_type),
            self.keys.wake(task_type),
            self.keys.fanout_results(self.id),
            self.keys.fanouts_open,
        ]
        for start in range(0, len(docs), ADD_CHUNK):
            chunk = docs[start : start + ADD_CHUNK]
            try:
                _script(self.redis, "fanout_add")(
                    keys=keys, args=[self.keys.prefix, WAKE_TOKENS_CAP, *chunk], client=self.redis
                )
            except redis.ResponseError as exc:
                _raise_script_error(exc, self.id)
        return ids

    def close(self) -> bool:
        """No more sub-tasks; True if the fan-out is done (now or already).
        Closing twice is harmless."""
        try:
            done = _script(self.redis, "fanout_close")(
                keys=[
                    self.keys.fanout(self.id),
                    self.keys.fanout_pending(self.id),
                    self.keys.fanout_results(self.id),
                    self.keys.fanout_done(self.id),
                    self.keys.fanouts_open,
                ],
                args=[self.id],
                client=self.redis,
            )
        except redis.ResponseError as exc:
            _raise_script_error(exc, self.id)
        return bool(done)

    def __enter__(self) -> FanoutStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def wait(self, timeout: float | None = None, *, collect: bool = False) -> FanoutResult:
        """Block until the fan-out is closed and every sub-task has finished.

        With ``collect=True`` the result carries ``results``: one
        :class:`SubResult` per sub-task, in submission order (the fan-out must
        have been opened with ``collect=True``; :class:`ResultsExpired` once
        their TTL passed). Raises :class:`taskscale.fanout.FanoutTimeout`
        after ``timeout`` seconds.
        """
        if collect:
            limit = self.redis.hget(self.keys.fanout(self.id), "collect_max_bytes")
            if limit is not None and int(limit) == 0:
                raise ValueError(f"fan-out {self.id} was opened without collect=True")
        result = super().wait(timeout)
        if not collect:
            return result
        results = self.results()
        if len(results) != result.total:
            raise ResultsExpired(
                f"fan-out {self.id}: {len(results)} of {result.total} results left "
                "(the result TTL passed?)"
            )
        return replace(result, results=tuple(results))

    def results(self) -> list[SubResult]:
        """The results collected so far, in submission order (finished sub-tasks only)."""
        raw = self.redis.hgetall(self.keys.fanout_results(self.id))
        found = sorted((int(as_text(k)), v) for k, v in raw.items())
        return [SubResult.from_json(index, value) for index, value in found]


def open_fanout(
    client: RedisLike,
    task_type: str,
    *,
    limit: int,
    priority: int | str = DEFAULT_PRIORITY,
    collect: bool = False,
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    result_ttl: int | None = None,
    ttl: int = DEFAULT_TTL_S,
    settings: StreamSettings | None = None,
    keys: Keys | None = None,
) -> FanoutStream:
    """Open a streamed fan-out of ``task_type``, at most ``limit`` sub-tasks
    running at once; add with :meth:`FanoutStream.add`, then close it.

    ``collect``: keep each sub-task's result or error for ``wait(collect=True)``,
    at most ``max_result_bytes`` of them, for ``result_ttl`` seconds after the
    fan-out is done (default: ``ttl``, which also bounds the state's life).
    """
    client = client_for(client)
    keys = Keys.or_env(keys)
    check_name("task type", task_type)
    level = parse_priority(priority)
    keep_s = ttl if result_ttl is None else result_ttl
    for name, value, most in (
        ("limit", limit, 1 << 31),
        ("max_result_bytes", max_result_bytes, 1 << 40),
        ("ttl", ttl, MAX_SECONDS),
        ("result_ttl", keep_s, MAX_SECONDS),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
            raise ValueError(f"fan-out {name} must be an integer from 1 to {most}, got {value!r}")
    fanout_id = uuid.uuid4().hex
    _script(client, "fanout_open")(
        keys=[keys.fanout(fanout_id), keys.fanouts_open],
        args=[fanout_id, task_type, level, limit, ttl, max_result_bytes if collect else 0, keep_s],
        client=client,
    )
    stream = FanoutStream(client, fanout_id, keys=keys, settings=settings)
    stream._target = (task_type, level)
    return stream
