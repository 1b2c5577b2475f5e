"""Test-only tasks for the RPC tests (imported by worker processes and in-process workers)."""

from __future__ import annotations

import os
import socket
import threading
from typing import Any

from taskscale.tasks import task


class QuotaExceeded(Exception):
    """A user-defined error type, to check the remote type name travels."""


@task("rpc.add")
def add(a: float, b: float, *, scale: float = 1) -> float:
    return (a + b) * scale


@task("rpc.where")
def where() -> dict[str, Any]:
    """Which process answered (proves the caller is somewhere else)."""
    return {"pid": os.getpid(), "host": socket.gethostname()}


@task("rpc.nothing")
def nothing() -> None:
    return None


@task("rpc.structure")
def structure(doc: dict[str, Any]) -> dict[str, Any]:
    return {"echo": doc, "keys": sorted(doc), "unicode": "žluťoučký kůň"}


#: Errors a retry does not fix declare no retries (a call keeps the task's).
@task("rpc.quota", max_retries=0)
def quota(user: str) -> None:
    raise QuotaExceeded(f"user {user} is over quota")


@task("rpc.unserialisable", max_retries=0)
def unserialisable() -> object:
    return {1, 2, 3}


#: Set by a test to let every running ``rpc.block`` task return.
RELEASE = threading.Event()


@task("rpc.block")
def block() -> str:
    """Runs until the test sets RELEASE (at most 30 s)."""
    RELEASE.wait(30)
    return "released"


@task("rpc.flaky")
def flaky() -> None:
    raise RuntimeError("fails every time")


@task("rpc.once", max_retries=2, retry_backoff=0.05)
def fails_once(n: int) -> dict[str, int]:
    """Fails its first run, answers on its retry (with the attempt it ran as)."""
    from taskscale.context import current_task

    attempt = current_task().attempt
    if attempt == 1:
        raise RuntimeError("first run fails")
    return {"n": n, "attempt": attempt}
