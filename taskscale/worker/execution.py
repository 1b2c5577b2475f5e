"""Running one claimed task: the function call and what its outcome is.

A worker's executor threads hand every claimed task to :class:`TaskRunner`,
which decodes the envelope, finds the function, checks the arguments bind,
calls it, and turns what happened into an :class:`Outcome` for the reporter
(``complete.lua`` for a success, ``fail.lua`` for a retry or a dead letter).
Nothing here talks to Redis, so every rule below is a plain function of the
envelope and the task function.

Rules:

* an exception from the task is logged with its traceback, then retried with
  backoff until ``max_retries``; the dead letter keeps the traceback;
* arguments that do not fit the function's signature are a mistake of the
  caller, not a transient failure: dead-lettered at once, never retried;
* a task whose worker died ``max_lost`` times running it is not run again;
* a result that is not JSON is a failure like an exception;
* a run longer than its timeout is failed with ``RunTimeout``
  (:mod:`taskscale.worker.timeouts` says what can be interrupted);
* retries, backoff, timeout and the reply's TTL are the envelope's options,
  else the task's declared ones (:mod:`taskscale.options`);
* a fan-out sub-task whose fan-out collects results reports its result (or
  error) like an RPC reply, for the fan-out's results.
"""

from __future__ import annotations

import inspect
import json
import logging
import threading
import time
import traceback
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any

from taskscale import envelope
from taskscale.backoff import exponential, spread
from taskscale.context import TaskContext, enter, leave
from taskscale.logs import enter_task_fields, leave_task_fields, task_fields
from taskscale.metrics import WorkerMetrics
from taskscale.options import DEFAULT_RESULT_TTL_S, Resolved, resolve
from taskscale.tasks import TaskRegistry
from taskscale.worker.timeouts import RunTimeout, call_with_timeout

log = logging.getLogger("taskscale.worker")

#: The most characters of a traceback kept in a dead letter (its tail).
MAX_TRACEBACK_CHARS = 8000


@dataclass(frozen=True)
class RetryPolicy:
    """Backoff of failed tasks: ``base * factor ** attempts``, capped, +-jitter."""

    base_s: float = 1.0
    factor: float = 2.0
    cap_s: float = 3600.0
    jitter: float = 0.1  # fraction of the delay

    def backoff_ms(self, attempts: int) -> int:
        # Not an overflow guard (exponential has one): the delay stops growing
        # at attempt 64, which a factor near 1 or a tiny base reaches before
        # the cap (tests/options/test_backoff_growth.py).
        capped = exponential(
            min(attempts, 64), base_s=self.base_s, cap_s=self.cap_s, factor=self.factor
        )
        return max(1, round(spread(capped, self.jitter) * 1000))

    def for_task(self, options: Resolved, attempts: int) -> int:
        """The backoff before the next attempt under a task's own options: its
        schedule (exact), else its base / cap with this policy's factor and jitter."""
        schedule = options.backoff_schedule_s
        if schedule:
            return max(1, round(schedule[min(attempts, len(schedule) - 1)] * 1000))
        policy = replace(
            self,
            base_s=options.backoff_base_s or self.base_s,
            cap_s=options.retry_backoff_max or self.cap_s,
        )
        return policy.backoff_ms(attempts)


@dataclass(slots=True)
class Claimed:
    """One task as ``claim.lua`` handed it over."""

    task_type: str
    task_id: str
    raw: bytes
    now_ms: int  # Redis clock at the claim
    #: An unsampled trace context tracing set instead of spans (TaskContext.trace_parent)
    trace_parent: Any = None


@dataclass(slots=True)
class Outcome:
    """What the reporter records for one run."""

    task_id: str
    task_type: str
    kind: str  # "ok", "retry" or "dead"
    service_ms: int
    reply_to: str = ""
    reply_ttl: int = DEFAULT_RESULT_TTL_S
    reply: str = ""
    fanout: str = ""
    retry_envelope: str = ""
    backoff_ms: int = 0
    error: str = ""
    traceback: str = ""
    wait_ms: int = -1  #: ms from enqueued (or due) to the claim, -1 = not run (history)
    summary: str = ""  #: the start of the result's JSON (the console's recent runs)


@dataclass(slots=True)
class Prepared:
    """A task ready to be called: what :meth:`TaskRunner.prepare` found."""

    env: envelope.Envelope
    fn: Callable[..., Any]
    options: Resolved
    context: TaskContext


#: How much of a result's JSON a recent-runs record keeps.
SUMMARY_CHARS = 200
_NO_SIGNATURE = object()
#: The most argument shapes remembered as binding (per runner).
_MAX_SHAPES = 4096


class TaskRunner:
    """Runs claimed tasks for one worker; safe to call from many threads."""

    def __init__(
        self,
        registry: TaskRegistry,
        *,
        worker_id: str,
        retry: RetryPolicy,
        max_lost: int,
        metrics: WorkerMetrics | None = None,
        is_cancelled: Callable[[str], bool] | None = None,
        prefix: str | None = None,
    ) -> None:
        """``prefix``: the namespace's ``"{NS}:"``, which a task's ``reply_to`` must be in."""
        self.registry = registry
        self.prefix = prefix
        self.worker_id = worker_id
        self.retry = retry
        self.max_lost = max_lost
        self.metrics = metrics
        self._is_cancelled = is_cancelled or (lambda _task_id: False)
        self._signatures: dict[Callable[..., Any], inspect.Signature | object] = {}
        #: (fn, number of args, kwarg names) known to bind: checked once, not per task
        self._binds: set[tuple[Any, ...]] = set()
        self._lock = threading.Lock()

    def run(self, task: Claimed) -> Outcome:
        """Run ``task`` on this thread: :meth:`prepare`, call, :meth:`settle`.

        The same steps as ``prepare`` / ``fields`` / ``running`` / ``settle``
        (the async executor's), with the context variables set and reset
        directly: this runs once per task, and three context managers cost
        a no-op task about a sixth of its executor time."""
        env = _decoded(task, self.prefix)
        if isinstance(env, Outcome):
            return env
        fields = enter_task_fields(env.id, env.type, self.worker_id)
        try:
            prepared = self._prepare(env, task)
            if isinstance(prepared, Outcome):
                return prepared
            error: Exception | None = None
            result: Any = None
            started = time.perf_counter()
            current = enter(prepared.context)
            try:
                result = call_with_timeout(
                    prepared.fn, env.args, env.kwargs, prepared.options.timeout
                )
            except Exception as exc:  # a task's error is data for the fail script
                error = exc
            finally:
                leave(current)
            return self.settle(prepared, time.perf_counter() - started, result=result, error=error)
        finally:
            leave_task_fields(fields)

    def _cancel_seen(self, task_type: str) -> None:
        """A running task saw its cancellation flag (once per run)."""
        if self.metrics is not None:
            self.metrics.cancel_seen(task_type)

    def prepare(self, task: Claimed) -> Prepared | Outcome:
        """Everything before the call: decode, find the function, check the
        arguments bind; an :class:`Outcome` when the task must not be called."""
        env = _decoded(task, self.prefix)
        if isinstance(env, Outcome):
            return env
        with task_fields(env.id, env.type, self.worker_id):
            return self._prepare(env, task)

    def fields(self, prepared: Prepared) -> AbstractContextManager[None]:
        """Within the block, log records carry the task's fields."""
        return task_fields(prepared.env.id, prepared.env.type, self.worker_id)

    def _prepare(self, env: envelope.Envelope, task: Claimed) -> Prepared | Outcome:
        if self.metrics is not None:
            since = env.due_ms or env.enqueued_ms or task.now_ms
            self.metrics.task_claimed(env.type, (task.now_ms - since) / 1000)
        if env.reaped >= self.max_lost:
            error = (
                f"its worker died {env.reaped} times while running it (lease expired); "
                f"dead-lettered instead of run again (--max-lost {self.max_lost})"
            )
            return self.failed(env, 0, "LostWorker", error, final=True)
        fn = self.registry.get(env.type)
        if fn is None:
            error = f"no function registered for task type {env.type!r} on worker {self.worker_id}"
            return self.failed(env, 0, "UnknownTaskType", error, final=True)
        mismatch = self._bind_error(fn, env.args, env.kwargs)
        if mismatch is not None:
            error = f"arguments do not match {_qualname(fn)}{mismatch}"
            log.error("task %s %s dead-lettered: %s", env.type, env.id, error)
            return self.failed(env, 0, "TypeError", error, final=True)
        context = TaskContext(
            env.id,
            env.type,
            self.worker_id,
            env.attempts + 1,
            self._is_cancelled,
            task.now_ms,
            self._cancel_seen,
            trace_parent=task.trace_parent,
        )
        return Prepared(env, fn, self.options(env), context)

    def settle(
        self,
        prepared: Prepared,
        elapsed: float,
        *,
        result: Any = None,
        error: Exception | None = None,
    ) -> Outcome:
        """Everything after the call: the function returned ``result`` or
        raised ``error`` after ``elapsed`` seconds -> completion, retry or dead letter."""
        env, opts = prepared.env, prepared.options
        if error is not None:
            if isinstance(error, RunTimeout) and self.metrics is not None:
                self.metrics.timeouts.labels(env.type).inc()
            tb = "".join(traceback.format_exception(error))[-MAX_TRACEBACK_CHARS:]
            log.error(
                "task %s %s failed (attempt %d of %d): %s: %s\n%s",
                env.type,
                env.id,
                env.attempts + 1,
                opts.max_retries + 1,
                type(error).__name__,
                error,
                tb.rstrip(),
            )
            failed = self.failed(env, elapsed, type(error).__name__, str(error), final=False, tb=tb)
            return _waited(failed, prepared)
        try:
            body = json.dumps(result, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            message = f"result of {env.type} is not JSON-serialisable: {exc}"
            log.error("task %s %s: %s", env.type, env.id, message)
            return _waited(self.failed(env, elapsed, "TypeError", message, final=False), prepared)
        if self.metrics is not None:
            self.metrics.task_finished(env.type, "completed", elapsed)
        reply = ""
        if env.reply_to or _collects(env) or "workflow" in env.fields:
            reply = '{"id":' + json.dumps(env.id) + ',"ok":true,"result":' + body + "}"
        return Outcome(
            env.id,
            env.type,
            "ok",
            round(elapsed * 1000),
            reply_to=env.reply_to or "",
            reply_ttl=opts.result_ttl,
            reply=reply,
            fanout=env.fanout or "",
            wait_ms=_wait_ms(prepared),
            summary=body[:SUMMARY_CHARS],
        )

    def options(self, env: envelope.Envelope) -> Resolved:
        """The options this run goes by: the envelope's, else the task's declared."""
        return resolve(env.fields, self.registry.options(env.type))

    def internal_error(self, task: Claimed, exc: Exception) -> Outcome:
        """Dead-letter a task our own code failed on, still answering its RPC
        caller and releasing its fan-out slot when the envelope decodes.
        Never raises: it is what an executor falls back on."""
        error = f"{type(exc).__name__}: {exc}"
        bare = Outcome(task.task_id, task.task_type, "dead", 0, error=f"WorkerError: {error}")
        try:
            env = envelope.decode(task.raw, prefix=self.prefix)
            return self.failed(env, 0, "WorkerError", error, final=True)
        except Exception:  # the fallback of the fallback: a dead letter, no reply
            return bare

    def failed(
        self,
        env: envelope.Envelope,
        elapsed: float,
        error_type: str,
        error: str,
        *,
        final: bool,
        tb: str = "",
    ) -> Outcome:
        """A retry while attempts remain (and ``final`` is false), else a dead letter."""
        ms = round(elapsed * 1000)
        opts = self.options(env)
        if not final and env.attempts < opts.max_retries:
            if self.metrics is not None:
                self.metrics.task_finished(env.type, "retried", elapsed)
            return Outcome(
                env.id,
                env.type,
                "retry",
                ms,
                retry_envelope=envelope.for_retry(env),
                backoff_ms=self.retry.for_task(opts, env.attempts),
                error=f"{error_type}: {error}",
            )
        if self.metrics is not None:
            self.metrics.task_finished(env.type, "dead", elapsed)
        reply = ""
        if env.reply_to or _collects(env) or "workflow" in env.fields:
            reply = json.dumps(
                {"id": env.id, "ok": False, "error_type": error_type, "error": error},
                separators=(",", ":"),
            )
        return Outcome(
            env.id,
            env.type,
            "dead",
            ms,
            reply_to=env.reply_to or "",
            reply_ttl=opts.result_ttl,
            reply=reply,
            fanout=env.fanout or "",
            error=f"{error_type}: {error}",
            traceback=tb,
        )

    def _bind_error(
        self, fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]
    ) -> str | None:
        """Why ``fn(*args, **kwargs)`` cannot bind, or None when it can (or
        the function has no signature to check, like some builtins)."""
        shape = (fn, len(args), *kwargs)  # binding depends only on these
        if shape in self._binds:
            return None
        with self._lock:
            sig = self._signatures.get(fn)
        if sig is None:
            try:
                sig = inspect.signature(fn)
            except (TypeError, ValueError):
                sig = _NO_SIGNATURE
            with self._lock:
                self._signatures[fn] = sig
        if not isinstance(sig, inspect.Signature):
            return None
        try:
            sig.bind(*args, **kwargs)
        except TypeError as exc:
            bare = sig.replace(
                parameters=[p.replace(annotation=p.empty) for p in sig.parameters.values()],
                return_annotation=sig.empty,
            )
            return f"{bare}: {exc}"
        if len(self._binds) < _MAX_SHAPES:
            self._binds.add(shape)
        return None


def _wait_ms(prepared: Prepared) -> int:
    env, claimed = prepared.env, prepared.context.claimed_ms
    return max(0, claimed - (env.due_ms or env.enqueued_ms or claimed))


def _waited(outcome: Outcome, prepared: Prepared) -> Outcome:
    outcome.wait_ms = _wait_ms(prepared)
    return outcome


def _decoded(task: Claimed, prefix: str | None) -> envelope.Envelope | Outcome:
    """The task's envelope, or the dead letter of one that breaks the rules
    (:mod:`taskscale.envelope_rules`): no reply, no fan-out, no key it names
    is touched, since none of its fields can be trusted."""
    try:
        return envelope.decode(task.raw, prefix=prefix)
    except envelope.EnvelopeError as exc:
        error = f"InvalidEnvelope: {exc}"
    log.error("task %s %s dead-lettered: %s", task.task_type, task.task_id, error)
    return Outcome(task.task_id, task.task_type, "dead", 0, error=error)


def _collects(env: envelope.Envelope) -> bool:
    """A sub-task of a fan-out that collects results (``fanout_add`` stamps it)."""
    return bool(env.fanout) and env.fields.get("fanout_collect") is True


def _qualname(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn))
