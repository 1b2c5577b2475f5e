"""The chart's own scheduler, extra volumes, and the worker PodMonitor (helm template)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from support.chart import CHART, KUBE_VERSION, by_kind, helm, one, render
from support.kube_cluster import KubeCluster

SCHEDULER = "ts-taskscale-scheduler"


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return dict(containers[0])


def env_of(c: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in c["env"]}


def test_scheduler_runs_with_the_examples_two_replicas_probed_without_a_token() -> None:
    objects = render(values_files=[CHART / "ci/examples-values.yaml"])
    deployment = one(objects, "Deployment", SCHEDULER)
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False and "serviceAccountName" not in pod
    c = container(deployment)
    assert c["command"] == ["taskscale", "scheduler"]
    assert "--metrics-port=9110" in c["args"] and "--lease=10" in c["args"]
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert c["image"] == f"ghcr.io/taskscale/taskscale-worker:{app_version}"
    env = env_of(c)
    assert env["TASKSCALE_REDIS_URL"]["value"] == (
        "redis://ts-taskscale-redis.taskscale-system.svc:6379/0"
    )
    assert env["TASKSCALE_NAMESPACE"]["value"] == "taskscale"
    assert c["ports"] == [{"name": "metrics", "containerPort": 9110, "protocol": "TCP"}]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert c["resources"]["limits"]["memory"]
    # its own component label: the controller's selector does not pick it up
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert labels["app.kubernetes.io/component"] == "scheduler"
    controller = one(objects, "Deployment", "ts-taskscale")
    selector = controller["spec"]["selector"]["matchLabels"]
    assert not all(labels.get(k) == v for k, v in selector.items())
    # the example scheduler is gone: one scheduler Deployment only
    assert [d["metadata"]["name"] for d in by_kind(objects, "Deployment") if "sched" in str(d)] == [
        SCHEDULER
    ]


def test_scheduler_takes_its_url_from_a_secret_and_mounts_extra_volumes() -> None:
    objects = render(values_files=[CHART / "ci/scheduler-values.yaml"])
    deployment = one(objects, "Deployment", SCHEDULER)
    assert deployment["spec"]["replicas"] == 3
    c = container(deployment)
    env = env_of(c)
    assert env["TASKSCALE_REDIS_URL"]["valueFrom"] == {
        "secretKeyRef": {"name": "redis-url", "key": "url"}
    }
    assert env["TASKSCALE_NAMESPACE"]["value"] == "jobs"
    assert env["TZ"]["value"] == "UTC"
    for d in (deployment, one(objects, "Deployment", "ts-taskscale")):
        pod = d["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["redis-ca"] == {"name": "redis-ca", "secret": {"secretName": "redis-ca"}}
        assert "tmp" in volumes
        mounts = {m["mountPath"]: m for m in container(d)["volumeMounts"]}
        assert mounts["/etc/redis-ca"]["readOnly"] is True and "/tmp" in mounts
    pdb = one(objects, "PodDisruptionBudget", SCHEDULER)
    assert pdb["spec"]["minAvailable"] == 2
    assert pdb["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "scheduler"
    monitor = one(objects, "PodMonitor", SCHEDULER)
    assert monitor["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
    workers = one(objects, "PodMonitor", "ts-taskscale-workers")
    assert workers["spec"]["selector"] == {"matchLabels": {"taskscale.io/worker": "true"}}
    assert workers["spec"]["namespaceSelector"] == {"any": True}


def test_with_no_redis_known_no_scheduler_is_rendered() -> None:
    assert not [d for d in by_kind(render(), "Deployment") if "scheduler" in d["metadata"]["name"]]
    off = render(
        values_files=[CHART / "ci/examples-values.yaml"], set_values={"scheduler.enabled": "false"}
    )
    assert not [d for d in by_kind(off, "Deployment") if d["metadata"]["name"] == SCHEDULER]


@pytest.mark.kube
def test_notes_warn_when_no_scheduler_runs_and_name_it_when_one_does(
    kube_cluster: KubeCluster, kube_namespace: str
) -> None:
    def notes(*extra: str) -> str:
        return helm(
            "install",
            "ts",
            CHART,
            "--dry-run=client",
            "--namespace",
            kube_namespace,
            "--set",
            "crds.install=false",  # the session's CRD belongs to another release
            *extra,
            env={"KUBECONFIG": str(kube_cluster.kubeconfig)},
        ).stdout

    assert "WARNING: no scheduler is running: set scheduler.redis.url" in notes()
    running = notes("--set", "scheduler.redis.url=redis://redis:6379/0")
    assert "WARNING: no scheduler" not in running  # (the unpublished-images warning stays)
    assert (
        "Scheduler: 2 replica(s) of `taskscale scheduler` (Deployment ts-taskscale-scheduler)"
        in running
    )


def test_worker_pod_monitor_is_off_by_default_and_example_workers_match_it() -> None:
    objects = render(values_files=[CHART / "ci/examples-values.yaml"])
    assert not by_kind(objects, "PodMonitor")
    worker = one(objects, "Deployment", "ts-taskscale-example-worker")
    assert worker["spec"]["template"]["metadata"]["labels"]["taskscale.io/worker"] == "true"


def test_service_monitor_keeps_the_scalers_namespace_label() -> None:
    objects = render(values_files=[CHART / "ci/monitoring-values.yaml"])
    endpoint = one(objects, "ServiceMonitor")["spec"]["endpoints"][0]
    assert endpoint["honorLabels"] is True


def scheduler_values(tmp_path: Path, **redis: str) -> Path:
    """A values file (not --set, which would split a list at its commas)."""
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump({"scheduler": {"redis": redis}}))
    return path


@pytest.mark.parametrize(
    ("url", "namespace"),
    [
        ("redis+sentinel://10.0.0.5:26379,10.0.0.6:26379/jobs/0", "jobs-0,jobs-1,jobs-3"),
        ("rediss+cluster://10.0.0.1:7000,10.0.0.2:7000?ssl_ca_certs=/ca/ca.crt", "a, b"),
        ("unix:///run/redis.sock?db=2", "jobs"),
    ],
)
def test_scheduler_takes_any_url_scheme_and_a_namespace_list(
    tmp_path: Path, url: str, namespace: str
) -> None:
    values = scheduler_values(tmp_path, url=url, namespace=namespace)
    objects = render(values_files=[values])
    env = env_of(container(one(objects, "Deployment", SCHEDULER)))
    assert env["TASKSCALE_REDIS_URL"]["value"] == url
    assert env["TASKSCALE_NAMESPACE"]["value"] == namespace


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("url", "http://redis:6379"),
        ("url", "redis+cluster:/10.0.0.1:7000"),
        ("url", "redis+sentinel://"),
        ("namespace", "jobs:high"),  # ':' is not in a key name (keys.check_name)
        ("namespace", "a,,b"),
        ("namespace", "a,"),
        ("namespace", "{jobs}"),
        ("namespace", "x" * 129),
    ],
)
def test_schema_refuses_a_bad_scheduler_url_or_namespace(
    tmp_path: Path, key: str, value: str
) -> None:
    values = scheduler_values(tmp_path, **{key: value})
    result = helm(
        "template", "ts", CHART, "--kube-version", KUBE_VERSION, "-f", values, check=False
    )
    assert result.returncode != 0, f"scheduler.redis.{key}={value} was accepted"
    assert "values don't meet the specifications of the schema" in result.stderr
    assert f"scheduler.redis.{key}" in result.stderr or key in result.stderr, result.stderr
