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
"""

from __future__ import annotations

import contextlib
import http.client
import json
import shutil
import ssl
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from e2e.cluster.pki import Pki, write_kubeconfig
from e2e.cluster.processes import (
    Binaries,
    ClusterError,
    Component,
    ensure_binaries,
    free_port,
    start_component,
    tail,
)

if TYPE_CHECKING:
    from e2e.cluster.node import LocalNode

SERVICE_CIDR = "10.0.0.0/24"
SERVICE_API_IP = "10.0.0.1"
CLUSTER_DOMAIN = "cluster.local"
SA_ISSUER = f"https://kubernetes.default.svc.{CLUSTER_DOMAIN}"


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
        return self.directory / "admin.kubeconfig"

    @property
    def ca_cert(self) -> Path:
        return self.directory / "pki" / "ca.crt"

    @property
    def pki(self) -> Pki:
        """The cluster's certificates (made at start)."""
        if self._pki is None:
            raise ClusterError("the cluster has not been started")
        return self._pki

    @property
    def log_dir(self) -> Path:
        return self.directory / "logs"

    @property
    def directory(self) -> Path:
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
            self.wait_for(
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
        pki = Pki(self.directory / "pki")
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

    def component_kubeconfig(self, name: str) -> Path:
        assert self._pki is not None
        return write_kubeconfig(
            self.directory / f"{name}.kubeconfig",
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

    def wait_for(self, what: str, ready: Callable[[], bool], deadline: float) -> None:
        """Poll ``ready`` until true, failing fast if a component died."""
        while True:
            for component in self.components:
                component.check_alive()
            with contextlib.suppress(OSError, http.client.HTTPException):
                if ready():
                    return
            if time.monotonic() > deadline:
                logs = "\n".join(f"--- {c.name}:\n{tail(c.log, 15)}" for c in self.components)
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
                f"--data-dir={self.directory / 'etcd'}",
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

        self.wait_for("etcd", healthy, deadline)

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
                f"--cert-dir={self.directory / 'apiserver-certs'}",
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
        self.wait_for(
            "kube-apiserver /readyz", lambda: self.request("GET", "/readyz")[0] == 200, deadline
        )

    def _start_controller_manager(self) -> None:
        assert self.binaries is not None and self._pki is not None
        pki = self._pki.dir
        kubeconfig = self.component_kubeconfig("controller-manager")
        self._start(
            "kube-controller-manager",
            [
                self.binaries.kube("kube-controller-manager"),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                f"--cert-dir={self.directory / 'controller-manager-certs'}",
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
