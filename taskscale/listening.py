"""Opening a listening port, and the one line a user reads when it can't be.

The worker's and the scheduler's ``--metrics-port``, the controller's
``--metrics-host``/``--metrics-port`` and the dashboard's ``--bind``/``--port``
all bind a TCP socket.  When that fails the command prints
``cannot listen on HOST:PORT: REASON`` and exits -- 2 when the address given
is wrong (a host name that does not resolve, an address that is not this
machine's), 1 when the port is taken or not permitted here (the command line
was fine; the machine said no) -- never an ``OSError`` traceback.
"""

from __future__ import annotations

import errno
import socket

#: Exit codes, as the rest of the command line uses them.
USAGE = 2
FAILURE = 1


class ListenError(Exception):
    """A port that could not be listened on; ``str()`` is the one line to print."""

    def __init__(self, host: str, port: int, error: OSError) -> None:
        reason = error.strerror or str(error) or type(error).__name__
        super().__init__(f"cannot listen on {_where(host, port)}: {reason}")
        self.host = host
        self.port = port
        self.exit_code = USAGE if _address_is_wrong(error) else FAILURE


def _where(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _address_is_wrong(error: OSError) -> bool:
    return isinstance(error, socket.gaierror) or error.errno == errno.EADDRNOTAVAIL


def open_listener(host: str, port: int, *, backlog: int = 128) -> socket.socket:
    """A TCP socket listening on ``host:port`` (0: any free port), or
    :class:`ListenError`."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise ListenError(host, port, exc) from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise ListenError(host, port, exc) from None
    return sock
