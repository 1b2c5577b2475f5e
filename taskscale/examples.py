"""Example tasks shipped with the package, for the demo, benchmarks and tests.

``taskscale worker --import taskscale.examples --types noop,sleep`` runs
them; ``taskscale enqueue sleep --kwargs '{"seconds": 2}'`` feeds them.
The ``async_*`` ones are ``async def``: a worker runs them on its event loop
(``--async-slots``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from taskscale.tasks import task


class ExampleFailure(RuntimeError):
    """Raised by the ``fail`` task, on purpose."""


@task("noop")
def noop(*args: Any, **kwargs: Any) -> None:
    """Does nothing: measures the runtime's own overhead."""
    return None


@task("sleep")
def sleep(seconds: float = 1.0) -> float:
    """Holds a thread for ``seconds`` (a stand-in for I/O-bound work)."""
    time.sleep(float(seconds))
    return float(seconds)


@task("echo")
def echo(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """Returns its arguments (RPC round trips)."""
    return {"args": list(args), "kwargs": kwargs}


@task("fail")
def fail(message: str = "failed on purpose") -> None:
    """Always raises (retries and dead letters)."""
    raise ExampleFailure(message)


@task("async_sleep")
async def async_sleep(seconds: float = 1.0) -> float:
    """Awaits ``asyncio.sleep(seconds)``: holds an async slot, not a thread."""
    await asyncio.sleep(float(seconds))
    return float(seconds)


@task("async_echo")
async def async_echo(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """Returns its arguments, from the event loop (RPC round trips)."""
    return {"args": list(args), "kwargs": kwargs}


@task("async_fail")
async def async_fail(message: str = "failed on purpose") -> None:
    """Always raises, after one await (retries and dead letters)."""
    await asyncio.sleep(0)
    raise ExampleFailure(message)
