"""What the console's pages and its API share: one :class:`Context` per app.

The pages (:mod:`~taskscale.dashboard.pages`) and the JSON API
(:mod:`~taskscale.dashboard.api`) serve the same Redis, namespaces and token
and read through the same readers (:mod:`~taskscale.dashboard.data`); this
module holds what both need besides the readers -- the context
``create_app`` builds (client, namespaces, token, shared snapshots, the
settings the pages show), the paging of a listing, and running a blocking
read off the event loop -- so neither reaches into the other.
"""

from __future__ import annotations

import hmac
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from taskscale.dashboard.read_auth import ReadAuth
from taskscale.keys import Keys
from taskscale.redis_urls import RedisClient
from taskscale.shards import ShardMap

#: The header that carries the operator token of a state change.
TOKEN_HEADER = "x-taskscale-token"
#: Dead letters or delayed tasks per page (``?count=`` may ask for up to :data:`MAX_PAGE`).
PAGE = 50
MAX_PAGE = 500


class Snapshots:
    """The last answer of each expensive read, shared by every viewer for
    ``max_age_s``: ten open overview tabs cost Redis what one costs.  The
    answer itself is shared, not copied (a deep copy of a 1000-type overview
    cost ~25 ms): callers only serialize it and must never change it."""

    def __init__(self, max_age_s: float = 1.0) -> None:
        self.max_age_s = max_age_s
        self._lock = threading.Lock()
        self._kept: dict[str, tuple[float, Any]] = {}

    def get(self, name: str, read: Callable[[], Any]) -> Any:
        with self._lock:  # one reader at a time: the others wait and share its answer
            kept = self._kept.get(name)
            if kept is not None and time.monotonic() - kept[0] < self.max_age_s:
                return kept[1]
            value = read()
            self._kept[name] = (time.monotonic(), value)
            return value

    def forget(self) -> None:
        """After a change made through the console: the next read is fresh."""
        with self._lock:
            self._kept.clear()


@dataclass(frozen=True)
class Context:
    """What every page and endpoint needs: a client, the namespaces (one, or
    a sharded deployment's list), the token, the shared snapshots, and what
    the pages show of the settings (the path the console is served under,
    the Redis host and port -- never its URL)."""

    client: RedisClient
    shards: ShardMap
    token: str | None
    snapshots: Snapshots = field(default_factory=Snapshots)
    root: str = ""
    redis_where: str = ""
    #: Reads behind the token (``--auth-reads``); None: reads are open.
    read_auth: ReadAuth | None = None

    def keys_for(self, task_type: str) -> Keys:
        """The namespace that holds ``task_type`` (the only one when not sharded)."""
        return self.shards.keys_for(task_type)

    @property
    def writable(self) -> bool:
        """Whether state changes are possible at all (a token is configured)."""
        return bool(self.token)

    def authorized(self, request: Request) -> bool:
        """Whether ``request`` carries the operator token (never without one set)."""
        if not self.token:
            return False
        supplied = request.headers.get(TOKEN_HEADER, "")
        return hmac.compare_digest(supplied.encode(), self.token.encode())


def context(request: Request) -> Context:
    """The console's :class:`Context`, set on the app by ``create_app``."""
    found: Context = request.app.state.ctx
    return found


async def in_thread(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` in Starlette's thread pool: Redis reads block."""
    return await run_in_threadpool(fn, *args, **kwargs)


def page_params(request: Request) -> tuple[int, int]:
    """``?start=`` (default 0) and ``?count=`` (default :data:`PAGE`, at most
    :data:`MAX_PAGE`) of a listing; ValueError when one is not a whole number."""
    return _int_param(request, "start", 0, 10**9), _int_param(request, "count", PAGE, MAX_PAGE)


def _int_param(request: Request, name: str, default: int, top: int) -> int:
    try:
        value = int(request.query_params.get(name, default))
    except ValueError:
        raise ValueError(f"{name} must be a whole number") from None
    return max(0, min(value, top))
