"""The event loop a worker runs its ``async def`` tasks on.

One thread runs one asyncio loop; each claimed task of an async type becomes
one asyncio task on it.  The worker's claimer claims for async types only as
many tasks as there are free async slots (``--async-slots``), exactly like
it claims for free threads, so nothing waits inside the process.

A run goes through the same :class:`~taskscale.worker.execution.TaskRunner` as a
thread's: :meth:`~taskscale.worker.execution.TaskRunner.prepare` (decode, find the
function, bind the arguments), ``await`` the coroutine (with its run timeout,
:func:`~taskscale.worker.timeouts.await_with_timeout`, and ``current_task()`` set
for it: a context variable, so each coroutine sees its own), then
:meth:`~taskscale.worker.execution.TaskRunner.settle`; the outcome goes to the same
reporter outbox (``complete.lua`` / ``fail.lua``).

At the end of a shutdown's grace period :meth:`AsyncExecutor.cancel_running`
cancels the coroutines still running.  A cancelled run reports no outcome:
its task stays in the worker's in-flight hash, and the final requeue returns
it to the head of its queue like an unfinished thread's task.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
from collections.abc import Callable

from taskscale import tracing
from taskscale.context import running
from taskscale.worker.execution import Claimed, Outcome, TaskRunner
from taskscale.worker.timeouts import await_with_timeout

log = logging.getLogger("taskscale.worker")


class TaskCancelledItself(Exception):
    """An async task raised ``CancelledError`` that was not the worker's
    doing (not a shutdown, not its timeout): failed like any error."""


class AsyncExecutor:
    """Runs claimed async tasks on one event-loop thread."""

    def __init__(
        self,
        runner: TaskRunner,
        *,
        report: Callable[[Outcome], None],
        released: Callable[[], None],
        name: str = "async-executor",
    ) -> None:
        self._runner = runner
        self._report = report
        self._released = released
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None  # start() makes it
        self._thread: threading.Thread | None = None
        self._running: set[asyncio.Task[None]] = set()
        self._closing = False  # set on the loop thread by cancel_running
        self._trace = tracing.current()  # None when off

    def start(self) -> None:
        """Start the loop thread (a worker without async types never does)."""
        self._loop = asyncio.new_event_loop()
        # in a copy of the starter's context: its log records keep the worker id
        context = contextvars.copy_context()
        self._thread = threading.Thread(
            target=context.run, args=(self._serve,), name=self._name, daemon=True
        )
        self._thread.start()

    def submit(self, tasks: list[Claimed]) -> None:
        """Start running ``tasks`` (from any thread, after :meth:`start`): one
        wake-up of the loop for a whole claim."""
        assert self._loop is not None, "AsyncExecutor.start() first"
        self._loop.call_soon_threadsafe(self._spawn, tasks)

    def cancel_running(self, *, wait_s: float = 5.0) -> int:
        """Cancel every running coroutine and wait (at most ``wait_s``) until
        they have unwound; their tasks report nothing, and a task submitted
        afterwards is not started.  Returns how many were cancelled."""
        if self._loop is None or self._thread is None or not self._thread.is_alive():
            return 0
        future = asyncio.run_coroutine_threadsafe(self._cancel_all(wait_s), self._loop)
        try:
            return future.result(wait_s + 1.0)
        except TimeoutError:
            return 0

    def stop(self) -> None:
        """Stop the loop and its thread (after :meth:`cancel_running`)."""
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5.0)

    # --- on the loop thread --------------------------------------------------
    def _serve(self) -> None:
        loop = self._loop
        assert loop is not None
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _cancel_all(self, wait_s: float) -> int:
        self._closing = True
        jobs = list(self._running)
        for job in jobs:
            job.cancel()
        if jobs:
            await asyncio.wait(jobs, timeout=wait_s)
        return len(jobs)

    def _spawn(self, tasks: list[Claimed]) -> None:
        loop = asyncio.get_running_loop()
        for task in tasks:
            if self._closing:  # claimed during the shutdown: left for the final requeue
                self._released()
                continue
            job = loop.create_task(self._execute(task))
            self._running.add(job)
            job.add_done_callback(self._running.discard)

    async def _execute(self, task: Claimed) -> None:
        try:
            try:
                trace = self._trace
                outcome = await (
                    self._run(task)
                    if trace is None
                    else trace.worker_run_async(self._run, task, self._runner.worker_id)
                )
            except asyncio.CancelledError:
                return  # shutdown: the final requeue returns the task to its queue
            except Exception as exc:  # a bug of ours: dead-letter rather than hold it forever
                log.exception("could not run a %s task", task.task_type)
                outcome = self._runner.internal_error(task, exc)
            self._report(outcome)
        finally:
            self._released()

    async def _run(self, task: Claimed) -> Outcome:
        prepared = self._runner.prepare(task)
        if isinstance(prepared, Outcome):
            return prepared
        env, timeout_s = prepared.env, prepared.options.timeout
        with self._runner.fields(prepared):
            started = time.perf_counter()
            try:
                with running(prepared.context):
                    result = await await_with_timeout(prepared.fn, env.args, env.kwargs, timeout_s)
            except asyncio.CancelledError as exc:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise  # we were cancelled (shutdown), not the task's own doing
                error = TaskCancelledItself(f"the task raised CancelledError: {exc}")
                error.__cause__ = exc  # its traceback goes into the dead letter
                return self._runner.settle(prepared, time.perf_counter() - started, error=error)
            except Exception as exc:  # a task's error is data for the fail script
                return self._runner.settle(prepared, time.perf_counter() - started, error=exc)
            return self._runner.settle(prepared, time.perf_counter() - started, result=result)
