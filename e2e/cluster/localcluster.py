"""A real Kubernetes control plane on loopback, for tests and local runs.

Why it exists: the controller must be tested against a real API server (real
RBAC, real ``scale`` subresource, a real controller-manager turning
Deployments into ReplicaSets and Pods), and kind can't run on machines whose
Docker refuses privileged containers. So this module runs the upstream
binaries directly, as plain processes, in a throw-away directory:

* etcd on free loopback ports (``--unsafe-no-fsync``: test data only);
* kube-apiserver with a CA, serving cert and service-account key made here
  with ``openssl``, ``--authorization-mode=Node,RBAC``;
* kube-controller-manager with all controllers, so workloads really reconcile;
* optionally (``with_node=True``) kube-scheduler and a kubelet on the host's
  containerd, see :mod:`e2e.cluster.node`.

Everything binds to 127.0.0.1 (with a node, the API server binds the node's
bridge address instead, see :mod:`e2e.cluster.node`). Each component runs in
its own process group and is stopped with it; the directory is removed on
stop. The binaries come from ``build.sh`` (built once from the Go module
proxy, then cached).

Command line::

    python -m e2e.cluster.localcluster up [--with-node]   # start, detach
    python -m e2e.cluster.localcluster env                # export KUBECONFIG=...
    python -m e2e.cluster.localcluster down               # stop, clean up
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import json
import os
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from e2e.cluster.node import LocalNode

CLUSTER_DIR = Path(__file__).resolve().parent
BUILD_SCRIPT = CLUSTER_DIR / "build.sh"
SERVICE_CIDR = "10.0.0.0/24"
SERVICE_API_IP = "10.0.0.1"
CLUSTER_DOMAIN = "cluster.local"
SA_ISSUER = f"https://kubernetes.default.svc.{CLUSTER_DOMAIN}"
DEFAULT_STATE_DIR = Path(tempfile.gettempdir()) / f"taskscale-localcluster-{os.getuid()}"


class ClusterError(RuntimeError):
    """The local cluster could not be built, started or stopped."""


# --- binaries -----------------------------------------------------------------


@dataclass(frozen=True)
class Binaries:
    """Where ``build.sh`` put the pinned binaries."""

    kube_version: str
    kube_bin_dir: Path
    etcd: Path
    helm: Path

    def kube(self, name: str) -> Path:
        """Path of one Kubernetes binary, e.g. ``kube("kubectl")``."""
        return self.kube_bin_dir / name

    @classmethod
    def from_env_lines(cls, text: str) -> Binaries:
        values = dict(
            line.split("=", 1) for line in text.splitlines() if "=" in line and line[:1].isupper()
        )
        try:
            return cls(
                kube_version=values["TASKSCALE_KUBE_VERSION"],
                kube_bin_dir=Path(values["TASKSCALE_KUBE_BIN_DIR"]),
                etcd=Path(values["TASKSCALE_ETCD_BIN"]),
                helm=Path(values["TASKSCALE_HELM_BIN"]),
            )
        except KeyError as exc:
            raise ClusterError(f"build.sh printed no {exc.args[0]}: {text!r}") from None


def _build_args(with_node: bool) -> list[str]:
    return ["bash", str(BUILD_SCRIPT), *(["--with-node"] if with_node else [])]


def find_binaries(*, with_node: bool = False) -> Binaries | None:
    """The cached binaries if they are built and current, else None (never builds)."""
    result = subprocess.run(
        [*_build_args(with_node), "--check", "--print-env"],
        capture_output=True,
        text=True,
        check=False,
    )
    return Binaries.from_env_lines(result.stdout) if result.returncode == 0 else None


def build_binaries(*, with_node: bool = False) -> Binaries:
    """Run ``build.sh`` (a no-op when warm); its progress goes to our stderr."""
    result = subprocess.run(_build_args(with_node), stdout=subprocess.PIPE, text=True, check=False)
    if result.returncode != 0:
        raise ClusterError(
            f"{BUILD_SCRIPT} failed with exit code {result.returncode}; see its messages above"
        )
    return Binaries.from_env_lines(result.stdout)


def ensure_binaries(
    *, with_node: bool = False, announce: Callable[[str], None] | None = None
) -> Binaries:
    """The cached binaries, building them first (long, once per machine) if needed."""
    found = find_binaries(with_node=with_node)
    if found is not None:
        return found
    (announce or _stderr)(
        f"taskscale: Kubernetes binaries are not built yet; running {BUILD_SCRIPT}. "
        "The first build compiles Kubernetes, etcd and helm from source "
        "(tens of minutes on 2 cores); later runs reuse the cache."
    )
    return build_binaries(with_node=with_node)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- small helpers ------------------------------------------------------------


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    # The flag dump that components log at start-up says nothing useful.
    kept = [line for line in text.splitlines() if "flags.go" not in line]
    return "\n".join(kept[-lines:])


def _signal_group(pgid: int, sig: signal.Signals) -> bool:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


# --- certificates -------------------------------------------------------------

_OPENSSL_CONFIG = """\
[req]
distinguished_name = dn
[dn]
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign, digitalSignature
subjectKeyIdentifier = hash
[leaf]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = {usage}
authorityKeyIdentifier = keyid
{sans}
"""


class Pki:
    """A throw-away CA and the certificates of one cluster, made with openssl."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ca_cert = self.dir / "ca.crt"
        self.ca_key = self.dir / "ca.key"
        openssl = shutil.which("openssl")
        if openssl is None:
            raise ClusterError("openssl not found (Debian package openssl)")
        self._openssl = openssl

    def _run(self, *args: str) -> None:
        result = subprocess.run([self._openssl, *args], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise ClusterError(f"openssl {args[0]} failed: {result.stderr.strip()}")

    def _config(self, name: str, usage: str = "clientAuth", sans: Sequence[str] = ()) -> Path:
        path = self.dir / f"{name}.cnf"
        san_line = f"subjectAltName = {', '.join(sans)}" if sans else ""
        path.write_text(_OPENSSL_CONFIG.format(usage=usage, sans=san_line))
        return path

    def key(self, name: str) -> Path:
        """A new P-256 private key (PKCS#8 PEM)."""
        path = self.dir / f"{name}.key"
        self._run(
            "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path)
        )
        path.chmod(0o600)
        return path

    def public_key(self, name: str) -> Path:
        """The public half of ``<name>.key``, as ``<name>.pub``."""
        path = self.dir / f"{name}.pub"
        self._run("pkey", "-in", str(self.dir / f"{name}.key"), "-pubout", "-out", str(path))
        return path

    def make_ca(self, common_name: str = "taskscale-local-ca") -> None:
        self.key("ca")
        self._run(
            "req",
            "-x509",
            "-new",
            "-key",
            str(self.ca_key),
            "-subj",
            f"/CN={common_name}",
            "-days",
            "365",
            "-config",
            str(self._config("ca")),
            "-extensions",
            "ca",
            "-out",
            str(self.ca_cert),
        )

    def issue(
        self,
        name: str,
        common_name: str,
        *,
        organizations: Sequence[str] = (),
        sans: Sequence[str] = (),
        server: bool = False,
    ) -> tuple[Path, Path]:
        """A key and a certificate signed by the CA; returns (cert, key)."""
        key = self.key(name)
        csr = self.dir / f"{name}.csr"
        cert = self.dir / f"{name}.crt"
        subject = "".join(f"/O={org}" for org in organizations) + f"/CN={common_name}"
        usage = "serverAuth, clientAuth" if server else "clientAuth"
        config = self._config(name, usage, sans)
        self._run(
            "req",
            "-new",
            "-key",
            str(key),
            "-subj",
            subject,
            "-config",
            str(config),
            "-out",
            str(csr),
        )
        self._run(
            "x509",
            "-req",
            "-in",
            str(csr),
            "-CA",
            str(self.ca_cert),
            "-CAkey",
            str(self.ca_key),
            "-set_serial",
            str(int.from_bytes(os.urandom(8), "big")),
            "-days",
            "365",
            "-extfile",
            str(config),
            "-extensions",
            "leaf",
            "-out",
            str(cert),
        )
        return cert, key


def write_kubeconfig(
    path: Path, *, server: str, ca_cert: Path, client_cert: Path, client_key: Path, user: str
) -> Path:
    """A self-contained kubeconfig (credentials embedded; JSON is valid YAML)."""

    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "local",
                "cluster": {"server": server, "certificate-authority-data": b64(ca_cert)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": b64(client_cert),
                    "client-key-data": b64(client_key),
                },
            }
        ],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
        "current-context": "local",
        "preferences": {},
    }
    path.write_text(json.dumps(config, indent=2) + "\n")
    path.chmod(0o600)
    return path


# --- processes ----------------------------------------------------------------


@dataclass
class Component:
    """One running binary, the leader of its own process group."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def check_alive(self) -> None:
        code = self.process.poll()
        if code is not None:
            raise ClusterError(
                f"{self.name} exited with code {code}; last lines of {self.log}:\n{_tail(self.log)}"
            )

    def stop(self, timeout: float = 15.0) -> None:
        if self.process.poll() is None:
            _signal_group(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                _signal_group(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout)
        # Children left in the group (none expected) go too.
        _signal_group(self.process.pid, signal.SIGKILL)


def start_component(
    name: str, argv: Sequence[str | Path], log_dir: Path, env: Mapping[str, str] | None = None
) -> Component:
    """Start ``argv`` in a new session (own process group), logging to ``log_dir``."""
    log = log_dir / f"{name}.log"
    args = [str(a) for a in argv]
    with log.open("ab") as out:
        out.write(f"$ {shlex.join(args)}\n".encode())
        out.flush()
        process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=dict(env) if env is not None else None,
        )
    return Component(name, process, log)


# --- the cluster --------------------------------------------------------------


@dataclass
class LocalCluster:
    """etcd + kube-apiserver + kube-controller-manager (+ node) on loopback.

    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    binaries: Binaries | None = None
    with_node: bool = False
    workdir: Path | None = None
    startup_timeout: float = 180.0
    verbosity: int = 1
    components: list[Component] = field(default_factory=list)
    server: str = ""
    # Where the apiserver listens: loopback, or with a node the node's bridge
    # address, so that pods reach it through the `kubernetes` Service too.
    api_address: str = "127.0.0.1"
    _owns_workdir: bool = False
    _pki: Pki | None = None
    _node: LocalNode | None = None

    @property
    def node(self) -> LocalNode | None:
        """The worker node (``with_node=True``): ``node.import_image(archive)``..."""
        return self._node

    @property
    def kubeconfig(self) -> Path:
        return self._dir / "admin.kubeconfig"

    @property
    def ca_cert(self) -> Path:
        return self._dir / "pki" / "ca.crt"

    @property
    def log_dir(self) -> Path:
        return self._dir / "logs"

    @property
    def _dir(self) -> Path:
        if self.workdir is None:
            raise ClusterError("the cluster has not been started")
        return self.workdir

    def env(self) -> dict[str, str]:
        """Variables that point kubectl, helm and the tests at this cluster."""
        assert self.binaries is not None
        return {
            "KUBECONFIG": str(self.kubeconfig),
            "TASKSCALE_KUBE_BIN_DIR": str(self.binaries.kube_bin_dir),
            "TASKSCALE_HELM_BIN": str(self.binaries.helm),
        }

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- start -----------------------------------------------------------------

    def start(self) -> LocalCluster:
        if self.binaries is None:
            self.binaries = ensure_binaries(with_node=self.with_node)
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="taskscale-kube-"))
            self._owns_workdir = True
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(exist_ok=True)
        deadline = time.monotonic() + self.startup_timeout
        try:
            if self.with_node:
                self._prepare_node()
            self._make_pki()
            self._start_etcd(deadline)
            self._start_apiserver(deadline)
            self._start_controller_manager()
            if self._node is not None:
                self._node.start(deadline)
            self._wait(
                "the default ServiceAccount",
                lambda: (
                    self.request("GET", "/api/v1/namespaces/default/serviceaccounts/default")[0]
                    == 200
                ),
                deadline,
            )
        except BaseException:
            self.stop()
            raise
        return self

    def _make_pki(self) -> None:
        pki = Pki(self._dir / "pki")
        pki.make_ca()
        pki.key("service-account")
        pki.public_key("service-account")
        sans = [
            f"IP:{self.api_address}",
            "IP:127.0.0.1",
            f"IP:{SERVICE_API_IP}",
            "DNS:localhost",
            "DNS:kubernetes",
            "DNS:kubernetes.default",
            "DNS:kubernetes.default.svc",
            f"DNS:kubernetes.default.svc.{CLUSTER_DOMAIN}",
        ]
        pki.issue("apiserver", "kube-apiserver", sans=sans, server=True)
        pki.issue("admin", "taskscale-admin", organizations=["system:masters"])
        pki.issue(
            "apiserver-kubelet-client",
            "kube-apiserver-kubelet-client",
            organizations=["system:masters"],
        )
        pki.issue("controller-manager", "system:kube-controller-manager")
        self._pki = pki

    def _component_kubeconfig(self, name: str) -> Path:
        assert self._pki is not None
        return write_kubeconfig(
            self._dir / f"{name}.kubeconfig",
            server=self.server,
            ca_cert=self._pki.ca_cert,
            client_cert=self._pki.dir / f"{name}.crt",
            client_key=self._pki.dir / f"{name}.key",
            user=name,
        )

    def _start(self, name: str, argv: Sequence[str | Path]) -> Component:
        component = start_component(name, argv, self.log_dir)
        self.components.append(component)
        return component

    def _wait(self, what: str, ready: Callable[[], bool], deadline: float) -> None:
        """Poll ``ready`` until true, failing fast if a component died."""
        while True:
            for component in self.components:
                component.check_alive()
            with contextlib.suppress(OSError, http.client.HTTPException):
                if ready():
                    return
            if time.monotonic() > deadline:
                logs = "\n".join(f"--- {c.name}:\n{_tail(c.log, 15)}" for c in self.components)
                raise ClusterError(f"timed out waiting for {what}; recent logs:\n{logs}")
            time.sleep(0.25)

    def _start_etcd(self, deadline: float) -> None:
        assert self.binaries is not None
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        peer_url = f"http://127.0.0.1:{peer}"
        self._start(
            "etcd",
            [
                self.binaries.etcd,
                "--name=local",
                f"--data-dir={self._dir / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=local={peer_url}",
                "--unsafe-no-fsync",  # test data: durability would only cost time
                "--log-level=warn",
            ],
        )

        def healthy() -> bool:
            conn = http.client.HTTPConnection("127.0.0.1", client, timeout=2)
            try:
                conn.request("GET", "/health")
                response = conn.getresponse()
                return response.status == 200 and b'"true"' in response.read()
            finally:
                conn.close()

        self._wait("etcd", healthy, deadline)

    def _start_apiserver(self, deadline: float) -> None:
        assert self.binaries is not None and self._pki is not None
        port = free_port()
        self.server = f"https://{self.api_address}:{port}"
        pki = self._pki.dir
        self._start(
            "kube-apiserver",
            [
                self.binaries.kube("kube-apiserver"),
                f"--etcd-servers={self.etcd_url}",
                f"--bind-address={self.api_address}",
                f"--advertise-address={self.api_address}",
                f"--secure-port={port}",
                f"--cert-dir={self._dir / 'apiserver-certs'}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={self._pki.ca_cert}",
                f"--service-account-issuer={SA_ISSUER}",
                f"--service-account-key-file={pki / 'service-account.pub'}",
                f"--service-account-signing-key-file={pki / 'service-account.key'}",
                "--authorization-mode=Node,RBAC",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--allow-privileged=true",
                f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
                f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
                # Reach the kubelet by its IP: the node's name resolves nowhere.
                "--kubelet-preferred-address-types=InternalIP",
                # 127.0.0.1 can't be an Endpoints address, and without a node
                # nothing in-cluster needs the `kubernetes` Service's endpoints.
                f"--endpoint-reconciler-type={'lease' if self._node else 'none'}",
                "--profiling=false",
                f"--v={self.verbosity}",
            ],
        )
        self.kubeconfig.parent.mkdir(parents=True, exist_ok=True)
        write_kubeconfig(
            self.kubeconfig,
            server=self.server,
            ca_cert=self._pki.ca_cert,
            client_cert=pki / "admin.crt",
            client_key=pki / "admin.key",
            user="taskscale-admin",
        )
        self._wait(
            "kube-apiserver /readyz", lambda: self.request("GET", "/readyz")[0] == 200, deadline
        )

    def _start_controller_manager(self) -> None:
        assert self.binaries is not None and self._pki is not None
        pki = self._pki.dir
        kubeconfig = self._component_kubeconfig("controller-manager")
        self._start(
            "kube-controller-manager",
            [
                self.binaries.kube("kube-controller-manager"),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                f"--cert-dir={self._dir / 'controller-manager-certs'}",
                f"--service-account-private-key-file={pki / 'service-account.key'}",
                f"--root-ca-file={self._pki.ca_cert}",
                f"--cluster-signing-cert-file={self._pki.ca_cert}",
                f"--cluster-signing-key-file={self._pki.ca_key}",
                "--use-service-account-credentials=true",
                "--controllers=*",
                "--leader-elect=false",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                f"--v={self.verbosity}",
            ],
        )

    def _prepare_node(self) -> None:
        from e2e.cluster.node import LocalNode  # only needed with a node

        assert self.binaries is not None
        self._node = LocalNode(cluster=self, binaries=self.binaries)
        # The node's bridge must exist before the apiserver binds its address.
        self._node.prepare()
        self.api_address = self._node.node_ip

    # -- talking to the API ----------------------------------------------------

    def ssl_context(self) -> ssl.SSLContext:
        """TLS context that trusts the cluster CA and presents the admin cert."""
        assert self._pki is not None
        context = ssl.create_default_context(cafile=str(self._pki.ca_cert))
        context.load_cert_chain(self._pki.dir / "admin.crt", self._pki.dir / "admin.key")
        return context

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One admin request with the standard library (no client needed)."""
        port = int(self.server.rsplit(":", 1)[1])
        conn = http.client.HTTPSConnection(
            self.api_address, port, context=self.ssl_context(), timeout=10
        )
        try:
            payload = json.dumps(body).encode() if body is not None else None
            headers = {"Content-Type": "application/json", "Accept": "application/json"}
            conn.request(method, path, body=payload, headers=headers)
            response = conn.getresponse()
            data = response.read()
        finally:
            conn.close()
        try:
            return response.status, json.loads(data) if data else None
        except ValueError:
            return response.status, data.decode(errors="replace")

    # -- stop ------------------------------------------------------------------

    def stop(self) -> None:
        """Stop every component (newest first) and remove the directory we made."""
        node, self._node = self._node, None
        if node is not None:
            node.stop()
        while self.components:
            self.components.pop().stop()
        if node is not None:
            node.cleanup()  # the bridge goes last: the apiserver listens on it
        if self._owns_workdir and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
            self._owns_workdir = False

    def state(self) -> dict[str, Any]:
        """What ``down`` needs to find and stop a detached cluster."""
        return {
            "workdir": str(self.workdir),
            "server": self.server,
            "kubeconfig": str(self.kubeconfig),
            "components": [
                {"name": c.name, "pid": c.process.pid, "exe": str(c.process.args[0])}  # type: ignore[index]
                for c in self.components
            ],
            "env": self.env(),
        }


# --- command line: up / env / down ---------------------------------------------


def _state_file(state_dir: Path) -> Path:
    return state_dir / "state.json"


def _process_is(pid: int, exe: str) -> bool:
    """True if ``pid`` still runs ``exe`` (guards against pid reuse)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return bool(cmdline) and cmdline[0].decode(errors="replace") == exe


def stop_detached(state_dir: Path, timeout: float = 15.0) -> bool:
    """Stop a cluster started by ``up``; False if there was none."""
    path = _state_file(state_dir)
    if not path.exists():
        return False
    state = json.loads(path.read_text())
    for component in reversed(state["components"]):
        pid, exe = int(component["pid"]), component["exe"]
        if not _process_is(pid, exe):
            continue
        _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _process_is(pid, exe) and time.monotonic() < deadline:
            time.sleep(0.1)
        _signal_group(pid, signal.SIGKILL)
    if state.get("node"):
        from e2e.cluster.node import cleanup_detached

        cleanup_detached(state["node"])
    shutil.rmtree(state["workdir"], ignore_errors=True)
    path.unlink(missing_ok=True)
    return True


def _print_env(env: Mapping[str, str], out: IO[str]) -> None:
    for key, value in env.items():
        print(f"export {key}={shlex.quote(value)}", file=out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.cluster.localcluster",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("command", choices=["up", "down", "env", "build"])
    parser.add_argument(
        "--with-node",
        action="store_true",
        help="also start kube-scheduler and a kubelet on containerd (root)",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=DEFAULT_STATE_DIR,
        help=f"where a detached cluster lives (default {DEFAULT_STATE_DIR})",
    )
    parser.add_argument("--timeout", type=float, default=180.0, help="startup timeout, seconds")
    args = parser.parse_args(argv)
    state_path = _state_file(args.state_dir)

    if args.command == "build":
        binaries = ensure_binaries(with_node=args.with_node)
        print(f"binaries in {binaries.kube_bin_dir}, {binaries.etcd}, {binaries.helm}")
        return 0
    if args.command == "down":
        stopped = stop_detached(args.state_dir)
        print("stopped" if stopped else f"no cluster recorded in {args.state_dir}")
        return 0
    if args.command == "env":
        if not state_path.exists():
            print(f"no cluster recorded in {args.state_dir}; run `up` first", file=sys.stderr)
            return 1
        _print_env(json.loads(state_path.read_text())["env"], sys.stdout)
        return 0

    if state_path.exists():
        print(
            f"a cluster is already recorded in {args.state_dir}; run `down` first", file=sys.stderr
        )
        return 1
    args.state_dir.mkdir(parents=True, exist_ok=True)
    cluster = LocalCluster(
        with_node=args.with_node, workdir=args.state_dir / "cluster", startup_timeout=args.timeout
    )
    try:
        cluster.start()
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        shutil.rmtree(args.state_dir / "cluster", ignore_errors=True)
        return 1
    state = cluster.state()
    if cluster.node is not None:
        state["node"] = cluster.node.state()
    state_path.write_text(json.dumps(state, indent=2) + "\n")
    print(f"cluster up: {cluster.server} (logs in {cluster.log_dir})", file=sys.stderr)
    _print_env(cluster.env(), sys.stdout)
    # Detach: the components run in their own sessions and outlive us.
    for component in cluster.components:
        component.process.returncode = 0  # keep Popen.__del__ quiet
    return 0


if __name__ == "__main__":
    sys.exit(main())
