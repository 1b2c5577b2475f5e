"""What the chart renders for busy workers' protection (issue 23): a
PodDisruptionBudget per TaskScaler it renders, selecting the workers' labels
and ``taskscale.io/busy: "true"`` with maxUnavailable 0; the controller may
patch pods and read Nodes, and ``rbac.readNodes: false`` drops the latter."""

from __future__ import annotations

from pathlib import Path

from support.chart import CHART, by_kind, one, render


def test_the_example_taskscaler_comes_with_a_budget_for_its_busy_workers() -> None:
    objects = render(values_files=[CHART / "ci/examples-values.yaml"])
    worker = one(objects, "Deployment", "ts-taskscale-example-worker")
    budget = one(objects, "PodDisruptionBudget", "ts-taskscale-example-worker-busy")
    assert budget["spec"]["maxUnavailable"] == 0
    selected = budget["spec"]["selector"]["matchLabels"]
    assert selected.pop("taskscale.io/busy") == "true"
    assert selected == worker["spec"]["selector"]["matchLabels"]
    labels = worker["spec"]["template"]["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in selected.items())


def test_no_example_no_worker_budget() -> None:
    names = [b["metadata"]["name"] for b in by_kind(render(), "PodDisruptionBudget")]
    assert not [n for n in names if n.endswith("-busy")]


def test_the_controller_may_patch_pods_and_read_nodes_unless_told_not_to(tmp_path: Path) -> None:
    objects = render()
    rules = one(objects, "ClusterRole", "ts-taskscale")["rules"]
    assert {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "patch"]} in rules
    nodes = one(objects, "ClusterRole", "ts-taskscale-nodes")
    assert nodes["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}
    ]
    binding = one(objects, "ClusterRoleBinding", "ts-taskscale-nodes")
    assert binding["roleRef"]["name"] == "ts-taskscale-nodes"
    off = tmp_path / "no-nodes.yaml"
    off.write_text("rbac:\n  readNodes: false\n")
    names = [r["metadata"]["name"] for r in by_kind(render(values_files=[off]), "ClusterRole")]
    assert names == ["ts-taskscale"]
