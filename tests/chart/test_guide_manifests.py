"""docs/operating.md's manifests cannot drift: every ```yaml block of the
guide is accepted by a real API server as written (server-side dry run with
strict field validation: a misspelt field, a selector that does not match
its template, a bad quantity are refused), and the worker Deployment's pods
carry the labels the chart's worker PodMonitor selects.

A block without ``kind`` is a fragment of the worker Deployment's container
(the ``--processes`` example): it is merged into that container and the
result is dry-run as well. Only ``metadata.namespace`` is changed, to the
test's namespace.
"""

from __future__ import annotations

import copy
import re
import textwrap
from typing import Any

import pytest
import yaml

from support.chart import REPO, ensure_taskscaler_crd, kubectl, one, render
from support.kube_cluster import KubeCluster
from taskscale.controller.job_spec import SCALER_LABEL, scaler_label
from taskscale.controller.kube_client import BUSY_LABEL

GUIDE = REPO / "docs" / "operating.md"
_YAML = re.compile(r"^```yaml\n(.*?)^```", re.S | re.M)


def yaml_blocks() -> list[list[dict[str, Any]]]:
    """Every ```yaml block of the guide, as its list of documents."""
    found = []
    for text in _YAML.findall(GUIDE.read_text()):
        docs = [d for d in yaml.safe_load_all(textwrap.dedent(text)) if d]
        assert docs and all(isinstance(d, dict) for d in docs), text
        found.append(docs)
    return found


def manifests() -> list[dict[str, Any]]:
    return [d for docs in yaml_blocks() for d in docs if "kind" in d]


def fragments() -> list[dict[str, Any]]:
    return [d for docs in yaml_blocks() for d in docs if "kind" not in d]


def worker_deployment() -> dict[str, Any]:
    return one(manifests(), "Deployment")


def test_the_guide_shows_a_worker_deployment_its_taskscaler_and_container_fragments() -> None:
    kinds = sorted(m["kind"] for m in manifests())
    assert kinds == ["Deployment", "PodDisruptionBudget", "TaskScaler", "TaskScaler"], kinds
    # the worker Deployment's scaler, and one in Job mode ("Job mode": a
    # jobTemplate instead of a scaleTargetRef, never both)
    scaler = one(manifests(), "TaskScaler", "emails")
    jobs = one(manifests(), "TaskScaler", "renders")
    assert "jobTemplate" in jobs["spec"] and "scaleTargetRef" not in jobs["spec"], jobs
    # the Job pods' budget selects that scaler's pods while they run a task
    budget = one(manifests(), "PodDisruptionBudget")
    assert budget["spec"]["maxUnavailable"] == 0
    assert budget["spec"]["selector"]["matchLabels"] == {
        SCALER_LABEL: scaler_label(jobs["metadata"]["name"]),
        BUSY_LABEL: "true",
    }
    assert scaler["spec"]["scaleTargetRef"]["name"] == worker_deployment()["metadata"]["name"]
    container_fields = set(worker_deployment()["spec"]["template"]["spec"]["containers"][0])
    for fragment in fragments():  # what a reader pastes into the container above
        assert fragment and set(fragment) <= container_fields, fragment


def test_the_worker_pods_carry_the_labels_the_charts_worker_podmonitor_selects() -> None:
    monitor = one(render(set_values={"metrics.workerPodMonitor.enabled": "true"}), "PodMonitor")
    selector = monitor["spec"]["selector"]
    assert set(selector) == {"matchLabels"}, selector  # no expressions to check as well
    labels = worker_deployment()["spec"]["template"]["metadata"]["labels"]
    missing = {k: v for k, v in selector["matchLabels"].items() if labels.get(k) != v}
    assert not missing, f"the guide's worker pods lack the PodMonitor's labels {missing}"
    ports = worker_deployment()["spec"]["template"]["spec"]["containers"][0]["ports"]
    assert monitor["spec"]["podMetricsEndpoints"][0]["port"] in {p["name"] for p in ports}


@pytest.mark.kube
def test_every_manifest_of_the_guide_passes_a_strict_server_side_dry_run(
    kube_cluster: KubeCluster, kube_namespace: str
) -> None:
    ensure_taskscaler_crd(kube_cluster)
    objects = [copy.deepcopy(m) for m in manifests()]
    for n, fragment in enumerate(fragments()):
        variant = copy.deepcopy(worker_deployment())
        variant["metadata"]["name"] += f"-fragment-{n}"
        variant["spec"]["template"]["spec"]["containers"][0].update(fragment)
        objects.append(variant)
    for o in objects:
        o["metadata"]["namespace"] = kube_namespace
    out = kubectl(
        kube_cluster,
        "apply",
        "--dry-run=server",
        "--server-side",
        "--validate=strict",
        "--field-manager=taskscale-guide-test",
        "-f",
        "-",
        stdin=yaml.safe_dump_all(objects),
    )
    applied = [line for line in out.splitlines() if "(server dry run)" in line]
    assert len(applied) == len(objects) == len(manifests()) + len(fragments()), out
