"""Reads behind the token (``--auth-reads``): task arguments, tracebacks and
results often hold personal data, and by default every page and read
endpoint is open to whoever reaches the port.

With ``--auth-reads`` a request reads only when it carries

* the operator token in the ``X-Taskscale-Token`` header (scripts, and the
  pages' own POSTs), or
* the read cookie the login page sets once the token was typed there: an
  HMAC of the token (never the token itself), ``HttpOnly``,
  ``SameSite=Strict``, ``Secure`` over HTTPS, for the browser session; a
  changed token makes every cookie stale -- or
* a user name in ``--trusted-user-header`` (``X-Forwarded-User`` from
  oauth2-proxy, say), taken only from a peer address in ``--trusted-proxy``
  (anyone else could send that header too).

Everything else gets 401 (JSON under ``/api/``, a redirect to the login page
elsewhere), except ``/healthz`` (probes), ``/static/`` (the stylesheet and
script, no data) and the login page.  State changes still need the token in
the header whatever let the request read (the cookie is never enough: a
browser sends cookies by itself, so a cookie that could write would reopen
CSRF).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
from collections.abc import Sequence
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import TYPE_CHECKING
from urllib.parse import quote

if TYPE_CHECKING:  # pure ASGI below
    from starlette.types import ASGIApp, Receive, Scope, Send

#: The header that carries the operator token (the same as for writes).
TOKEN_HEADER = b"x-taskscale-token"
#: The cookie the login page sets.
COOKIE = "taskscale_read"
#: Paths open without authentication (prefixes end with "/").
OPEN_PATHS = ("/healthz", "/login", "/static/")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def trusted_proxy(text: str) -> Network:
    """A ``--trusted-proxy`` value: an address or a CIDR network."""
    try:
        return ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        raise ValueError(f"invalid proxy address {text!r}: give an IP address or a CIDR") from None


@dataclass(frozen=True)
class ReadAuth:
    """Who may read: the token's holders, and the users a trusted proxy names."""

    token: str | None
    user_header: str | None = None
    proxies: tuple[Network, ...] = ()

    def __post_init__(self) -> None:
        if not self.token and not self.user_header:
            raise ValueError(
                "--auth-reads needs the operator token (TASKSCALE_DASHBOARD_TOKEN) "
                "or --trusted-user-header"
            )
        if self.user_header and not self.proxies:
            raise ValueError("--trusted-user-header needs --trusted-proxy (the proxy's address)")

    def cookie_value(self) -> str:
        """The read cookie of the current token ("" without one)."""
        if not self.token:
            return ""
        return hmac.new(self.token.encode(), b"taskscale read cookie", hashlib.sha256).hexdigest()

    def token_ok(self, supplied: str) -> bool:
        return bool(self.token) and hmac.compare_digest(
            supplied.encode(), (self.token or "").encode()
        )

    def reader(self, scope: Scope) -> str | None:
        """Who ``scope``'s request reads as ("token", "cookie", "user NAME"), or None."""
        headers = dict(scope.get("headers") or [])
        if self.token_ok(headers.get(TOKEN_HEADER, b"").decode("latin-1")):
            return "token"
        cookies = SimpleCookie()
        try:
            cookies.load(headers.get(b"cookie", b"").decode("latin-1"))
        except Exception:  # a malformed Cookie header reads as none
            cookies = SimpleCookie()
        kept = cookies.get(COOKIE)
        expected = self.cookie_value()
        if kept is not None and expected and hmac.compare_digest(kept.value, expected):
            return "cookie"
        if self.user_header:
            user = headers.get(self.user_header.lower().encode(), b"").decode("latin-1").strip()
            client = scope.get("client")
            if user and client and self._from_proxy(client[0]):
                return f"user {user}"
        return None

    def _from_proxy(self, host: str) -> bool:
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in net for net in self.proxies)


class ReadGate:
    """ASGI middleware: only a request :meth:`ReadAuth.reader` names gets
    past, but for :data:`OPEN_PATHS`."""

    def __init__(self, app: ASGIApp, *, auth: ReadAuth, root: str = "") -> None:
        self.app = app
        self.auth = auth
        self.root = root

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if _is_open(path) or self.auth.reader(scope) is not None:
            await self.app(scope, receive, send)
            return
        if path.startswith("/api/"):
            body = json.dumps({"error": "reads need the operator token (--auth-reads)"})
            headers = [(b"content-type", b"application/json")]
            await _respond(send, 401, headers, body.encode())
            return
        query = scope.get("query_string", b"").decode("latin-1")
        target = quote(self.root + path + (f"?{query}" if query else ""), safe="")
        location = f"{self.root}/login?next={target}".encode("latin-1")
        await _respond(send, 303, [(b"location", location)], b"")


def _is_open(path: str) -> bool:
    return any(path == p or (p.endswith("/") and path.startswith(p)) for p in OPEN_PATHS)


async def _respond(send: Send, code: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    headers = [*headers, (b"cache-control", b"no-store")]
    await send({"type": "http.response.start", "status": code, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def safe_next(target: str) -> str:
    """Where the login page sends the browser back to: a path of this site only."""
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def login_cookie(auth: ReadAuth, *, root: str, secure: bool) -> str:
    """The ``Set-Cookie`` value of a successful login."""
    parts = [
        f"{COOKIE}={auth.cookie_value()}",
        f"Path={root or '/'}",
        "HttpOnly",
        "SameSite=Strict",
    ]
    if secure:
        parts.append("Secure")
    return "; ".join(parts)


def proxies_of(texts: Sequence[str]) -> tuple[Network, ...]:
    return tuple(trusted_proxy(t) for t in texts)
