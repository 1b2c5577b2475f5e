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
import gzip
import hashlib
import io
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import tarfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from e2e.cluster.localcluster import Binaries, LocalCluster, Pki

SANDBOX_IMAGE = "registry.k8s.io/pause:3.10"
NODE_NAME = "taskscale-node"
POD_SUPERNET = ipaddress.IPv4Network("10.88.0.0/16")
CLUSTER_DNS = "10.0.0.10"
CGROUP_ROOT = Path("/sys/fs/cgroup")


class NodeError(RuntimeError):
    """The local node could not be started or cleaned up."""


# --- images -------------------------------------------------------------------


def normalize_image_name(name: str) -> str:
    """The fully qualified reference the kubelet asks the runtime for.

    ``worker:1`` is ``docker.io/library/worker:1`` to the kubelet, and
    containerd finds an image only under that exact name.
    """
    first, _, rest = name.partition("/")
    if not rest:
        return f"docker.io/library/{name}"
    if "." not in first and ":" not in first and first != "localhost":
        return f"docker.io/{name}"
    return name


def _blob(layout: tarfile.TarFile, data: bytes) -> dict[str, Any]:
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo(f"blobs/sha256/{digest}")
    info.size = len(data)
    layout.addfile(info, io.BytesIO(data))
    return {"digest": f"sha256:{digest}", "size": len(data)}


def write_oci_image(
    files: dict[str, Path],
    *,
    name: str,
    entrypoint: list[str],
    out: Path,
    user: str | None = None,
) -> Path:
    """Write a one-layer OCI image archive (``ctr images import`` reads it).

    ``files`` maps paths inside the image to host files (copied with mode).
    """
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        for inside, host in files.items():
            info = tar.gettarinfo(str(host), arcname=inside.lstrip("/"))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            with host.open("rb") as fh:
                tar.addfile(info, fh)
    layer_tar = layer.getvalue()
    layer_gz = gzip.compress(layer_tar, mtime=0)
    diff_id = "sha256:" + hashlib.sha256(layer_tar).hexdigest()
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": entrypoint, **({"User": user} if user else {})},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }
    with tarfile.open(out, mode="w") as layout:
        config_desc = _blob(layout, json.dumps(image_config).encode())
        layer_desc = _blob(layout, layer_gz)
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config_desc},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", **layer_desc}],
        }
        manifest_desc = _blob(layout, json.dumps(manifest).encode())
        tag = name.rsplit(":", 1)[1] if ":" in name.rsplit("/", 1)[-1] else "latest"
        index = {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    **manifest_desc,
                    "platform": {"architecture": "amd64", "os": "linux"},
                    "annotations": {
                        "io.containerd.image.name": normalize_image_name(name),
                        "org.opencontainers.image.ref.name": tag,
                    },
                }
            ],
        }
        for member, payload in (
            ("oci-layout", {"imageLayoutVersion": "1.0.0"}),
            ("index.json", index),
        ):
            data = json.dumps(payload).encode()
            info = tarfile.TarInfo(member)
            info.size = len(data)
            layout.addfile(info, io.BytesIO(data))
    return out


# --- host plumbing --------------------------------------------------------------


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise NodeError(f"{' '.join(args)} failed: {result.stderr.strip() or result.stdout}")
    return result


def _pick_pod_subnet() -> ipaddress.IPv4Network:
    """A /24 of 10.88.0.0/16 that no route on this host uses yet."""
    routes = _run("ip", "-4", "route", "show").stdout
    used: set[ipaddress.IPv4Network] = set()
    for line in routes.splitlines():
        with contextlib.suppress(ValueError):
            used.add(ipaddress.IPv4Network(line.split()[0], strict=False))
    for subnet in POD_SUPERNET.subnets(new_prefix=24):
        if subnet.network_address.packed[2] == 0:
            continue
        if not any(subnet.overlaps(u) for u in used):
            return subnet
    raise NodeError(f"no free /24 left in {POD_SUPERNET}")


def _cgroup_dirs(cgroup_root: str) -> list[Path]:
    """Every directory of ``cgroup_root`` in every cgroup v1 hierarchy, deepest first."""
    found: list[Path] = []
    for hierarchy in CGROUP_ROOT.iterdir():
        top = hierarchy / cgroup_root.lstrip("/")
        if top.is_dir():
            found.extend(p for p in top.rglob("*") if p.is_dir())
            found.append(top)
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def _make_cgroup(cgroup_root: str) -> None:
    """Create the kubelet's cgroup root in every cgroup v1 hierarchy."""
    for hierarchy in CGROUP_ROOT.iterdir():
        if not (hierarchy / "cgroup.procs").exists() or (hierarchy / "cgroup.controllers").exists():
            continue  # not a mounted v1 hierarchy (or the unified v2 one)
        top = hierarchy / cgroup_root.lstrip("/")
        top.mkdir(exist_ok=True)
        for knob in ("cpuset.cpus", "cpuset.mems"):  # empty in a new cpuset cgroup
            if (hierarchy / knob).exists():
                (top / knob).write_text((hierarchy / knob).read_text())


def _kill_cgroup(cgroup_root: str) -> None:
    """SIGKILL every process left in the node's cgroups, then remove them."""
    for _attempt in range(50):
        pids: set[int] = set()
        for directory in _cgroup_dirs(cgroup_root):
            with contextlib.suppress(OSError):
                pids.update(int(p) for p in (directory / "cgroup.procs").read_text().split())
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    for directory in _cgroup_dirs(cgroup_root):
        with contextlib.suppress(OSError):
            directory.rmdir()


def _unmount_under(directory: Path) -> None:
    """Unmount everything mounted below ``directory`` (the kubelet's volumes...)."""
    prefix = str(directory.resolve()) + "/"
    mounts = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            point = line.split()[4].encode().decode("unicode_escape")
            if point.startswith(prefix):
                mounts.append(point)
    for point in sorted(mounts, key=len, reverse=True):
        _run("umount", "-l", point, check=False)


def _kill_shims(address: str) -> None:
    """Kill containerd shims that belong to our containerd (found by its socket)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            if b"containerd-shim" in cmdline[0] and address.encode() in cmdline:
                os.kill(int(proc.name), signal.SIGKILL)


def _other_kube_proxies() -> bool:
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if proc.name.isdigit() and (proc / "comm").read_text().strip() == "kube-proxy":
                return True
    return False


def cleanup_detached(state: dict[str, Any]) -> None:
    """Undo what a node left on the host once its processes are gone."""
    _kill_cgroup(state["cgroup_root"])
    _kill_shims(state["containerd_address"])
    _unmount_under(Path(state["dir"]))
    _run("ip", "link", "delete", state["bridge"], check=False)
    # kube-proxy's KUBE-* chains are host-wide: only remove them if no other
    # local cluster's kube-proxy is still using them.
    if not _other_kube_proxies():
        _run(state["kube_proxy"], "--cleanup", check=False)


# --- the node -------------------------------------------------------------------


class LocalNode:
    """containerd + kubelet + kube-scheduler, attached to a :class:`LocalCluster`."""

    def __init__(self, *, cluster: LocalCluster, binaries: Binaries) -> None:
        self.cluster = cluster
        self.binaries = binaries
        self.dir = cluster._dir / "node"
        suffix = os.urandom(2).hex()
        self.bridge = f"tsc{suffix}"
        self.cgroup_root = f"/taskscale-{suffix}"
        self.subnet = _pick_pod_subnet()
        self.node_ip = str(self.subnet.network_address + 1)
        self.containerd_address = str(self.dir / "containerd" / "containerd.sock")
        self.components: list[Any] = []

    @property
    def pki(self) -> Pki:
        """The cluster's PKI (made after :meth:`prepare`, before :meth:`start`)."""
        assert self.cluster._pki is not None
        return self.cluster._pki

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
        from e2e.cluster.localcluster import start_component

        component = start_component(name, argv, self.cluster.log_dir)
        self.components.append(component)
        self.cluster.components.append(component)

    def prepare(self) -> None:
        """Host set-up that the control plane needs first (the node's address)."""
        self._check_host()
        self.dir.mkdir(parents=True, exist_ok=True)
        self._make_bridge()
        _make_cgroup(self.cgroup_root)

    def start(self, deadline: float) -> None:
        self._start_containerd(deadline)
        self.import_image(self._sandbox_image())
        self._start_scheduler()
        self._start_kubelet()
        self._start_kube_proxy()
        self.cluster._wait(f"node {NODE_NAME} Ready", self._node_ready, deadline)

    def _make_bridge(self) -> None:
        # Made before the kubelet starts so that its node IP exists; the CNI
        # bridge plugin then adopts it.
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        _run("ip", "addr", "add", f"{self.node_ip}/{self.subnet.prefixlen}", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")
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
                _run("ctr", "--address", self.containerd_address, "version", check=False).returncode
                == 0
            )

        self.cluster._wait("containerd", serving, deadline)

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
        _run(
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
        from e2e.cluster.localcluster import free_port

        self.pki.issue("scheduler", "system:kube-scheduler")
        kubeconfig = self.cluster._component_kubeconfig("scheduler")
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
        from e2e.cluster.localcluster import free_port

        self.pki.issue("kubelet", f"system:node:{NODE_NAME}", organizations=["system:nodes"])
        serving_cert, serving_key = self.pki.issue(
            "kubelet-serving",
            NODE_NAME,
            sans=[f"IP:{self.node_ip}", f"DNS:{NODE_NAME}"],
            server=True,
        )
        kubeconfig = self.cluster._component_kubeconfig("kubelet")
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
        from e2e.cluster.localcluster import free_port

        self.pki.issue("kube-proxy", "system:kube-proxy")
        kubeconfig = self.cluster._component_kubeconfig("kube-proxy")
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
        result = _run(
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
