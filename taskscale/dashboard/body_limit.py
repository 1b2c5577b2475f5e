"""The console's request bodies are bounded: 413 over ``--max-body`` bytes.

An authenticated POST used to be read whole into memory whatever its size
(300 MB grew the console from 46 to 347 MB).  :class:`BodyLimit` is a plain
ASGI middleware in front of every route: a request whose ``Content-Length``
is over the limit is answered 413 before a byte of its body is read, and a
body without one (chunked) is counted as the application reads it -- the
read that passes the limit ends the request with 413, so no more than the
limit (plus the server's one buffer) is ever read.  The answer is the API's
JSON error, ``{"error": "..."}``.  (It imports no web framework at run
time: ``taskscale dashboard``'s flag reads its default from here.)
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: The default limit of a request body, bytes (``--max-body``).
DEFAULT_MAX_BODY_BYTES = 1024 * 1024


class _TooLarge(Exception):
    """Raised out of ``receive`` when the body passes the limit."""


class BodyLimit:
    """Answer 413 to a request whose body is over ``max_bytes``."""

    def __init__(self, app: ASGIApp, *, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self._declared(scope) > self.max_bytes:
            await self._refuse(send)
            return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _TooLarge
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except _TooLarge:
            if not started:  # a handler that answered before reading it all: leave it
                await self._refuse(send)

    @staticmethod
    def _declared(scope: Scope) -> int:
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    return int(value)
                except ValueError:
                    return 0  # the server refuses a malformed one itself
        return 0

    async def _refuse(self, send: Send) -> None:
        body = json.dumps(
            {"error": f"the request body is over the limit of {self.max_bytes} bytes (--max-body)"}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                    (b"cache-control", b"no-store"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
