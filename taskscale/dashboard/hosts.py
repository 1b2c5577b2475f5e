"""The Host header check that keeps a DNS-rebinding page away from the console.

A console bound to 127.0.0.1 is out of the network's reach, but not out of
the reach of a web page the operator opens: a page on ``evil.example`` can
re-point its own name at 127.0.0.1 and then read the console's API as
"same origin".  Its requests still name ``evil.example`` in the Host header,
so a console on a loopback address answers only requests whose Host is one
of its loopback names (``localhost``, ``127.0.0.1``, ``[::1]`` and the bound
address) with the port it listens on, and refuses the rest with 400.  Reached
another way -- ``ssh -L 9000:localhost:8470``, a port-forward, a proxy -- the
name the browser uses is added with ``--allowed-host`` (``localhost:9000``;
a name without a port allows any port).  Bound elsewhere (``0.0.0.0`` in a
pod), the check is on only when ``--allowed-host`` names something.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pure ASGI below: `taskscale dashboard --help` needs no Starlette
    from starlette.types import ASGIApp, Receive, Scope, Send

#: The names a browser uses for this host.
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
#: The port of an allowed name the console listens on (whatever it is).
LISTENING = -1
#: A name without a port: any port.
ANY = 0

REFUSED = (
    b"Invalid Host header: open the console by the address it listens on, "
    b"or start it with --allowed-host NAME[:PORT]\n"
)

_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]+)(?::([0-9]{1,5}))?$")


@dataclass(frozen=True)
class Allowed:
    """One name the Host header may carry, with its port (:data:`ANY`,
    :data:`LISTENING` or a number)."""

    name: str
    port: int


def parse_host(text: str) -> tuple[str, int | None]:
    """``"name"``, ``"name:port"``, ``"[v6]:port"`` -> (lowercased name, port or
    None); ValueError with one line when it is none of those."""
    found = _HOST.match(text.strip())
    port = int(found.group(2)) if found and found.group(2) else None
    if not found or (port is not None and not 0 < port < 65536):
        raise ValueError(f"invalid host {text!r}: give name or name:port (IPv6 as [addr]:port)")
    return found.group(1).lower(), port


def allowed_host(text: str) -> Allowed:
    """An ``--allowed-host`` value."""
    name, port = parse_host(text)
    return Allowed(name, ANY if port is None else port)


def is_loopback(bind: str) -> bool:
    if bind.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_for(bind: str, extra: Sequence[Allowed] = ()) -> tuple[Allowed, ...] | None:
    """What Host may name for a console bound to ``bind``: on a loopback
    address its loopback names on the listening port plus ``extra``; elsewhere
    ``extra`` only, and None (no check) when there is none."""
    if not is_loopback(bind):
        return tuple(extra) or None
    address = bind.lower()
    if ":" in address and not address.startswith("["):
        address = f"[{address}]"  # an IPv6 address as a Host header spells it
    names = dict.fromkeys((*LOOPBACK_NAMES, address))
    return (*(Allowed(n, LISTENING) for n in names), *extra)


class HostCheck:
    """ASGI middleware: 400 for a request whose Host is not allowed, except on
    the ``exempt`` paths (``/healthz``: a kubelet probe names the pod IP, and
    the answer tells a rebinding page nothing)."""

    def __init__(
        self, app: ASGIApp, *, allowed: Sequence[Allowed], exempt: Sequence[str] = ("/healthz",)
    ) -> None:
        self.app = app
        self.allowed = tuple(allowed)
        self.exempt = frozenset(exempt)

    def permits(self, host: str | None, listening: int | None) -> bool:
        try:
            name, port = parse_host(host or "")
        except ValueError:
            return False
        for a in self.allowed:
            if a.name != name:
                continue
            if a.port == ANY or (port if port is not None else 80) == (
                listening if a.port == LISTENING else a.port
            ):
                return True
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and scope.get("path") not in self.exempt:
            server = scope.get("server")
            listening = server[1] if server and len(server) > 1 else None
            hosts = [v.decode("latin-1") for k, v in scope["headers"] if k == b"host"]
            if len(hosts) != 1 or not self.permits(hosts[0], listening):
                if scope["type"] == "websocket":  # none are served; refuse the handshake
                    await send({"type": "websocket.close", "code": 1008})
                    return
                await send(
                    {
                        "type": "http.response.start",
                        "status": 400,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8")],
                    }
                )
                await send({"type": "http.response.body", "body": REFUSED})
                return
        await self.app(scope, receive, send)
