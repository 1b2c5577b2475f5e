"""The release's pieces agree: one version everywhere, the license the metadata names."""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

import taskscale

REPO = Path(__file__).resolve().parents[1]


def test_one_version_everywhere() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    chart = yaml.safe_load((REPO / "charts/taskscale/Chart.yaml").read_text())
    assert taskscale.__version__ == pyproject
    assert chart["appVersion"] == pyproject
    assert f"## [{pyproject}]" in (REPO / "CHANGELOG.md").read_text()


def test_license_file_is_the_one_declared() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert pyproject["license"] == "Apache-2.0"
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
