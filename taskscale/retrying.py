"""Every tenacity retry policy of taskscale, in one module.

Two policies, for two kinds of caller -- the runtime and the controller share
this module, so it lives outside taskscale/controller (the runtime never
imports the controller):

* :func:`retrying` -- the runtime's patient policy.  Workers and schedulers
  are long-running: a Redis restart must not kill them, so a call that meets
  a transient error (:data:`TRANSIENT_ERRORS`: the server is unreachable
  right now) waits with exponential backoff and jitter and is called again
  until the server is back, a deadline passes or the caller is stopping.
  Every retry is logged.
* :func:`call_with_retries` -- short in-pass retries (the controller reading
  Redis, calling the Kubernetes API): a few attempts with full jitter, every
  failed attempt shown to a callback so a retry never hides an error from
  the metrics.

A loop that sleeps between its own attempts (a restart, a resubscribe)
computes the sleep with :mod:`taskscale.backoff` instead: tenacity wraps one
call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import redis
from redis.exceptions import ClusterDownError, SlotNotCoveredError, TryAgainError
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    stop_never,
    wait_exponential_jitter,
    wait_random_exponential,
)
from tenacity.stop import stop_base

__all__ = ["TRANSIENT_ERRORS", "RetrySettings", "call_with_retries", "retrying"]

#: Errors that mean "the server is unreachable right now": worth retrying.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.BusyLoadingError,
    # a cluster failing over: the client refreshes its slot map; the next try goes
    # to the new master (redis-py's own retries are off, see connection.connect())
    ClusterDownError,
    TryAgainError,
    SlotNotCoveredError,
)

log = logging.getLogger("taskscale.connection")
T = TypeVar("T")


def _log_retry(state: RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome is not None else None
    wait = state.next_action.sleep if state.next_action is not None else 0.0
    log.warning(
        "Redis unavailable (%s); retry %d in %.2fs",
        exc.__class__.__name__ if exc else "?",
        state.attempt_number,
        wait,
    )


class _StopWhen(stop_base):
    """Stop retrying once ``predicate()`` is true (e.g. the worker is shutting down)."""

    def __init__(self, predicate: Callable[[], bool]) -> None:
        self.predicate = predicate

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self.predicate()


def retrying(
    fn: Callable[[], T],
    *,
    give_up_after_s: float | None = None,
    give_up_when: Callable[[], bool] | None = None,
    max_wait_s: float = 5.0,
) -> T:
    """Call ``fn()``; on a transient Redis error wait (exponential, jitter)
    and call again, forever unless ``give_up_after_s`` passes or
    ``give_up_when()`` becomes true -- then the last error is raised.

    Only use it for calls that are safe to repeat: every runtime script is
    (complete/fail/requeue act only on tasks still in flight).
    """
    stop: stop_base = stop_never
    if give_up_after_s is not None:
        stop = stop_after_delay(give_up_after_s)
    if give_up_when is not None:
        stop = stop | _StopWhen(give_up_when)
    retryer = Retrying(
        retry=retry_if_exception_type(TRANSIENT_ERRORS),
        wait=wait_exponential_jitter(multiplier=0.05, max=max_wait_s, jitter=0.2),
        stop=stop,
        reraise=True,
        before_sleep=_log_retry,
    )
    return retryer(fn)


@dataclass(frozen=True)
class RetrySettings:
    """Short in-pass retries (tenacity, exponential backoff with full jitter)."""

    attempts: int = 3
    initial_s: float = 0.05
    max_s: float = 1.0


def call_with_retries(
    fn: Callable[[], T],
    *,
    settings: RetrySettings,
    retry_if: Callable[[BaseException], bool],
    on_error: Callable[[BaseException], None],
) -> T:
    """Call ``fn``, retrying errors ``retry_if`` accepts; ``on_error`` sees every
    failed attempt (retried or not), so a retry never hides an error from the
    metrics.  The last error is re-raised."""

    def attempt() -> T:
        try:
            return fn()
        except Exception as exc:
            on_error(exc)
            raise

    retryer = Retrying(
        stop=stop_after_attempt(max(1, settings.attempts)),
        wait=wait_random_exponential(multiplier=settings.initial_s, max=settings.max_s),
        retry=retry_if_exception(retry_if),
        reraise=True,
    )
    return retryer(attempt)
