"""Bounded polling for tests: every wait in the suite has a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T | None],
    *,
    timeout: float = 30.0,
    interval: float = 0.02,
    what: str = "condition",
) -> T:
    """Poll ``predicate`` until it returns something truthy (returned), or fail
    after ``timeout`` s naming ``what`` and the last value seen."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}; last: {value!r}")
        time.sleep(interval)
