"""A worker node for the local cluster: containerd, kubelet, scheduler, kube-proxy.

Why: end-to-end tests need pods that really run (the worker image, the
controller pod), and kind can't run where Docker refuses privileged
containers. This runs a kubelet straight on the host, as root, against a
containerd of its own (own root, state and socket in the cluster's directory,
so the host's or Docker's containerd are never touched).

What makes it work on machines without registry access:

* the pod sandbox image is built here: the static ``pause`` program from
  ``build.sh --with-node``, packed into an OCI image by :func:`write_oci_image`
  and imported into containerd under the name its config expects;
* image GC is off (``imageGCHighThresholdPercent: 100``) so that image is
  never collected and re-pulled;
* pods get a CNI bridge made for this cluster (``tsc<id>``, a /24 in
  10.88.0.0/16) with the ``firewall`` plugin, which opens the FORWARD chain
  that Docker sets to DROP; no masquerading: pods reach the host, not beyond;
* the kubelet runs with the cgroupfs driver under its own cgroup root
  (``/taskscale-<id>``), which :meth:`LocalNode.stop` empties and removes.

The node's address is the bridge's gateway address (the kubelet refuses a
loopback node IP); the kubelet serves only there, and so does the API server
of a cluster with a node, so that an iptables kube-proxy can lead pods to it
through the ``kubernetes`` Service (10.0.0.1:443).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from e2e.cluster.images import write_oci_image
from e2e.cluster.nodehost import (
    CGROUP_ROOT,
    NodeError,
    cleanup_detached,
    make_cgroup,
    pick_pod_subnet,
    run,
)
from e2e.cluster.pki import Pki
from e2e.cluster.processes import Binaries, Component, free_port, start_component

__all__ = ["CGROUP_ROOT", "NODE_NAME", "SANDBOX_IMAGE", "LocalNode", "NodeError", "write_oci_image"]

SANDBOX_IMAGE = "registry.k8s.io/pause:3.10"
NODE_NAME = "taskscale-node"
CLUSTER_DNS = "10.0.0.10"


class ControlPlane(Protocol):
    """What a node needs of the control plane it joins (a LocalCluster)."""

    verbosity: int
    components: list[Component]

    @property
    def directory(self) -> Path: ...

    @property
    def log_dir(self) -> Path: ...

    @property
    def pki(self) -> Pki: ...

    def wait_for(self, what: str, ready: Callable[[], bool], deadline: float) -> None: ...

    def component_kubeconfig(self, name: str) -> Path: ...

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]: ...


# --- the node -------------------------------------------------------------------


class LocalNode:
    """containerd + kubelet + kube-scheduler, attached to a :class:`LocalCluster`."""

    def __init__(self, *, cluster: ControlPlane, binaries: Binaries) -> None:
        self.cluster = cluster
        self.binaries = binaries
        self.dir = cluster.directory / "node"
        suffix = os.urandom(2).hex()
        self.bridge = f"tsc{suffix}"
        self.cgroup_root = f"/taskscale-{suffix}"
        self.subnet = pick_pod_subnet()
        self.node_ip = str(self.subnet.network_address + 1)
        self.containerd_address = str(self.dir / "containerd" / "containerd.sock")
        self.components: list[Any] = []

    @property
    def pki(self) -> Pki:
        """The cluster's PKI (made after :meth:`prepare`, before :meth:`start`)."""
        return self.cluster.pki

    def state(self) -> dict[str, Any]:
        return {
            "dir": str(self.dir),
            "bridge": self.bridge,
            "cgroup_root": self.cgroup_root,
            "containerd_address": self.containerd_address,
            "kube_proxy": str(self.binaries.kube("kube-proxy")),
        }

    # -- start -------------------------------------------------------------------

    def _check_host(self) -> None:
        if os.geteuid() != 0:
            raise NodeError("a kubelet node needs root (containerd, cgroups, CNI)")
        for tool in ("containerd", "runc", "ctr", "ip", "iptables"):
            if shutil.which(tool) is None:
                raise NodeError(f"{tool} not found (Debian: containerd, runc, iproute2, iptables)")
        if not Path("/usr/lib/cni/bridge").exists():
            raise NodeError("CNI plugins not found in /usr/lib/cni (containernetworking-plugins)")
        if not self.binaries.kube("pause").exists():
            raise NodeError("pause not built: run build.sh --with-node")

    def _start(self, name: str, argv: list[str | Path]) -> None:
        component = start_component(name, argv, self.cluster.log_dir)
        self.components.append(component)
        self.cluster.components.append(component)

    def prepare(self) -> None:
        """Host set-up that the control plane needs first (the node's address)."""
        self._check_host()
        self.dir.mkdir(parents=True, exist_ok=True)
        self._make_bridge()
        make_cgroup(self.cgroup_root)

    def start(self, deadline: float) -> None:
        self._start_containerd(deadline)
        self.import_image(self._sandbox_image())
        self._start_scheduler()
        self._start_kubelet()
        self._start_kube_proxy()
        self.cluster.wait_for(f"node {NODE_NAME} Ready", self._node_ready, deadline)

    def _make_bridge(self) -> None:
        # Made before the kubelet starts so that its node IP exists; the CNI
        # bridge plugin then adopts it.
        run("ip", "link", "add", self.bridge, "type", "bridge")
        run("ip", "addr", "add", f"{self.node_ip}/{self.subnet.prefixlen}", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        conf_dir = self.dir / "cni" / "net.d"
        conf_dir.mkdir(parents=True, exist_ok=True)
        conflist = {
            "cniVersion": "0.4.0",
            "name": "taskscale",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": self.bridge,
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": str(self.subnet), "gateway": self.node_ip}]],
                        # Service IPs are routed via the host (kube-proxy DNATs them).
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(self.dir / "cni" / "ipam"),
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
                {"type": "firewall"},
            ],
        }
        (conf_dir / "10-taskscale.conflist").write_text(json.dumps(conflist, indent=2))

    def _start_containerd(self, deadline: float) -> None:
        root = self.dir / "containerd"
        root.mkdir(parents=True, exist_ok=True)
        cri = '[plugins."io.containerd.grpc.v1.cri"'
        config = f"""version = 2
root = "{root / "root"}"
state = "{root / "state"}"
[grpc]
  address = "{self.containerd_address}"
[plugins."io.containerd.internal.v1.opt"]
  path = "{root / "opt"}"
{cri}]
  sandbox_image = "{SANDBOX_IMAGE}"
  netns_mounts_under_state_dir = true
  # A negative oom_score_adj is refused on these machines even for root
  # (the sandbox's -998 makes runc fail with "can't get final child's PID
  # from pipe"); this clamps pods to containerd's own score instead.
  restrict_oom_score_adj = true
{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
{cri}.cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "{self.dir / "cni" / "net.d"}"
"""
        (root / "config.toml").write_text(config)
        self._start("containerd", ["containerd", "--config", root / "config.toml"])

        def serving() -> bool:
            return (
                run("ctr", "--address", self.containerd_address, "version", check=False).returncode
                == 0
            )

        self.cluster.wait_for("containerd", serving, deadline)

    def _sandbox_image(self) -> Path:
        return write_oci_image(
            {"/pause": self.binaries.kube("pause")},
            name=SANDBOX_IMAGE,
            entrypoint=["/pause"],
            user="65535:65535",
            out=self.dir / "pause.oci.tar",
        )

    def import_image(self, archive: Path) -> None:
        """Import an image archive (OCI layout or ``docker save``) for pods to use."""
        run(
            "ctr",
            "--address",
            self.containerd_address,
            "--namespace",
            "k8s.io",
            "images",
            "import",
            str(archive),
        )

    def _start_scheduler(self) -> None:
        self.pki.issue("scheduler", "system:kube-scheduler")
        kubeconfig = self.cluster.component_kubeconfig("scheduler")
        self._start(
            "kube-scheduler",
            [
                self.binaries.kube("kube-scheduler"),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                "--leader-elect=false",
                f"--v={self.cluster.verbosity}",
            ],
        )

    def _start_kubelet(self) -> None:
        self.pki.issue("kubelet", f"system:node:{NODE_NAME}", organizations=["system:nodes"])
        serving_cert, serving_key = self.pki.issue(
            "kubelet-serving",
            NODE_NAME,
            sans=[f"IP:{self.node_ip}", f"DNS:{NODE_NAME}"],
            server=True,
        )
        kubeconfig = self.cluster.component_kubeconfig("kubelet")
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": self.node_ip,
            "port": free_port(),
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": free_port(),
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(self.pki.ca_cert)},
            },
            "authorization": {"mode": "Webhook"},
            "tlsCertFile": str(serving_cert),
            "tlsPrivateKeyFile": str(serving_key),
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.cgroup_root,
            "containerRuntimeEndpoint": f"unix://{self.containerd_address}",
            "failSwapOn": False,
            "clusterDomain": "cluster.local",
            "clusterDNS": [CLUSTER_DNS],
            "resolvConf": "/etc/resolv.conf",
            "podCIDR": str(self.subnet),
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
                "nodefs.inodesFree": "1%",
            },
            "serializeImagePulls": False,
            "registerNode": True,
        }
        config_path = self.dir / "kubelet-config.json"
        config_path.write_text(json.dumps(config, indent=2))
        self._start(
            "kubelet",
            [
                self.binaries.kube("kubelet"),
                f"--config={config_path}",
                f"--kubeconfig={kubeconfig}",
                f"--hostname-override={NODE_NAME}",
                f"--node-ip={self.node_ip}",
                f"--root-dir={self.dir / 'kubelet'}",
                f"--cert-dir={self.dir / 'kubelet-pki'}",
                f"--v={self.cluster.verbosity}",
            ],
        )

    def _start_kube_proxy(self) -> None:
        """iptables kube-proxy, so Services (the API's own, 10.0.0.1) work in pods."""
        self.pki.issue("kube-proxy", "system:kube-proxy")
        kubeconfig = self.cluster.component_kubeconfig("kube-proxy")
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig)},
            "mode": "iptables",
            "hostnameOverride": NODE_NAME,
            "clusterCIDR": str(self.subnet),
            "healthzBindAddress": f"127.0.0.1:{free_port()}",
            "metricsBindAddress": f"127.0.0.1:{free_port()}",
            # NodePorts only on the bridge, never on the host's own interfaces.
            "nodePortAddresses": [f"{self.node_ip}/32"],
            # Leave the host's sysctls alone (conntrack sizes, route_localnet).
            "conntrack": {
                "maxPerCore": 0,
                "min": 0,
                "tcpEstablishedTimeout": "0s",
                "tcpCloseWaitTimeout": "0s",
            },
            "iptables": {"localhostNodePorts": False},
        }
        config_path = self.dir / "kube-proxy-config.json"
        config_path.write_text(json.dumps(config, indent=2))
        self._start(
            "kube-proxy",
            [
                self.binaries.kube("kube-proxy"),
                f"--config={config_path}",
                f"--v={self.cluster.verbosity}",
            ],
        )

    def _node_ready(self) -> bool:
        status, node = self.cluster.request("GET", f"/api/v1/nodes/{NODE_NAME}")
        if status != 200:
            return False
        conditions = node.get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    # -- stop --------------------------------------------------------------------

    def _running_tasks(self) -> int:
        result = run(
            "ctr",
            "--address",
            self.containerd_address,
            "--namespace",
            "k8s.io",
            "tasks",
            "list",
            "--quiet",
            check=False,
        )
        return len(result.stdout.split()) if result.returncode == 0 else 0

    def stop(self, timeout: float = 60.0) -> None:
        """Let the kubelet tear pods down (CNI DEL), then stop the node's processes."""
        by_name = {c.name: c for c in self.cluster.components}
        kubelet = by_name.get("kubelet")
        if kubelet is not None and kubelet.process.poll() is None:
            # No controller may recreate what we delete.
            for name in ("kube-controller-manager", "kube-scheduler"):
                if name in by_name:
                    by_name[name].stop()
            with contextlib.suppress(OSError):
                self._delete_all_pods()
            deadline = time.monotonic() + timeout
            while self._running_tasks() and time.monotonic() < deadline:
                time.sleep(0.5)
        for component in reversed(self.components):
            component.stop()
            if component in self.cluster.components:
                self.cluster.components.remove(component)
        self.components.clear()

    def cleanup(self) -> None:
        """Remove what the node left on the host (after every process stopped)."""
        cleanup_detached(self.state())

    def _delete_all_pods(self) -> None:
        status, namespaces = self.cluster.request("GET", "/api/v1/namespaces")
        if status != 200:
            return
        for namespace in namespaces.get("items", []):
            name = namespace["metadata"]["name"]
            self.cluster.request(
                "DELETE", f"/api/v1/namespaces/{name}/pods?gracePeriodSeconds=0", None
            )
