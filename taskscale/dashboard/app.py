"""The dashboard's ASGI application: pages, ``/api/``, vendored static files.

Security headers go on every response: a Content-Security-Policy that allows
only this origin's own scripts and styles (no inline script, so an injected
``<script>`` could not run even if escaping failed), no framing, no referrer.
The Redis URL is never rendered: pages show only its host and port.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from taskscale.dashboard import api, pages
from taskscale.dashboard.body_limit import DEFAULT_MAX_BODY_BYTES, BodyLimit
from taskscale.dashboard.hosts import Allowed, HostCheck
from taskscale.dashboard.read_auth import ReadAuth, ReadGate
from taskscale.dashboard.state import Context, Snapshots
from taskscale.redis_urls import RedisClient
from taskscale.shards import ShardMap

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}


class _SecurityHeaders(BaseHTTPMiddleware):
    async def dispatch(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await call_next(request)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response


async def _healthz(request: Request) -> Response:
    """Liveness and readiness: the server answers (Redis trouble shows on the pages)."""
    return PlainTextResponse("ok")


async def _not_found(request: Request, exc: Exception) -> Response:
    """A path no route serves: JSON under /api/, the styled page elsewhere."""
    if request.url.path.startswith(("/api/", "/static/")):
        return JSONResponse({"error": "not found"}, status_code=404)
    return pages.not_found(request, "page")


def redis_where(url: str) -> str:
    """``host:port/db`` of a Redis URL: never its user name or password."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return "unix socket"
    host = parts.hostname or "?"
    port = parts.port or 6379
    return f"{host}:{port}{parts.path or ''}"


def create_app(
    client: RedisClient,
    *,
    shards: ShardMap,
    token: str | None,
    redis_url: str,
    root: str = "",
    snapshot_s: float = 1.0,
    allowed_hosts: Sequence[Allowed] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    read_auth: ReadAuth | None = None,
) -> Starlette:
    """The dashboard for ``client``'s Redis and the namespaces of ``shards``
    (one, or a sharded deployment's list); ``token`` None or "" = read-only;
    ``snapshot_s``: how long one overview read is shared by every viewer;
    ``allowed_hosts``: what the Host header may name (None: anything;
    :func:`taskscale.dashboard.hosts.allowed_for`); ``max_body_bytes``: the
    largest request body read, 413 over it (:mod:`taskscale.dashboard.body_limit`);
    ``read_auth``: who may read (``--auth-reads``, :mod:`taskscale.dashboard.read_auth`;
    None: reads are open)."""
    # the 413 of the body limit goes out through the security headers
    middleware = [Middleware(_SecurityHeaders), Middleware(BodyLimit, max_bytes=max_body_bytes)]
    if read_auth is not None:  # inside the security headers: a 401 carries them
        middleware.append(Middleware(ReadGate, auth=read_auth, root=root.rstrip("/")))
    if allowed_hosts is not None:  # outermost: a refused request reaches nothing
        middleware.insert(0, Middleware(HostCheck, allowed=allowed_hosts))
    app = Starlette(
        routes=[
            Route("/healthz", _healthz),
            *api.ROUTES,
            *pages.ROUTES,
            Mount("/static", StaticFiles(packages=[("taskscale.dashboard", "static")])),
        ],
        middleware=middleware,
        exception_handlers={404: _not_found},
    )
    app.state.ctx = Context(
        client=client,
        shards=shards,
        token=token or None,
        snapshots=Snapshots(snapshot_s),
        root=root.rstrip("/"),
        redis_where=redis_where(redis_url),
        read_auth=read_auth,
    )
    return app
