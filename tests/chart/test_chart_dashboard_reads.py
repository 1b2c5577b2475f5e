"""The chart puts the console's reads behind the token (issue 24, item 6)
whenever other pods can reach its Service, and takes an authenticating
proxy's user header from the proxy's addresses only."""

from __future__ import annotations

import json

from support.chart import CHART, KUBE_VERSION, helm, one, render

ON = {"dashboard.enabled": "true", "dashboard.redisUrl": "redis://r:6379/0"}
TOKEN = {"dashboard.tokenSecret.name": "console-token"}


def _args(**values: str) -> list[str]:
    objects = render(set_values={**ON, **values})
    spec = one(objects, "Deployment", "ts-taskscale-dashboard")["spec"]["template"]["spec"]
    args: list[str] = spec["containers"][0]["args"]
    return args


def _fails(*extra: str) -> str:
    result = helm(
        "template", "ts", CHART, "--kube-version", KUBE_VERSION,
        *(x for k, v in ON.items() for x in ("--set", f"{k}={v}")), *extra, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    return result.stderr


def test_reads_need_the_token_whenever_the_service_is_reachable() -> None:
    assert "--auth-reads" in _args(**TOKEN)
    # only a port-forward reaches it: reads may stay open
    closed = _args(**TOKEN, **{"dashboard.networkPolicy.enabled": "true"})
    assert "--auth-reads" not in closed
    # a peer may connect: on again
    peers = json.dumps([{"podSelector": {"matchLabels": {"app": "oauth2-proxy"}}}])
    objects = render(
        set_values={**ON, **TOKEN, "dashboard.networkPolicy.enabled": "true"},
        extra=["--set-json", f"dashboard.networkPolicy.from={peers}"],
    )
    container = one(objects, "Deployment", "ts-taskscale-dashboard")["spec"]["template"]["spec"][
        "containers"
    ][0]
    assert "--auth-reads" in container["args"]
    assert "--auth-reads" not in _args(**TOKEN, **{"dashboard.authReads": "false"})
    assert "--auth-reads" in _args(
        **TOKEN, **{"dashboard.networkPolicy.enabled": "true", "dashboard.authReads": "true"}
    )


def test_reads_behind_the_token_without_a_token_is_refused_at_render_time() -> None:
    assert "dashboard.tokenSecret.name" in _fails()
    assert _fails("--set", "dashboard.authReads=maybe")  # the schema: auto, true or false


def test_an_oauth2_proxy_s_user_header_from_its_addresses() -> None:
    args = _args(
        **{
            "dashboard.trustedProxy.userHeader": "X-Forwarded-User",
            "dashboard.trustedProxy.addresses[0]": "10.1.0.0/16",
            "dashboard.trustedProxy.addresses[1]": "10.2.3.4",
        }
    )
    assert "--auth-reads" in args and "--trusted-user-header=X-Forwarded-User" in args
    assert args.count("--trusted-proxy=10.1.0.0/16") == 1 and "--trusted-proxy=10.2.3.4" in args
    assert "dashboard.trustedProxy.addresses" in _fails(
        "--set", "dashboard.trustedProxy.userHeader=X-Forwarded-User"
    )
    assert _fails("--set", "dashboard.trustedProxy.userHeader=X Bad: header")
