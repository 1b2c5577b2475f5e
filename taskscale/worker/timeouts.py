"""Run timeouts for task functions on worker threads.

CPython cannot stop a thread from outside. What it can do, and what this
module does, is raise an exception *inside* a thread: when a run passes its
timeout, one watchdog thread per process calls
``PyThreadState_SetAsyncExc(thread, RunTimeout)`` on the executor thread
running it. The interpreter raises it in that thread the next time it
executes Python bytecode.

What is interrupted
  Python code: loops, function calls, computations written in Python, and a
  loop of short blocking calls (``for ...: time.sleep(0.1)``,
  ``sock.recv`` with a short socket timeout, ``queue.get(timeout=1)``) at the
  next return to Python.

What is not
  A call blocked or busy inside C: ``time.sleep(600)``, a socket read with
  no timeout, ``lock.acquire()`` without a timeout, ``subprocess.run(...)``
  with no timeout, a long NumPy / regex / compression call, any C
  extension's loop. The exception is raised when that call returns to
  Python; until then the run goes on, its thread stays busy (the worker's
  other threads keep working) and the task is not yet failed. Give such
  calls their own timeouts, or run them in a subprocess.

An ``async def`` task is simpler: its coroutine is cancelled at its
timeout (``asyncio.timeout``, :func:`await_with_timeout`), which interrupts
it at its current ``await``; a coroutine that blocks the event loop without
awaiting is interrupted only when it next awaits.

Either way, a run that took longer than its timeout is failed with
``RunTimeout`` even if the function caught the exception and returned
normally; ``finally`` blocks and context managers in the function run as
the exception unwinds. A failed run is retried like any failure while
``max_retries`` allows (docs/schema.md).
"""

from __future__ import annotations

import asyncio
import ctypes
import heapq
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

_set_async_exc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.py_object)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi)
)
_clear_async_exc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi)
)


class RunTimeout(Exception):
    """A task ran past its run timeout (raised inside the task's thread).

    Not :class:`taskscale.rpc.TaskTimeout`, which an RPC *caller* gets when no
    reply came in time."""


class _Watchdog:
    """One thread that raises :class:`RunTimeout` in threads whose deadline passed.

    A token is armed by the thread that runs the task and fires at most once;
    :meth:`disarm` under the same lock means that after it returns False the
    watchdog has not fired and never will.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._armed: dict[int, int] = {}  # token -> thread ident
        self._fired: set[int] = set()
        self._tokens = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float) -> int:
        with self._cond:
            token = next(self._tokens)
            self._armed[token] = threading.get_ident()
            heapq.heappush(self._heap, (time.monotonic() + seconds, token))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="taskscale-timeouts", daemon=True
                )
                self._thread.start()
            self._cond.notify()
        return token

    def disarm(self, token: int) -> bool:
        """Stop watching ``token``; True if it fired."""
        with self._cond:
            self._armed.pop(token, None)
            fired = token in self._fired
            self._fired.discard(token)
            return fired

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._heap and self._heap[0][1] not in self._armed:
                    heapq.heappop(self._heap)  # disarmed before its deadline
                if not self._heap:
                    self._cond.wait()
                    continue
                deadline, token = self._heap[0]
                left = deadline - time.monotonic()
                if left > 0:  # bounded: Condition.wait overflows on absurd deadlines
                    self._cond.wait(min(left, 3600.0))
                    continue
                heapq.heappop(self._heap)
                ident = self._armed.pop(token)
                self._fired.add(token)
                _set_async_exc(ident, RunTimeout)


_watchdog = _Watchdog()


def call_with_timeout(
    fn: Callable[..., Any],
    args: list[Any],
    kwargs: dict[str, Any],
    seconds: float | None,
) -> Any:
    """``fn(*args, **kwargs)``, failed with :class:`RunTimeout` when it runs
    longer than ``seconds`` (None or <= 0: no limit). See the module docstring
    for what the exception can and cannot interrupt."""
    if seconds is None or seconds <= 0:
        return fn(*args, **kwargs)
    ident = threading.get_ident()
    token = -1
    fired = False
    error: Exception | None = None
    result: Any = None
    try:
        token = _watchdog.arm(seconds)
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:  # judged below, once the watchdog is disarmed
            error = exc
        except BaseException:  # SystemExit and the like: never leave it armed
            if _watchdog.disarm(token):
                _clear_async_exc(ident, None)
            raise
        fired = _watchdog.disarm(token)
        if fired:  # it fired; if its exception is still pending, drop it
            _clear_async_exc(ident, None)
    except RunTimeout:  # the async exception landed after fn, in the lines above
        fired = True
        _watchdog.disarm(token)
    if fired:
        raise RunTimeout(f"the task ran longer than its timeout of {seconds:g} s") from None
    if error is not None:
        raise error
    return result


async def await_with_timeout(
    fn: Callable[..., Any],
    args: list[Any],
    kwargs: dict[str, Any],
    seconds: float | None,
) -> Any:
    """``await fn(*args, **kwargs)``, cancelled and failed with
    :class:`RunTimeout` after ``seconds`` (None or <= 0: no limit).  A
    ``TimeoutError`` the task raises on its own is left as it is."""
    if seconds is None or seconds <= 0:
        return await fn(*args, **kwargs)
    limit = asyncio.timeout(seconds)
    try:
        async with limit:
            return await fn(*args, **kwargs)
    except TimeoutError:
        if limit.expired():
            raise RunTimeout(f"the task ran longer than its timeout of {seconds:g} s") from None
        raise
