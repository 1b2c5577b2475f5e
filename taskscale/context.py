"""What a running task can know about itself: :func:`current_task`.

The worker sets the context around each call of a task function (in its
executor thread, or in the coroutine's own context for an ``async def``
task: a context variable, so concurrent coroutines each see their own), so
the function can read its own id, type and attempt, and
check :attr:`TaskContext.cancelled` -- true once ``taskscale.cancel(id)`` or
``taskscale cancel ID`` asked it to stop. Cancellation of a running task is
cooperative: nothing interrupts the function; a long task checks the flag
between steps and returns (or raises) early.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TaskContext:
    """The running task, as its worker sees it."""

    task_id: str
    task_type: str
    worker_id: str
    attempt: int  #: 1 for the first run, 2 for the first retry...
    _is_cancelled: Callable[[str], bool] = field(repr=False, compare=False)
    #: When the worker claimed this run: unix ms on the Redis clock (the same
    #: clock as ``enqueued_ms`` and the rate limits; 0 if unknown).
    claimed_ms: int = 0
    #: Called with the task type the first time :attr:`cancelled` is true.
    _on_cancel_seen: Callable[[str], None] | None = field(default=None, repr=False, compare=False)
    _seen: list[bool] = field(default_factory=list, repr=False, compare=False)
    #: The run's trace context when tracing built no span for it (not
    #: sampled), so that what it sends stays in its trace: the envelope's
    #: ``traceparent`` bytes or a sampled-out root's span (taskscale.tracing).
    trace_parent: Any = field(default=None, repr=False, compare=False)

    @property
    def cancelled(self) -> bool:
        """True once cancellation was asked for (one Redis read per call until
        it is true, then no more reads; in an ``async def`` task that read
        blocks the event loop briefly)."""
        if self._seen:
            return True
        if not self._is_cancelled(self.task_id):
            return False
        self._seen.append(True)
        if self._on_cancel_seen is not None:
            self._on_cancel_seen(self.task_type)
        return True


_current: contextvars.ContextVar[TaskContext | None] = contextvars.ContextVar(
    "taskscale_current_task", default=None
)


def running_task() -> TaskContext | None:
    """The task running in this thread, or None (:func:`current_task` without the error)."""
    return _current.get()


def current_task() -> TaskContext:
    """The task running in this thread; RuntimeError outside a task function."""
    found = _current.get()
    if found is None:
        raise RuntimeError("current_task() is only available inside a task function")
    return found


@contextmanager
def running(context: TaskContext) -> Iterator[None]:
    """Within the block, :func:`current_task` returns ``context`` (the worker's side)."""
    token = enter(context)
    try:
        yield
    finally:
        _current.reset(token)


def enter(context: TaskContext) -> contextvars.Token[TaskContext | None]:
    """:func:`running` without the context manager (the executor's hot path);
    :func:`leave` with the token ends it."""
    return _current.set(context)


def leave(token: contextvars.Token[TaskContext | None]) -> None:
    _current.reset(token)
