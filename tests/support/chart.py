"""Running the real ``helm`` on charts/taskscale, for the chart tests and e2e.

helm comes from the same place as the Kubernetes binaries
(``e2e/cluster/build.sh``, cached under ~/.cache/taskscale); it is built there
if missing, and a missing or broken build is an error, never a skip: the
chart tests are part of ``make test``. ``TASKSCALE_HELM`` overrides the path
(e.g. a helm already on the machine).
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "taskscale"
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))


def _kube_version() -> str:
    for line in (REPO / "e2e/cluster/versions.env").read_text().splitlines():
        if line.startswith("KUBE_VERSION="):
            return line.split("=", 1)[1].strip()
    raise RuntimeError("KUBE_VERSION missing from e2e/cluster/versions.env")


#: Offline helm commands (template, lint) check the chart's kubeVersion against
#: this, not against helm's compiled-in default (which a source build leaves at 1.20).
KUBE_VERSION = _kube_version()


@functools.cache
def helm_binary() -> Path:
    """The helm binary: $TASKSCALE_HELM, else the cached build (built if missing)."""
    override = os.environ.get("TASKSCALE_HELM")
    if override:
        path = Path(override)
    else:
        from e2e.cluster.localcluster import ensure_binaries

        path = ensure_binaries(
            announce=lambda message: print(f"\n{message}", file=sys.stderr, flush=True)
        ).helm
    if not os.access(path, os.X_OK):
        raise RuntimeError(
            f"helm not found at {path}: run `bash e2e/cluster/build.sh` "
            "(or set TASKSCALE_HELM to a helm v3 binary)"
        )
    return path


def helm(
    *args: str | Path, check: bool = True, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run helm with its caches in a throw-away HOME-independent place."""
    cache = Path(os.environ.get("TMPDIR", "/tmp")) / f"taskscale-helm-{os.getuid()}"
    full_env = {
        **os.environ,
        "HELM_CACHE_HOME": str(cache / "cache"),
        "HELM_CONFIG_HOME": str(cache / "config"),
        "HELM_DATA_HOME": str(cache / "data"),
        **(env or {}),
    }
    result = subprocess.run(
        [str(helm_binary()), *map(str, args)],
        capture_output=True,
        text=True,
        env=full_env,
        check=False,
        timeout=240,
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"helm {' '.join(map(str, args))} failed ({result.returncode}):\n"
            f"{result.stderr}\n{result.stdout[-2000:]}"
        )
    return result


def value_args(
    values_files: Iterable[Path] = (), set_values: Mapping[str, str] | None = None
) -> list[str]:
    args: list[str] = []
    for path in values_files:
        args += ["-f", str(path)]
    for key, value in (set_values or {}).items():
        args += ["--set", f"{key}={value}"]
    return args


def render(
    *,
    values_files: Sequence[Path] = (),
    set_values: Mapping[str, str] | None = None,
    release: str = "ts",
    namespace: str = "taskscale-system",
    extra: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """``helm template`` -> the rendered objects (hooks included)."""
    result = helm(
        "template",
        release,
        CHART,
        "--namespace",
        namespace,
        "--kube-version",
        KUBE_VERSION,
        *value_args(values_files, set_values),
        *extra,
    )
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def by_kind(objects: Iterable[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o.get("kind") == kind]


def one(objects: Iterable[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in by_kind(objects, kind) if name is None or o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def pod_specs(objects: Iterable[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(workload name, pod spec) of every Deployment rendered."""
    return [
        (o["metadata"]["name"], o["spec"]["template"]["spec"])
        for o in by_kind(objects, "Deployment")
    ]


def service_account_token(api: Any, name: str, namespace: str, *, seconds: int = 3600) -> str:
    """A bound token of ServiceAccount ``namespace/name`` (TokenRequest API)."""
    from kubernetes import client

    status = (
        client.CoreV1Api(api)
        .create_namespaced_service_account_token(
            name,
            namespace,
            client.AuthenticationV1TokenRequest(
                spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=seconds)
            ),
        )
        .status
    )
    assert status is not None and status.token
    return str(status.token)


CRD_NAME = "taskscalers.taskscale.io"


def adopt_crd_if_present(api: Any, release: str, namespace: str) -> bool:
    """Mark an existing TaskScaler CRD (made outside this release, or left by an
    uninstalled one: it is kept) as this release's, so ``helm install`` can take it
    over instead of failing on ownership. False when there is no CRD yet."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    patch = {
        "metadata": {
            "labels": {"app.kubernetes.io/managed-by": "Helm"},
            "annotations": {
                "meta.helm.sh/release-name": release,
                "meta.helm.sh/release-namespace": namespace,
            },
        }
    }
    try:
        client.ApiextensionsV1Api(api).patch_custom_resource_definition(CRD_NAME, patch)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def kubectl(cluster: Any, *args: str, stdin: str | None = None) -> str:
    """Run the built kubectl against ``cluster`` (a KubeCluster); its stdout.
    A non-zero exit fails the test with kubectl's stderr."""
    from e2e.cluster.localcluster import ensure_binaries

    binary = ensure_binaries().kube("kubectl")
    result = subprocess.run(
        [str(binary), f"--kubeconfig={cluster.kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
    return result.stdout


def ensure_taskscaler_crd(cluster: Any) -> None:
    """The TaskScaler CRD, created from deploy/crd if absent (one left by an
    uninstalled release is kept and used), and established."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    with cluster.api_client() as api:
        try:
            client.ApiextensionsV1Api(api).read_custom_resource_definition(CRD_NAME)
        except ApiException as exc:
            if exc.status != 404:
                raise
            kubectl(cluster, "create", "-f", str(REPO / "deploy/crd/taskscaler.yaml"))
    kubectl(cluster, "wait", "--for=condition=Established", "--timeout=60s", f"crd/{CRD_NAME}")
