"""How the e2e session brings up its cluster and says what it does.

The local cluster (with a node when wanted and possible, else the control
plane alone), loading images where the kubelet finds them, where pods reach
this host, and the timings and mode said on the terminal.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

# e2e.support first: it puts tests/ on sys.path (for support.*).
import e2e.support  # noqa: F401
from e2e.cluster.localcluster import LocalCluster, ensure_binaries

#: Seconds per setup step, and the mode, for the terminal summary.
timings: dict[str, float] = {}
mode: list[str] = []


@contextlib.contextmanager
def timed(what: str) -> Iterator[None]:
    started = time.monotonic()
    yield
    timings[what] = time.monotonic() - started


def say(request: pytest.FixtureRequest, message: str) -> None:
    """Print on the terminal even without ``-s`` (the mode must be visible)."""
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(f"\n[e2e] {message}", file=sys.stderr, flush=True)


def load_images(images: dict[str, str], local: LocalCluster | None) -> None:
    """Put the images where the cluster's kubelet finds them (no registry)."""
    docker = "/usr/bin/docker" if os.path.exists("/usr/bin/docker") else "docker"
    kind = os.environ.get("TASKSCALE_E2E_KIND")
    node = local.node if local is not None else None
    for image in images.values():
        if kind:
            subprocess.run(["kind", "load", "docker-image", image, "--name", kind], check=True)
        elif node is not None:
            with tempfile.TemporaryDirectory() as tmp:
                archive = Path(tmp) / "image.tar"
                subprocess.run([docker, "save", "-o", str(archive), image], check=True)
                node.import_image(archive)


def node_wanted() -> bool | None:
    """TASKSCALE_E2E_NODE: "1" a node or fail, "0" never, unset: try one as root."""
    setting = os.environ.get("TASKSCALE_E2E_NODE", "")
    if os.environ.get("TASKSCALE_E2E_PODS") == "0" or setting == "0":
        return False
    if setting == "1":
        return True
    return None if os.geteuid() == 0 else False


def start_local(request: pytest.FixtureRequest) -> tuple[LocalCluster, bool]:
    """The local cluster, with a node when wanted and possible; (cluster, has node)."""
    wanted = node_wanted()
    if wanted is not False:
        local = LocalCluster(binaries=ensure_binaries(with_node=True), with_node=True)
        try:
            with timed("node cluster start"):
                local.start()
            return local, True
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            local.stop()
            if wanted:
                raise
            say(request, f"no node could be started ({exc}); falling back to host mode")
    local = LocalCluster(binaries=ensure_binaries(with_node=False), with_node=False)
    with timed("control plane start"):
        local.start()
    return local, False


def host_address() -> str:
    """Where pods reach this host: $TASKSCALE_E2E_HOST_ADDRESS, else docker0's
    address (kind nodes are containers on that bridge), else loopback."""
    configured = os.environ.get("TASKSCALE_E2E_HOST_ADDRESS")
    if configured:
        return configured
    result = subprocess.run(
        ["ip", "-4", "-o", "addr", "show", "docker0"], capture_output=True, text=True, check=False
    )
    fields = result.stdout.split()
    if "inet" in fields:
        return fields[fields.index("inet") + 1].split("/")[0]
    return "127.0.0.1"
