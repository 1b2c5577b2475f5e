"""The TypeScript client as a package: its Lua scripts are exactly what the
Python runtime loads (exported by ``taskscale scripts export``, never copied
by hand), its npm dependencies are locked, its type declarations are
emitted, and its pure rules (priorities, backoff) agree with Python's."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from support.node_client import CLIENT, LUA, NODE, built_client, run_node
from taskscale.keys import parse_priority
from taskscale.luascripts import script_source
from taskscale.options import resolve
from taskscale.worker import RetryPolicy

SCRIPTS = Path(__file__).resolve().parents[2] / "taskscale" / "scripts"


def manifest_entries() -> dict[str, dict[str, object]]:
    doc = json.loads((LUA / "manifest.json").read_text())
    entries = doc["scripts"]
    if isinstance(entries, dict):
        return {name: {"name": name, **entry} for name, entry in entries.items()}
    return {entry["name"]: entry for entry in entries}


def test_the_exported_scripts_are_what_the_python_runtime_loads() -> None:
    built_client()
    entries = manifest_entries()
    names = sorted(p.stem for p in SCRIPTS.glob("*.lua"))
    assert sorted(entries) == names
    for name in names:
        text = (LUA / str(entries[name]["file"])).read_text(encoding="utf-8")
        assert text == script_source(name), f"{name}: re-run `taskscale scripts export`"
        assert entries[name]["sha1"] == hashlib.sha1(text.encode()).hexdigest()
        assert "--! include" not in text


def test_the_client_loads_the_exported_scripts_and_checks_their_sha1() -> None:
    dist = built_client()
    assert NODE is not None
    probe = (
        f"const m = require({json.dumps(str(dist))}).manifest();"
        "console.log(JSON.stringify([...m.scripts.values()].map(s => [s.name, s.sha1])))"
    )
    out = subprocess.run([NODE, "-e", probe], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    loaded = dict(json.loads(out.stdout))
    assert loaded == {n: hashlib.sha1(script_source(n).encode()).hexdigest() for n in loaded}
    assert len(loaded) == len(list(SCRIPTS.glob("*.lua")))


def test_a_script_that_does_not_match_its_sha1_is_refused(tmp_path: Path) -> None:
    dist = built_client()
    assert NODE is not None
    for item in LUA.iterdir():
        (tmp_path / item.name).write_bytes(item.read_bytes())
    enqueue = tmp_path / str(manifest_entries()["enqueue"]["file"])
    enqueue.write_text(enqueue.read_text() + "\n-- edited by hand\n")
    probe = f"require({json.dumps(str(dist))}).manifest({json.dumps(str(tmp_path))})"
    out = subprocess.run([NODE, "-e", probe], capture_output=True, text=True, timeout=30)
    assert out.returncode != 0
    assert "does not match its SHA1" in out.stderr


def test_the_npm_dependencies_are_locked_and_declarations_emitted() -> None:
    dist = built_client()
    package = json.loads((CLIENT / "package.json").read_text())
    lock = json.loads((CLIENT / "package-lock.json").read_text())
    assert set(package["dependencies"]) == {"ioredis"}
    assert "typescript" in package["devDependencies"]
    for name, version in {**package["dependencies"], **package["devDependencies"]}.items():
        assert version[0].isdigit(), f"{name} is not pinned: {version}"
        assert lock["packages"][f"node_modules/{name}"]["version"] == version
    assert (dist / "index.d.ts").exists() and (dist / "worker.d.ts").exists()
    assert package["types"] == "dist/index.d.ts"


def test_priorities_are_parsed_as_python_parses_them(redis_url: str) -> None:
    values = ["high", "normal", "low", "HIGH", 0, 9, "7", 12, -1, "urgent", 1.5]
    got = run_node(redis_url, "parsePriority", {"values": values})
    for value, ts in zip(values, got, strict=True):
        try:
            assert ts == parse_priority(value), value  # type: ignore[arg-type]
        except ValueError:
            assert isinstance(ts, str) and "invalid priority" in ts, (value, ts)


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"retry_backoff_ms": 200},
        {"retry_backoff_ms": 200, "retry_backoff_max_ms": 1000},
        {"retry_backoff_ms": [0, 50, 300]},
        {"retry_backoff_ms": "bad", "retry_backoff_max_ms": -3},
    ],
)
def test_the_backoff_is_python_s_without_jitter(redis_url: str, fields: dict[str, object]) -> None:
    attempts = [0, 1, 2, 3, 10, 70]
    policy = RetryPolicy(jitter=0.0)
    want = [policy.for_task(resolve(fields, None), a) for a in attempts]
    assert run_node(redis_url, "backoff", {"fields": fields, "attempts": attempts}) == want


def test_the_documented_examples_type_check_and_the_types_catch_mistakes() -> None:
    # clients/typescript/typecheck/usage.ts holds docs/clients.md's examples and,
    # marked @ts-expect-error, calls with wrong arguments: an unused marker fails too
    built_client()
    assert NODE is not None
    tsc = CLIENT / "node_modules" / "typescript" / "bin" / "tsc"
    out = subprocess.run(
        [NODE, str(tsc), "-p", str(CLIENT / "typecheck" / "tsconfig.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "@ts-expect-error" in (CLIENT / "typecheck" / "usage.ts").read_text()


def test_the_client_speaks_the_exported_schema_version_and_refuses_another(tmp_path: Path) -> None:
    from taskscale.contract import SCHEMA_VERSION

    dist = built_client()
    assert NODE is not None
    probe = f"console.log(require({json.dumps(str(dist))}).SCHEMA_VERSION)"
    out = subprocess.run([NODE, "-e", probe], capture_output=True, text=True, timeout=30)
    assert (
        int(out.stdout)
        == SCHEMA_VERSION
        == json.loads((LUA / "manifest.json").read_text())["schema_version"]
    )
    for item in LUA.iterdir():
        (tmp_path / item.name).write_bytes(item.read_bytes())
    doc = json.loads((tmp_path / "manifest.json").read_text())
    doc["schema_version"] = SCHEMA_VERSION + 1
    (tmp_path / "manifest.json").write_text(json.dumps(doc))
    refused = f"require({json.dumps(str(dist))}).manifest({json.dumps(str(tmp_path))})"
    out = subprocess.run([NODE, "-e", refused], capture_output=True, text=True, timeout=30)
    assert out.returncode != 0 and f"schema version {SCHEMA_VERSION + 1}" in out.stderr
