"""Real Redis topologies on loopback for tests: a Cluster, Sentinel, and TLS.

Each is made of Debian's ``redis-server`` processes (the same binary the
suite already uses), with no persistence, in a temp directory removed on
stop.  Startup is a few seconds: a cluster of 3 masters + 3 replicas made by
``redis-cli --cluster create``; 1 master, 1 replica and 3 sentinels; one
TLS-only server with a CA and certificates made by ``openssl``.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import redis

from support.waiting import wait_until

LOOPBACK = "127.0.0.1"
#: How long a node may be unreachable before the cluster / sentinels fail it over.
NODE_TIMEOUT_MS = 1500


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def _ephemeral_floor() -> int:
    """The lowest port the kernel hands out as a client's source port."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(count: int, *, bus: bool = False) -> list[int]:
    """``count`` loopback ports free a moment ago (with port+10000 free too if
    ``bus``), drawn from below the ephemeral range: a port the kernel may give
    any client connection as its source port can be taken between this check
    and the server's bind (a cluster node then never comes up)."""
    floor = _ephemeral_floor()
    top = floor - 10000 if bus else floor
    candidates = random.sample(range(10000, top), k=min(2000, top - 10000))
    found: list[int] = []
    for port in candidates:
        if not _port_free(port) or (bus and not _port_free(port + 10000)):
            continue
        found.append(port)
        if len(found) == count:
            return found
    raise RuntimeError("no free loopback ports below the ephemeral range")


def wait_for(predicate: Any, what: str, timeout: float = 20.0) -> Any:
    """:func:`support.waiting.wait_until` that reads a Redis or socket error as
    "not yet" (servers starting, a failover under way)."""

    def quietly() -> Any:
        try:
            return predicate()
        except (redis.RedisError, OSError):
            return None

    return wait_until(quietly, timeout=timeout, interval=0.05, what=what)


class _Servers:
    """redis-server processes sharing one temp directory."""

    def __init__(self, prefix: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=f"taskscale-{prefix}-"))
        self.processes: dict[int, subprocess.Popen[bytes]] = {}

    def spawn(self, port: int, *args: str, config: str | None = None) -> None:
        argv = ["redis-server"]
        if config is not None:
            path = self.dir / f"{port}.conf"
            path.write_text(config)
            argv.append(str(path))
        argv += ["--bind", LOOPBACK, "--save", "", "--appendonly", "no"]
        if config is None:  # a data server (sentinels take no replication options)
            argv += ["--repl-diskless-sync-delay", "0"]
        argv += ["--dir", str(self.dir), "--loglevel", "warning", *args]
        with (self.dir / f"{port}.log").open("ab") as log:  # the child keeps its copy
            self.processes[port] = subprocess.Popen(
                argv, stdout=log, stderr=log, start_new_session=True
            )

    def ping(self, port: int, **kwargs: Any) -> None:
        process = self.processes.get(port)
        if process is not None:
            time.sleep(0.05)
            if process.poll() is not None:  # it could not start: say why
                log = (self.dir / f"{port}.log").read_text(errors="replace").strip()
                raise RuntimeError(f"redis-server on {port} exited at start: {log[-500:]}")
        client = redis.Redis(host=LOOPBACK, port=port, socket_connect_timeout=0.2, **kwargs)
        try:
            wait_for(client.ping, f"redis-server on {port}", timeout=10)
        finally:
            client.close()

    def kill(self, port: int) -> None:
        """SIGKILL one server (a crash: no goodbye to replicas or sentinels)."""
        process = self.processes.pop(port)
        process.kill()
        process.wait(10)

    def stop(self) -> None:
        for process in self.processes.values():
            process.terminate()
        for process in self.processes.values():
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        self.processes.clear()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Any:
        try:
            self.start()  # type: ignore[attr-defined]
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class ClusterServers(_Servers):
    """3 masters + 3 replicas; ``url`` is a ``redis+cluster://`` URL of two of them."""

    def __init__(self) -> None:
        super().__init__("cluster")
        self.ports = free_ports(6, bus=True)

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"{LOOPBACK}:{p}" for p in self.ports[:3])

    def start(self) -> None:
        for port in self.ports:
            self.spawn(
                port,
                "--port",
                str(port),
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                f"nodes-{port}.conf",
                "--cluster-node-timeout",
                str(NODE_TIMEOUT_MS),
            )
        for port in self.ports:
            self.ping(port)
        subprocess.run(
            ["redis-cli", "--cluster", "create"]
            + [f"{LOOPBACK}:{p}" for p in self.ports]
            + ["--cluster-replicas", "1", "--cluster-yes"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        wait_for(self.healthy, "cluster_state:ok with 3 masters and 3 replicas", timeout=30)

    def healthy(self) -> bool:
        """Every live node says cluster_state:ok; every replica is in sync."""
        for port in self.processes:
            client = redis.Redis(host=LOOPBACK, port=port, socket_timeout=1)
            try:
                if client.cluster("INFO")["cluster_state"] != "ok":
                    return False
                info = client.info("replication")
                if info["role"] == "slave" and info.get("master_link_status") != "up":
                    return False
            finally:
                client.close()
        return True

    def master_port_of(self, key: str) -> int:
        """The port of the master that serves ``key``'s slot now."""
        port = self.serving_master(key)
        if port is None:
            raise RuntimeError(f"no master serves the slot of {key!r}")
        return port

    def serving_master(self, key: str) -> int | None:
        """The port of the master that serves ``key``'s slot, or None while no
        node lists one (a failover under way: the slot can drop out of
        ``CLUSTER SLOTS`` between the old master's failure and the promotion)."""
        client = redis.Redis(host=LOOPBACK, port=next(iter(self.processes)))
        try:
            slot = int(client.cluster("KEYSLOT", key))
            for start, end, master, *_ in client.execute_command("CLUSTER SLOTS"):
                if start <= slot <= end:
                    return int(master[1])
        finally:
            client.close()
        return None

    def masters(self) -> list[int]:
        client = redis.Redis(host=LOOPBACK, port=next(iter(self.processes)))
        try:
            return sorted({int(m[2][1]) for m in client.execute_command("CLUSTER SLOTS")})
        finally:
            client.close()


SENTINEL_SERVICE = "taskscale"


class SentinelServers(_Servers):
    """1 master, 1 replica and 3 sentinels (quorum 2) watching them."""

    def __init__(self) -> None:
        super().__init__("sentinel")
        self.master, self.replica, *self.sentinels = free_ports(5)

    @property
    def url(self) -> str:
        hosts = ",".join(f"{LOOPBACK}:{p}" for p in self.sentinels)
        return f"redis+sentinel://{hosts}/{SENTINEL_SERVICE}/0"

    def start(self) -> None:
        self.spawn(self.master, "--port", str(self.master))
        self.spawn(
            self.replica, "--port", str(self.replica), "--replicaof", LOOPBACK, str(self.master)
        )
        self.ping(self.master)
        self.ping(self.replica)
        wait_for(lambda: self.in_sync(self.replica), "replica in sync")
        for port in self.sentinels:
            config = (
                f"port {port}\n"
                f"sentinel monitor {SENTINEL_SERVICE} {LOOPBACK} {self.master} 2\n"
                f"sentinel down-after-milliseconds {SENTINEL_SERVICE} {NODE_TIMEOUT_MS}\n"
                f"sentinel failover-timeout {SENTINEL_SERVICE} 10000\n"
            )
            self.spawn(port, "--sentinel", config=config)
        for port in self.sentinels:
            self.ping(port)
        wait_for(self.watched, "3 sentinels that know each other and the replica")

    def in_sync(self, port: int) -> bool:
        client = redis.Redis(host=LOOPBACK, port=port, socket_timeout=1)
        try:
            info = client.info("replication")
            return info["role"] == "slave" and info.get("master_link_status") == "up"
        finally:
            client.close()

    def watched(self) -> bool:
        for port in self.sentinels:
            client = redis.Redis(host=LOOPBACK, port=port, socket_timeout=1)
            try:
                state = client.sentinel_master(SENTINEL_SERVICE)
                if int(state["num-other-sentinels"]) < 2 or int(state["num-slaves"]) < 1:
                    return False
            finally:
                client.close()
        return True

    def current_master(self) -> int:
        client = redis.Redis(host=LOOPBACK, port=self.sentinels[0], socket_timeout=1)
        try:
            return int(client.sentinel_get_master_addr_by_name(SENTINEL_SERVICE)[1])
        finally:
            client.close()


class TlsServer(_Servers):
    """One redis-server that speaks only TLS, with a CA, a server and a client cert."""

    def __init__(self, *, require_client_cert: bool = False) -> None:
        super().__init__("tls")
        self.port = free_ports(1)[0]
        self.require_client_cert = require_client_cert

    @property
    def ca(self) -> Path:
        return self.dir / "ca.crt"

    @property
    def url(self) -> str:
        return f"rediss://{LOOPBACK}:{self.port}/0?ssl_ca_certs={self.ca}"

    def client_cert_url(self) -> str:
        files = f"ssl_certfile={self.dir / 'client.crt'}&ssl_keyfile={self.dir / 'client.key'}"
        return f"{self.url}&{files}"

    def start(self) -> None:
        make_certificates(self.dir)
        auth = "yes" if self.require_client_cert else "no"
        self.spawn(
            self.port,
            "--port",
            "0",
            "--tls-port",
            str(self.port),
            "--tls-cert-file",
            str(self.dir / "server.crt"),
            "--tls-key-file",
            str(self.dir / "server.key"),
            "--tls-ca-cert-file",
            str(self.ca),
            "--tls-auth-clients",
            auth,
        )
        kwargs: dict[str, Any] = {"ssl": True, "ssl_ca_certs": str(self.ca)}
        if self.require_client_cert:
            kwargs.update(
                ssl_certfile=str(self.dir / "client.crt"), ssl_keyfile=str(self.dir / "client.key")
            )
        self.ping(self.port, **kwargs)


def make_certificates(directory: Path) -> None:
    """A CA, and a server (SAN 127.0.0.1) and a client certificate it signed."""

    def openssl(*args: str) -> None:
        subprocess.run(
            ["openssl", *args], cwd=directory, check=True, capture_output=True, timeout=60
        )

    openssl(
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=taskscale-test-ca",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
    )
    (directory / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name in ("server", "client"):
        openssl(
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            f"/CN=taskscale-{name}",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
        )
        openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "san.ext",
            "-out",
            f"{name}.crt",
        )
