"""charts/taskscale/README.md's values table is generated from values.yaml."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "taskscale"


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("chart_readme", REPO / "scripts/chart_readme.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["chart_readme"] = module
    spec.loader.exec_module(module)
    return module


def test_readme_values_table_matches_values_yaml() -> None:
    gen = generator()
    readme = (CHART / "README.md").read_text()
    assert gen.render(readme, (CHART / "values.yaml").read_text()) == readme, (
        "charts/taskscale/README.md is stale: run python scripts/chart_readme.py"
    )


def test_every_value_has_a_description() -> None:
    gen = generator()
    text = (CHART / "values.yaml").read_text()
    import yaml

    rows = gen.rows(yaml.safe_load(text), gen.comments(text))
    assert [path for path, _, note in rows if not note] == []


def test_a_changed_default_makes_the_check_fail() -> None:
    gen = generator()
    readme = (CHART / "README.md").read_text()
    values = (CHART / "values.yaml").read_text().replace("logFormat: text", "logFormat: json")
    assert gen.render(readme, values) != readme


def test_helm_package_makes_the_versioned_chart_archive(tmp_path: Path) -> None:
    import tarfile

    import yaml

    import taskscale
    from support.chart import helm

    helm("package", str(CHART), "--destination", str(tmp_path))
    archive = tmp_path / f"taskscale-{taskscale.__version__}.tgz"
    assert archive.exists(), sorted(p.name for p in tmp_path.iterdir())
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
        chart_yaml = tar.extractfile("taskscale/Chart.yaml")
        assert chart_yaml is not None
        meta = yaml.safe_load(chart_yaml.read())
    assert {"taskscale/README.md", "taskscale/values.yaml", "taskscale/templates/crd.yaml"} <= names
    assert meta["appVersion"] == taskscale.__version__


def test_every_crd_field_has_a_description() -> None:
    import yaml

    crd = yaml.safe_load((REPO / "deploy/crd/taskscaler.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    missing: list[str] = []

    def walk(node: dict[str, object], path: str) -> None:
        properties = node.get("properties") or {}
        assert isinstance(properties, dict)
        for name, sub in properties.items():
            here = f"{path}.{name}"
            if "description" not in sub and here not in (".apiVersion", ".kind", ".metadata"):
                missing.append(here)
            walk(sub, here)
            if isinstance(sub.get("items"), dict):
                walk(sub["items"], here + "[]")

    walk(schema, "")
    assert missing == []  # kubectl explain taskscaler.<field> has something to say


def test_schema_descriptions_are_the_values_comments_for_every_value() -> None:
    import json

    import yaml

    gen = generator()
    text = (CHART / "values.yaml").read_text()
    schema_json = (CHART / "values.schema.json").read_text()
    assert gen.schema_text(schema_json, text) == schema_json, (
        "values.schema.json descriptions are stale: run python scripts/chart_readme.py"
    )
    missing: list[str] = []

    def walk(schema: dict, values: object, path: str) -> None:
        for key, sub in (schema.get("properties") or {}).items():
            if not sub.get("description"):
                missing.append(path + key)
            inner = values.get(key) if isinstance(values, dict) else None
            if isinstance(inner, dict) and inner:
                walk(sub, inner, f"{path}{key}.")

    walk(json.loads(schema_json), yaml.safe_load(text), "")
    assert missing == []
