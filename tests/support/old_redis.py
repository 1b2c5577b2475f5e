"""A stand-in for a Redis older than 7.0, for the server-version check.

No old redis-server is at hand, so this speaks just enough RESP to say it is
6.2.14: HELLO (RESP3, as taskscale's clients speak it), PING, INFO, and OK to
anything else.  Shared by the runtime's check (tests/test_redis_version.py)
and the controller's (tests/controller/test_controller_redis_version.py).
"""

from __future__ import annotations

import contextlib
import socketserver
import threading
from collections.abc import Iterator

#: The one line every taskscale process stops with on this server.
TOO_OLD = "Redis 6.2.14 is too old: taskscale needs 7.0 or later"


class _OldRedis(socketserver.StreamRequestHandler):
    """Answers HELLO, PING, INFO (as Redis 6.2.14) and OK to anything else."""

    def handle(self) -> None:
        while True:
            command = self._read_command()
            if command is None:
                return
            name = command[0].upper() if command else b""
            if name == b"HELLO":
                self.wfile.write(b"%2\r\n$5\r\nproto\r\n:3\r\n$7\r\nversion\r\n$6\r\n6.2.14\r\n")
            elif name == b"PING":
                self.wfile.write(b"+PONG\r\n")
            elif name == b"INFO":
                body = b"# Server\r\nredis_version:6.2.14\r\nredis_mode:standalone\r\n"
                self.wfile.write(b"$%d\r\n%s\r\n" % (len(body), body))
            else:
                self.wfile.write(b"+OK\r\n")

    def _read_command(self) -> list[bytes] | None:
        header = self.rfile.readline()
        if not header.startswith(b"*"):
            return None
        parts = []
        for _ in range(int(header[1:])):
            size = int(self.rfile.readline()[1:])
            parts.append(self.rfile.read(size + 2)[:-2])
        return parts


@contextlib.contextmanager
def old_redis() -> Iterator[str]:
    """The URL of a stand-in Redis 6.2.14 on a free loopback port."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _OldRedis)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"redis://127.0.0.1:{server.server_address[1]}/0"
    finally:
        server.shutdown()
        server.server_close()
