"""bash with kubectl and helm on PATH, pointed at one test namespace: how the
docs' Kubernetes commands are run as written (tests/chart/test_doc_commands_kube.py,
tests/chart/test_chart_readme_kube.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from support.chart import helm_binary
from support.docs import run_bash
from support.kube_cluster import KubeCluster


class Shell:
    """bash with kubectl and helm on PATH, pointed at the test's namespace."""

    def __init__(self, cluster: KubeCluster, namespace: str, folder: Path) -> None:
        from e2e.cluster.localcluster import ensure_binaries

        bin_dir = folder / "bin"
        bin_dir.mkdir()
        (bin_dir / "kubectl").symlink_to(ensure_binaries().kube("kubectl"))
        (bin_dir / "helm").symlink_to(helm_binary())
        kubeconfig = yaml.safe_load(cluster.kubeconfig.read_text())
        for context in kubeconfig.get("contexts") or []:
            context["context"]["namespace"] = namespace
        (folder / "kubeconfig").write_text(yaml.safe_dump(kubeconfig))
        self.env = {
            "PATH": f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin",
            "KUBECONFIG": str(folder / "kubeconfig"),
            "HELM_NAMESPACE": namespace,
            "HELM_CACHE_HOME": str(folder / "helm-cache"),
            "HELM_CONFIG_HOME": str(folder / "helm-config"),
            "HELM_DATA_HOME": str(folder / "helm-data"),
        }

    def run(self, script: str, where: str, extra: dict[str, str] | None = None) -> str:
        result = run_bash(script, env={**self.env, **(extra or {})}, timeout=240)
        assert result.returncode == 0, (
            f"{where}: {script!r} exited {result.returncode}\n{result.stderr}\n{result.stdout}"
        )
        return result.stdout
