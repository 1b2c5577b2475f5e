"""What charts/taskscale renders, checked with the real helm (no cluster needed).

The API server's verdict on the same objects is in test_chart_cluster.py; here
are the properties only the chart can get wrong: lint, the values schema, the
CRD copy, secure defaults and the leader-election rule.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.chart import (
    CHART,
    CI_VALUES,
    KUBE_VERSION,
    REPO,
    by_kind,
    helm,
    one,
    pod_specs,
    render,
    value_args,
)


def test_ci_values_files_exist() -> None:
    assert len(CI_VALUES) >= 5, CI_VALUES


@pytest.mark.parametrize("values", [None, *CI_VALUES], ids=lambda p: p.name if p else "defaults")
def test_helm_lint_is_clean_in_strict_mode(values: Path | None) -> None:
    result = helm(
        "lint",
        "--strict",
        "--kube-version",
        KUBE_VERSION,
        CHART,
        *value_args([values] if values else []),
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


def test_chart_copies_of_crd_alerts_and_dashboard_are_current() -> None:
    result = subprocess.run(
        ["bash", str(CHART / "sync-crd.sh"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_rendered_crd_equals_deploy_crd_apart_from_helm_metadata() -> None:
    source = yaml.safe_load((REPO / "deploy/crd/taskscaler.yaml").read_text())
    rendered = one(render(), "CustomResourceDefinition")
    metadata = rendered.pop("metadata")
    source_metadata = source.pop("metadata")
    assert rendered == source
    assert metadata["name"] == source_metadata["name"] == "taskscalers.taskscale.io"
    assert metadata["annotations"] == {"helm.sh/resource-policy": "keep"}


def test_crds_install_false_renders_no_crd_and_keep_false_drops_the_policy() -> None:
    assert not by_kind(render(set_values={"crds.install": "false"}), "CustomResourceDefinition")
    crd = one(render(set_values={"crds.keep": "false"}), "CustomResourceDefinition")
    assert "annotations" not in crd["metadata"]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("controller.replicaz", "2"),  # a typo
        ("unknownTopLevel", "1"),
        ("metrics.serviceMonitor.intervall", "30s"),
        ("examples.worker.threadz", "4"),
    ],
)
def test_values_schema_rejects_unknown_keys(key: str, value: str) -> None:
    result = helm(
        "template",
        "ts",
        CHART,
        "--kube-version",
        KUBE_VERSION,
        "--set",
        f"{key}={value}",
        check=False,
    )
    assert result.returncode != 0
    assert "additional properties" in result.stderr.lower(), result.stderr
    assert key.rsplit(".", 1)[-1] in result.stderr


def test_values_schema_rejects_wrong_types_and_ranges() -> None:
    for key, value in [
        ("controller.replicas", "-1"),
        ("controller.logLevel", "verbose"),
        ("image.pullPolicy", "Sometimes"),
        ("examples.taskScaler.maxReplicas", "0"),
        ("metrics.prometheusRule.thresholds.noLeaderFor", "five"),  # not a Prometheus duration
        ("metrics.prometheusRule.thresholds.kubeApiErrorsPerSecond", "-1"),
    ]:
        result = helm(
            "template",
            "ts",
            CHART,
            "--kube-version",
            KUBE_VERSION,
            "--set",
            f"{key}={value}",
            check=False,
        )
        assert result.returncode != 0, f"{key}={value} was accepted"
        assert "values don't meet the specifications of the schema" in result.stderr


def test_several_replicas_without_leader_election_are_refused() -> None:
    result = helm(
        "template",
        "ts",
        CHART,
        "--kube-version",
        KUBE_VERSION,
        "--set",
        "controller.replicas=2",
        "--set",
        "controller.leaderElection.enabled=false",
        check=False,
    )
    assert result.returncode != 0
    assert "needs controller.leaderElection.enabled=true" in result.stderr


def _controller(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return one(objects, "Deployment", "ts-taskscale")


def test_controller_args_follow_the_agreed_command_line() -> None:
    container = _controller(render())["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == [
        "--metrics-port=9090",
        "--metrics-host=0.0.0.0",
        "--log-level=info",
        "--log-format=text",
        "--leader-elect",
        "--leader-election-namespace=taskscale-system",
        "--leader-election-id=taskscale-controller",
    ]
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"


def test_without_leader_election_rollouts_recreate_and_no_lease_role_exists() -> None:
    objects = render(set_values={"controller.leaderElection.enabled": "false"})
    deployment = _controller(objects)
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert "--leader-elect" not in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not [o for o in by_kind(objects, "Role") if "leader" in o["metadata"]["name"]]


@pytest.mark.parametrize("values", [None, *CI_VALUES], ids=lambda p: p.name if p else "defaults")
def test_every_container_runs_restricted(values: Path | None) -> None:
    specs = pod_specs(render(values_files=[values] if values else []))
    assert specs
    for workload, spec in specs:
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True, workload
        assert isinstance(pod["runAsUser"], int) and pod["runAsUser"] > 0, workload
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}, workload
        for container in spec["containers"]:
            sc = container["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, workload
            assert sc["readOnlyRootFilesystem"] is True, workload
            assert sc["capabilities"] == {"drop": ["ALL"]}, workload
            mounts = {m["mountPath"] for m in container.get("volumeMounts", [])}
            assert mounts & {"/tmp", "/data"}, f"{workload}: nothing writable"


def test_examples_render_worker_at_zero_scheduler_and_a_matching_taskscaler() -> None:
    objects = render(values_files=[CHART / "ci/examples-values.yaml"])
    worker = one(objects, "Deployment", "ts-taskscale-example-worker")
    assert worker["spec"]["replicas"] == 0
    args = worker["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--types=sleep,noop,fail" in args and "--import=taskscale.examples" in args
    scaler = one(objects, "TaskScaler")
    assert scaler["spec"]["scaleTargetRef"] == {"name": "ts-taskscale-example-worker"}
    assert [t["name"] for t in scaler["spec"]["taskTypes"]] == ["sleep", "noop", "fail"]
    assert scaler["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade"
    url = "redis://ts-taskscale-redis.taskscale-system.svc:6379/0"
    assert scaler["spec"]["redis"]["url"] == url
    env = {
        e["name"]: e.get("value")
        for e in worker["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["TASKSCALE_REDIS_URL"] == url
    scheduler = one(objects, "Deployment", "ts-taskscale-scheduler")
    assert scheduler["spec"]["template"]["spec"]["containers"][0]["command"] == [
        "taskscale",
        "scheduler",
    ]


def test_examples_without_redis_need_a_redis_url() -> None:
    result = helm(
        "template",
        "ts",
        CHART,
        "--kube-version",
        KUBE_VERSION,
        "--set",
        "examples.enabled=true",
        "--set",
        "examples.redis.enabled=false",
        check=False,
    )
    assert result.returncode != 0
    assert "examples.redisUrl is required" in result.stderr


def test_monitoring_objects_carry_the_alerts_and_dashboard_of_deploy() -> None:
    objects = render(values_files=[CHART / "ci/monitoring-values.yaml"])
    rule = one(objects, "PrometheusRule")
    alerts = yaml.safe_load((REPO / "deploy/prometheus/taskscale-alerts.yaml").read_text())
    assert rule["spec"] == alerts
    dashboard = one(objects, "ConfigMap", "ts-taskscale-dashboard")
    assert json.loads(dashboard["data"]["taskscale.json"]) == json.loads(
        (REPO / "deploy/grafana/taskscale.json").read_text()
    )
    monitor = one(objects, "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    image = _controller(objects)["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image.endswith("@sha256:" + "0" * 64)


def test_namespaced_watch_uses_a_role_in_the_watched_namespace_only() -> None:
    objects = render(values_files=[CHART / "ci/namespaced-values.yaml"])
    # the one cluster-wide grant: reading Nodes (cluster-scoped), to see drains (issue 23)
    [nodes] = by_kind(objects, "ClusterRole")
    assert nodes["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}
    ]
    assert [b["roleRef"]["name"] for b in by_kind(objects, "ClusterRoleBinding")] == [
        nodes["metadata"]["name"]
    ]
    role = one(objects, "Role")
    assert role["metadata"]["namespace"] == "taskscale-watched"
    assert not [r for r in role["rules"] if r["resources"] == ["secrets"]]
    args = _controller(objects)["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--watch-namespace=taskscale-watched" in args


def _scale_rules(objects: list[dict[str, Any]]) -> list[tuple[list[str], list[str]]]:
    role = one(objects, "ClusterRole", "ts-taskscale")
    return [
        (r["apiGroups"], r["resources"])
        for r in role["rules"]
        if any(res.endswith("/scale") for res in r["resources"])
    ]


def test_rbac_grants_scale_of_deployments_only_unless_more_targets_are_listed(
    tmp_path: Path,
) -> None:
    assert _scale_rules(render()) == [(["apps"], ["deployments/scale"])]
    extra = tmp_path / "targets.yaml"
    extra.write_text(
        "rbac:\n  extraScaleTargets:\n"
        "    - {apiGroup: apps, resource: statefulsets}\n"
        "    - {apiGroup: argoproj.io, resource: rollouts}\n"
    )
    assert _scale_rules(render(values_files=[extra])) == [
        (["apps"], ["deployments/scale"]),
        (["apps"], ["statefulsets/scale"]),
        (["argoproj.io"], ["rollouts/scale"]),
    ]
    bad = tmp_path / "bad.yaml"
    bad.write_text("rbac:\n  extraScaleTargets:\n    - {apiGroup: apps, resource: 'pods/*'}\n")
    result = helm(
        "template", "ts", CHART, "--kube-version", KUBE_VERSION, "-f", str(bad), check=False
    )
    assert result.returncode != 0 and "extraScaleTargets" in result.stderr
