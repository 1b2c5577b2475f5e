"""The controller's command line answers a missing Kubernetes config in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from taskscale.cli import main


def test_controller_without_kubeconfig_prints_one_line_and_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert main(["controller", "--metrics-port", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("taskscale controller: no Kubernetes configuration: ")
    assert str(tmp_path / "absent") in err[0] and "--kubeconfig" in err[0]


def test_controller_with_a_broken_kubeconfig_names_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "config"
    broken.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\n")
    assert main(["controller", "--kubeconfig", str(broken), "--metrics-port", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"taskscale controller: cannot use kubeconfig '{broken}': ")
