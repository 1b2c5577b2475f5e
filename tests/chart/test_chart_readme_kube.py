"""charts/taskscale/README.md's commands, run as written against a real API
server: every ``sh`` block marked ``<!-- test: kube -->``, in order, in one
bash (a reader's shell: ``$REGISTRY`` set in the first block is used by the
next), with the chart's namespace ``taskscale-system`` replaced by the test's.

Then what the README promises is checked on the API server: one release
(the README never installs a second one that would compete for the CRD), its
images from ``$REGISTRY``, the ``redis-url`` Secret the console reads, and
the Service the port-forward names (a skipped block: no pod runs here).
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from support.chart import adopt_crd_if_present, helm
from support.doc_shell import Shell
from support.docs import sh_blocks
from support.kube_cluster import KubeCluster

pytestmark = pytest.mark.kube

CHART_README = Path(__file__).resolve().parents[2] / "charts" / "taskscale" / "README.md"
RELEASE = "taskscale"
DOC_NAMESPACE = "taskscale-system"


@pytest.fixture
def shell(kube_cluster: KubeCluster, kube_namespace: str) -> Iterator[Shell]:
    with tempfile.TemporaryDirectory(prefix="ts-chart-readme-") as folder:
        yield Shell(kube_cluster, kube_namespace, Path(folder))


def test_every_block_says_whether_it_runs() -> None:
    blocks = sh_blocks(CHART_README)
    assert [b.line for b in blocks if not b.marker] == []
    assert all(b.reason for b in blocks if b.marker == "skip")


def test_one_release_name_throughout() -> None:
    text = CHART_README.read_text()
    releases = set(re.findall(r"helm (?:install|upgrade(?: --install)?) (\S+)", text))
    assert releases == {RELEASE}, releases


def test_the_chart_readme_commands_run_on_a_real_api_server(
    kube_cluster: KubeCluster, kube_namespace: str, shell: Shell
) -> None:
    blocks = sh_blocks(CHART_README)
    runnable = [b for b in blocks if b.marker == "kube"]
    assert len(runnable) >= 3, [b.line for b in blocks]
    script = "\n".join(b.text for b in runnable).replace(DOC_NAMESPACE, kube_namespace)
    with kube_cluster.api_client() as api:
        adopt_crd_if_present(api, RELEASE, kube_namespace)  # the CRD outlives other releases
    try:
        shell.run(script, "charts/taskscale/README.md")
        with kube_cluster.api_client() as api:
            apps = client.AppsV1Api(api)
            core = client.CoreV1Api(api)
            deployments = {
                d.metadata.name: d for d in apps.list_namespaced_deployment(kube_namespace).items
            }
            images = {
                c.image for d in deployments.values() for c in d.spec.template.spec.containers
            }
            services = {s.metadata.name for s in core.list_namespaced_service(kube_namespace).items}
            secrets = {s.metadata.name for s in core.list_namespaced_secret(kube_namespace).items}
        # NOTES.txt has nothing to warn about: every image is one of ours
        notes = shell.run(f"helm get notes {RELEASE}", "NOTES.txt")
        assert "not published" not in notes, notes
        # one release, which has everything the blocks added
        releases = helm("list", "-q", "--namespace", kube_namespace, env=shell.env).stdout.split()
        assert releases == [RELEASE]
        # no image from the unpublished default registry
        ours = {i for i in images if "taskscale-" in i}
        assert ours and all(i.startswith("registry.example.com/you/") for i in ours), images
        # the console's Secret was created, and its Deployment reads it
        assert {"redis-url", "taskscale-dashboard-token"} <= secrets
        console = deployments["taskscale-dashboard"].spec.template.spec.containers[0]
        refs = {
            e.value_from.secret_key_ref.name
            for e in console.env or []
            if e.value_from and e.value_from.secret_key_ref
        }
        assert "redis-url" in refs, refs
        # the Service the (skipped) port-forward names exists
        forwards = [b for b in blocks if "port-forward" in b.text]
        assert forwards
        for block in forwards:
            named = re.findall(r"port-forward svc/(\S+)", block.text)
            assert named and set(named) <= services, (named, services)
    finally:
        helm("uninstall", RELEASE, "--namespace", kube_namespace, check=False, env=shell.env)


def test_notes_name_the_image_values_to_set_while_they_are_the_unpublished_defaults(
    kube_cluster: KubeCluster, kube_namespace: str, shell: Shell
) -> None:
    with kube_cluster.api_client() as api:
        adopt_crd_if_present(api, RELEASE, kube_namespace)
    out = shell.run(
        f"helm install {RELEASE} charts/taskscale --dry-run=server --set examples.enabled=true",
        "NOTES.txt",
    )
    notes = out[out.index("NOTES:") :]
    assert "WARNING: the taskscale images are not published yet" in notes, notes
    wanted = "image.repository, scheduler.image.repository, examples.worker.image.repository"
    assert wanted in " ".join(notes.split()), notes
