"""Short in-pass retries: tenacity with exponential backoff and full jitter.

Used by the reconcile pass (reading Redis) and by the Kubernetes client
(API calls); every failed attempt is shown to a callback so a retry never
hides an error from the metrics.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

T = TypeVar("T")


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

    retrying = Retrying(
        stop=stop_after_attempt(max(1, settings.attempts)),
        wait=wait_random_exponential(multiplier=settings.initial_s, max=settings.max_s),
        retry=retry_if_exception(retry_if),
        reraise=True,
    )
    return retrying(attempt)
