"""The Kubernetes commands of the docs, run as written against a real API server:
the README's quick start (``helm install ...`` then ``kubectl get tsc``), the
kubectl lines of NOTES.txt as Helm renders them for that install, and every
block of docs/operating.md marked ``<!-- test: kube -->``.

No kubelet runs here, so the pods stay Pending; every command shown reads or
writes API objects only, which is enough. What needs a running pod is
skipped, each with its reason in SKIPPED below; a watch (``-w``) is run
without ``-w``, since it never ends by itself.

The commands run in bash with kubectl and helm first on PATH, a kubeconfig
whose current namespace is the test's (``kubectl get tsc`` with no ``-n``
then means the test's namespace, as it means the reader's) and
``HELM_NAMESPACE`` set likewise.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from support.chart import adopt_crd_if_present, helm
from support.doc_shell import Shell
from support.docs import GUIDE, notes_commands, readme_kubernetes_quick_start, sh_blocks
from support.kube_cluster import KubeCluster

pytestmark = pytest.mark.kube

#: The release the README's `helm install` names (cluster-scoped RBAC carries it).
RELEASE = "taskscale"

#: NOTES.txt lines that need something this cluster cannot have, and why.
SKIPPED = {
    "port-forward": "needs a running controller pod",
    "curl ": "reads the port-forward above",
    "taskscale enqueue": "needs the in-cluster Redis pod running (run against a real Redis "
    "in tests/docs/test_doc_commands.py)",
}


@pytest.fixture
def shell(kube_cluster: KubeCluster, kube_namespace: str) -> Iterator[Shell]:
    with tempfile.TemporaryDirectory(prefix="ts-doc-") as folder:
        yield Shell(kube_cluster, kube_namespace, Path(folder))


@pytest.fixture
def quick_start(kube_cluster: KubeCluster, kube_namespace: str, shell: Shell) -> Iterator[str]:
    """The README's quick start, run as written; yields what `kubectl get tsc` printed."""
    commands = readme_kubernetes_quick_start()
    assert re.fullmatch(r"REGISTRY=\S+", commands[0].split(" #")[0].strip()), commands
    assert [c.split()[:3] for c in commands[1:]] == [
        ["helm", "install", RELEASE],
        ["kubectl", "get", "tsc"],
    ], commands
    with kube_cluster.api_client() as api:
        adopt_crd_if_present(api, RELEASE, kube_namespace)  # the CRD outlives other releases
    try:
        shell.run("\n".join(commands[:2]), "README.md")
        yield shell.run(commands[2], "README.md")
    finally:
        helm("uninstall", RELEASE, "--namespace", kube_namespace, check=False, env=shell.env)


def _scaler(kube_cluster: KubeCluster, namespace: str) -> dict[str, Any]:
    with kube_cluster.api_client() as api:
        found: Any = client.CustomObjectsApi(api).list_namespaced_custom_object(
            "taskscale.io", "v1alpha1", namespace, "taskscalers"
        )
    items: list[dict[str, Any]] = found["items"]
    assert len(items) == 1, items
    return items[0]


def test_readme_quick_start_notes_and_guide_commands_run_on_a_real_api_server(
    kube_cluster: KubeCluster, kube_namespace: str, shell: Shell, quick_start: str
) -> None:
    scaler = _scaler(kube_cluster, kube_namespace)
    name = scaler["metadata"]["name"]
    # `kubectl get tsc` showed the example TaskScaler the install created.
    header, *rows = quick_start.splitlines()
    assert header.split()[:4] == ["NAME", "TARGET", "MIN", "MAX"]
    assert [row.split()[0] for row in rows] == [name]

    # NOTES.txt, as Helm rendered it for this very install.
    notes = shell.run(f"helm get notes {RELEASE}", "NOTES.txt")
    commands = notes_commands(notes)
    assert any(c.startswith("kubectl describe tsc") for c in commands), notes
    ran = []
    for command in commands:
        if any(key in command for key in SKIPPED):
            continue
        text = command.replace("<name>", name).replace("<ns>", kube_namespace)
        text = re.sub(r"\s-w(\s|$)", " ", text)
        shell.run(text, "NOTES.txt")
        ran.append(text)
    assert any(" delete tsc " in c for c in ran), ran
    assert any(" get tsc " in c or "get taskscalers" in c for c in ran), ran
    assert not _exists(kube_cluster, kube_namespace, name), "NOTES' delete left the TaskScaler"


def test_the_guides_kube_blocks_run_on_a_real_api_server(
    kube_cluster: KubeCluster, kube_namespace: str, shell: Shell, quick_start: str
) -> None:
    scaler = _scaler(kube_cluster, kube_namespace)
    variables = {
        "NS": kube_namespace,
        "SCALER": scaler["metadata"]["name"],
        "WORKER": scaler["spec"]["scaleTargetRef"]["name"],
        "TYPE": scaler["spec"]["taskTypes"][0]["name"],
        "RELEASE_NS": kube_namespace,
    }
    blocks = [b for b in sh_blocks(GUIDE) if b.marker == "kube"]
    assert blocks
    outputs = [shell.run(b.text, f"docs/operating.md line {b.line}", variables) for b in blocks]
    joined = "\n".join(outputs)
    # The RBAC check answers as the guide says: the scale subresource only.
    assert re.search(r"^yes$", joined, re.M) and re.search(r"^no$", joined, re.M), joined
    assert scaler["metadata"]["name"] in joined


def _exists(cluster: KubeCluster, namespace: str, name: str) -> bool:
    with cluster.api_client() as api:
        found: Any = client.CustomObjectsApi(api).list_namespaced_custom_object(
            "taskscale.io", "v1alpha1", namespace, "taskscalers"
        )
    return any(o["metadata"]["name"] == name for o in found["items"])
