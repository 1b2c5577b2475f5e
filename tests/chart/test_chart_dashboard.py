"""The chart's optional dashboard: off by default; when on, a Deployment and
a ClusterIP Service with the controller's restricted security defaults, the
token from a Secret, and a Redis URL it must be told (or the examples')."""

from __future__ import annotations

import json

from support.chart import CHART, KUBE_VERSION, by_kind, helm, one, render

URL = {"dashboard.redisUrl": "redis://r:6379/0", "dashboard.tokenSecret.name": "console-token"}
PEERS = [
    {"namespaceSelector": {"matchLabels": {"team": "ops"}}},
    {"podSelector": {"matchLabels": {"app": "oauth2-proxy"}}},
]


def test_the_dashboard_is_off_by_default() -> None:
    objects = render()
    names = [o["metadata"]["name"] for o in objects]
    assert not [n for n in names if "dashboard" in n and "grafana" not in n]


def test_the_dashboard_reads_its_token_and_url_from_secrets_and_runs_restricted() -> None:
    objects = render(
        set_values={
            "dashboard.enabled": "true",
            "dashboard.redisUrlSecret.name": "redis-url",
            "dashboard.tokenSecret.name": "console-token",
            "dashboard.port": "9000",
        }
    )
    deployment = one(objects, "Deployment", "ts-taskscale-dashboard")
    spec = deployment["spec"]["template"]["spec"]
    [container] = spec["containers"]
    assert container["command"] == ["taskscale", "dashboard"]
    assert "--port=9000" in container["args"] and "--bind=0.0.0.0" in container["args"]
    env = {e["name"]: e for e in container["env"]}
    assert env["TASKSCALE_REDIS_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "redis-url",
        "key": "url",
    }
    assert env["TASKSCALE_DASHBOARD_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": "console-token",
        "key": "token",
    }
    assert spec["automountServiceAccountToken"] is False
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    service = one(objects, "Service", "ts-taskscale-dashboard")
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"][0]["port"] == 9000
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "dashboard"
    # the controller's Deployment and metrics Service must not select the console's pod
    controller = next(d for d in by_kind(objects, "Deployment") if d is not deployment)
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    selector = controller["spec"]["selector"]["matchLabels"]
    assert not all(labels.get(k) == v for k, v in selector.items())


def test_without_a_token_secret_the_console_is_read_only_and_a_url_is_required() -> None:
    # issue 24: reads are open only when asked (authReads=false; the default needs a token)
    objects = render(
        set_values={
            "dashboard.enabled": "true",
            "dashboard.redisUrl": "redis://r:6379/0",
            "dashboard.authReads": "false",
        }
    )
    container = one(objects, "Deployment", "ts-taskscale-dashboard")["spec"]["template"]["spec"][
        "containers"
    ][0]
    names = [e["name"] for e in container["env"]]
    assert names == ["TASKSCALE_REDIS_URL"]
    result = helm(
        "template", "ts", CHART, "--kube-version", KUBE_VERSION,
        "--set", "dashboard.enabled=true", check=False,
    )  # fmt: skip
    assert result.returncode != 0 and "dashboard.redisUrlSecret.name" in result.stderr
    typo = helm(
        "template", "ts", CHART, "--kube-version", KUBE_VERSION,
        "--set", "dashboard.tokn=x", check=False,
    )  # fmt: skip
    assert typo.returncode != 0


def test_the_dashboard_network_policy_is_off_by_default_and_admits_only_listed_peers() -> None:
    assert not by_kind(render(set_values={"dashboard.enabled": "true", **URL}), "NetworkPolicy")
    objects = render(
        set_values={"dashboard.enabled": "true", "dashboard.networkPolicy.enabled": "true", **URL},
        extra=["--set-json", f"dashboard.networkPolicy.from={json.dumps(PEERS)}"],
    )
    policy = one(objects, "NetworkPolicy", "ts-taskscale-dashboard")
    pod = one(objects, "Deployment", "ts-taskscale-dashboard")["spec"]["template"]
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert selector and all(pod["metadata"]["labels"][k] == v for k, v in selector.items())
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    [rule] = policy["spec"]["ingress"]
    assert rule["from"] == PEERS
    assert rule["ports"] == [{"port": "http", "protocol": "TCP"}]
    assert pod["spec"]["containers"][0]["ports"][0]["name"] == "http"
    # no peers listed: nothing may connect (an empty rule list, not an allow-all rule)
    closed = render(
        set_values={"dashboard.enabled": "true", "dashboard.networkPolicy.enabled": "true", **URL}
    )
    assert one(closed, "NetworkPolicy", "ts-taskscale-dashboard")["spec"]["ingress"] == []
    typo = helm(
        "template", "ts", CHART, "--kube-version", KUBE_VERSION, "--set", "dashboard.enabled=true",
        "--set", "dashboard.redisUrl=redis://r:6379/0",
        "--set-json", 'dashboard.networkPolicy.from=[{"podSelectr": {}}]', check=False,
    )  # fmt: skip
    assert typo.returncode != 0


def test_the_dashboard_takes_a_namespace_list() -> None:
    objects = render(
        set_values={"dashboard.enabled": "true", "dashboard.redisNamespace": "q-0\\,q-1", **URL}
    )
    container = one(objects, "Deployment", "ts-taskscale-dashboard")["spec"]["template"]["spec"][
        "containers"
    ][0]
    assert "--namespace=q-0,q-1" in container["args"]
    for bad in ("q-0\\,", "q 0", "q-0\\,\\,q-1"):
        result = helm(
            "template", "ts", CHART, "--kube-version", KUBE_VERSION,
            "--set", "dashboard.enabled=true", "--set", "dashboard.redisUrl=redis://r:6379/0",
            "--set", f"dashboard.redisNamespace={bad}", check=False,
        )  # fmt: skip
        assert result.returncode != 0, bad


def test_the_dashboard_bounds_request_bodies() -> None:
    def args(**values: str) -> list[str]:
        objects = render(set_values={"dashboard.enabled": "true", **URL, **values})
        deployment = one(objects, "Deployment", "ts-taskscale-dashboard")
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        return list(container["args"])

    assert "--max-body=1048576" in args()  # 1 MiB, as the command's own default
    assert "--max-body=65536" in args(**{"dashboard.maxBodyBytes": "65536"})
