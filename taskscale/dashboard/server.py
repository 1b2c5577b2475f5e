"""``taskscale dashboard``, and the dashboard served from a thread (the demo, tests).

This module imports no web framework at import time, so ``taskscale`` can
list the command without the ``dashboard`` extra and say how to install it.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from taskscale.cli.common import add_connection_arguments, count, guarded, port, sharded_client
from taskscale.cli.envdefaults import env_name
from taskscale.dashboard.body_limit import DEFAULT_MAX_BODY_BYTES
from taskscale.dashboard.hosts import allowed_for, allowed_host
from taskscale.dashboard.read_auth import ReadAuth, proxies_of
from taskscale.listening import open_listener

log = logging.getLogger("taskscale.dashboard")

TOKEN_ENV = "TASKSCALE_DASHBOARD_TOKEN"
DEFAULT_PORT = 8470
#: The console listens on this host only unless told (docs/dashboard.md).
DEFAULT_HOST = "127.0.0.1"
MISSING = "the dashboard needs its extra: pip install -e '.[dashboard]' in a checkout"


def available() -> bool:
    """Whether the ``dashboard`` extra (Starlette, uvicorn, Jinja2) is installed."""
    try:
        import jinja2  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass
class RunningDashboard:
    """A dashboard served by uvicorn in a daemon thread."""

    url: str
    server: Any
    thread: threading.Thread
    client: Any

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)
        self.client.close()


def serve_in_thread(
    redis_url: str,
    *,
    namespace: str,
    token: str | None = None,
    host: str = DEFAULT_HOST,
    port: int = 0,
    startup_timeout_s: float = 20.0,
    snapshot_s: float = 1.0,
    allowed_hosts: Sequence[str] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    auth_reads: bool = False,
    trusted_user_header: str | None = None,
    trusted_proxies: Sequence[str] = (),
) -> RunningDashboard:
    """Start the dashboard on ``host:port`` (0 = a free port); return once it
    listens.  ``namespace`` may list several (``a,b,c``: a sharded deployment);
    ``allowed_hosts`` as ``--allowed-host``, ``max_body_bytes`` as ``--max-body``,
    the last three as ``--auth-reads``, ``--trusted-user-header``, ``--trusted-proxy``."""
    import uvicorn

    from taskscale.connection import connect
    from taskscale.dashboard.app import create_app
    from taskscale.shards import ShardMap

    shards = ShardMap.parse(namespace)
    hosts = allowed_for(host, [allowed_host(h) for h in allowed_hosts])
    readers = read_auth_of(auth_reads, token, trusted_user_header, trusted_proxies)
    client = connect(redis_url)
    app = create_app(
        client,
        shards=shards,
        token=token,
        redis_url=redis_url,
        snapshot_s=snapshot_s,
        allowed_hosts=hosts,
        max_body_bytes=max_body_bytes,
        read_auth=readers,
    )
    # log_config=None: uvicorn's records go through our handler (text or JSON)
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", access_log=False, log_config=None
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="dashboard", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            client.close()
            raise RuntimeError(f"the dashboard did not start on {host}:{port}")
        time.sleep(0.02)
    bound = server.servers[0].sockets[0].getsockname()[1]
    return RunningDashboard(f"http://{host}:{bound}/", server, thread, client)


def read_auth_of(
    on: bool, token: str | None, user_header: str | None, proxies: Sequence[str]
) -> ReadAuth | None:
    """The readers of ``--auth-reads`` (None: off); ValueError with one line
    when it cannot work (no token and no proxy header, a header without proxies)."""
    if not on:
        if user_header or proxies:
            raise ValueError("--trusted-user-header and --trusted-proxy need --auth-reads")
        return None
    return ReadAuth(token or None, user_header or None, proxies_of(proxies))


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("dashboard", help="serve the web console (taskscale[dashboard])")
    add_connection_arguments(p)
    p.add_argument(
        "--port", type=port, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}; 0: any free port"
    )
    p.add_argument(
        "--bind",
        default=DEFAULT_HOST,
        help=f"address to listen on (default {DEFAULT_HOST}: this host)",
    )
    p.add_argument(
        "--token",
        default=os.environ.get(TOKEN_ENV),
        help=f"operator token that allows retries, deletes, enqueues; prefer the env {TOKEN_ENV} "
        "(a command line is visible to every user of the host); without one the console is "
        "read-only",
    )
    p.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME[:PORT]",
        help="a further name the browser may use for the console (e.g. localhost:9000 behind "
        "ssh -L or a port-forward to another port); bound to loopback, only localhost, "
        "127.0.0.1 and [::1] on the port it listens on are answered (DNS rebinding)",
    )
    p.add_argument(
        "--max-body",
        type=count,
        default=DEFAULT_MAX_BODY_BYTES,
        metavar="BYTES",
        help=f"largest request body read, bytes; a larger one is answered 413 "
        f"(default {DEFAULT_MAX_BODY_BYTES}: 1 MiB)",
    )
    p.add_argument(
        "--auth-reads",
        action="store_true",
        help="every page and read endpoint needs the token too (header, or the cookie of the "
        "login page) or a trusted proxy's user header; /healthz stays open",
    )
    p.add_argument(
        "--trusted-user-header",
        metavar="HEADER",
        help="with --auth-reads: a request carrying this header (e.g. X-Forwarded-User from "
        "oauth2-proxy) from a --trusted-proxy address may read",
    )
    p.add_argument(
        "--trusted-proxy",
        action="append",
        default=[],
        metavar="ADDRESS[/BITS]",
        help="an address or network the --trusted-user-header is accepted from (repeatable)",
    )
    p.set_defaults(func=guarded(_run))


def _run(args: argparse.Namespace) -> int:
    if not available():
        print(f"taskscale dashboard: {MISSING}", file=sys.stderr)
        return 2
    import uvicorn

    from taskscale.dashboard.app import create_app
    from taskscale.logs import redact

    hosts = allowed_for(args.bind, [allowed_host(h) for h in args.allowed_host])
    try:
        readers = read_auth_of(
            args.auth_reads, args.token, args.trusted_user_header, args.trusted_proxy
        )
    except ValueError as exc:
        print(f"taskscale dashboard: {exc}", file=sys.stderr)
        return 2
    client, shards = sharded_client(args)
    app = create_app(
        client,
        shards=shards,
        token=args.token,
        redis_url=args.redis_url,
        allowed_hosts=hosts,
        max_body_bytes=args.max_body,
        read_auth=readers,
    )
    listener = open_listener(args.bind, args.port)  # ListenError: one line, exit 2 or 1
    bound = listener.getsockname()[1]  # --port 0: the one the system picked
    host = f"[{args.bind}]" if ":" in args.bind else args.bind
    mode = "state changes need the token" if args.token else "read-only (no --token)"
    if readers is not None:
        mode += "; reads need it too (--auth-reads)"
    where = "namespaces" if shards.sharded else "namespace"
    print(
        f"taskscale dashboard: http://{host}:{bound}/ ({mode}); "
        f"Redis {redact(args.redis_url)}, {where} {','.join(shards.namespaces)}",
        flush=True,
    )
    from_env = {os.environ.get(TOKEN_ENV), os.environ.get(env_name("--token"))}
    if args.token and args.token not in from_env:
        print(
            f"taskscale dashboard: note: --token on the command line is visible to every user "
            f"of this host (ps); prefer the environment variable {TOKEN_ENV}",
            file=sys.stderr,
            flush=True,
        )
    # log_config=None: uvicorn's own records (startup, errors) go through the
    # handler configure_logging set up, so --log-format json covers them too;
    # its info chatter and access lines only at --log-level debug
    config = uvicorn.Config(
        app,
        host=args.bind,
        port=bound,
        log_config=None,
        log_level={"debug": "debug", "info": "warning"}.get(args.log_level, args.log_level),
        access_log=args.log_level == "debug",
    )
    uvicorn.Server(config).run(sockets=[listener])
    return 0
