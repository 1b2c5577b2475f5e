"""``taskscale scripts export DIR``: the scripts work as exported, from any language.

Another language loads the exported files with ``SCRIPT LOAD`` and calls
them with ``EVALSHA`` in the KEYS / ARGV order of ``manifest.json``.  These
tests do exactly that with no Python loader: every SHA in the manifest is
the one Redis returns, and a task goes enqueue -> claim -> complete (and
fail -> retry -> dead letter) through plain EVALSHA of the exported files,
its keys built from the manifest's key shapes.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
import redis

from taskscale.cli import main
from taskscale.contract import MANIFEST, SCHEMA_VERSION, export
from taskscale.luascripts import SCRIPT_NAMES, script_source
from taskscale.script_headers import script_names

NS = "{rt}"
W = "w-ts"


@pytest.fixture
def exported(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    assert main(["scripts", "export", str(tmp_path / "out")]) == 0
    out = tmp_path / "out"
    return out, json.loads((out / MANIFEST).read_text(encoding="utf-8"))


def test_the_export_writes_every_script_expanded_and_a_manifest(
    exported: tuple[Path, dict[str, Any]],
) -> None:
    out, manifest = exported
    assert manifest["schema_version"] == SCHEMA_VERSION
    names = [s["name"] for s in manifest["scripts"]]
    assert names == list(script_names())
    assert set(SCRIPT_NAMES) <= set(names)
    for entry in manifest["scripts"]:
        text = (out / entry["file"]).read_bytes()
        assert not re.search(rb"^--! include ", text, re.M), entry["file"]
        assert text.decode() == script_source(entry["name"])
        assert entry["sha1"] == hashlib.sha1(text).hexdigest()
        assert entry["keys"] and entry["returns"], entry["name"]


def test_an_export_over_an_earlier_one_replaces_its_files(tmp_path: Path) -> None:
    (tmp_path / "enqueue.lua").write_text("return 'stale'")
    export(tmp_path)
    assert (tmp_path / "enqueue.lua").read_text() == script_source("enqueue")


@pytest.mark.integration
def test_every_manifest_sha_is_what_script_load_returns(
    r: redis.Redis, exported: tuple[Path, dict[str, Any]]
) -> None:
    out, manifest = exported
    for entry in manifest["scripts"]:
        assert r.script_load((out / entry["file"]).read_text(encoding="utf-8")) == entry["sha1"]


@pytest.mark.integration
def test_noscript_then_script_load_is_the_recipe(
    r: redis.Redis, exported: tuple[Path, dict[str, Any]]
) -> None:
    out, manifest = exported
    entry = _entry(manifest, "heartbeat")
    r.script_flush()
    with pytest.raises(redis.exceptions.NoScriptError):
        r.evalsha(entry["sha1"], 2, *_keys(entry), W, 10_000)
    r.script_load((out / entry["file"]).read_text(encoding="utf-8"))
    assert int(r.evalsha(entry["sha1"], 2, *_keys(entry), W, 10_000, "id", W)) > 0


def _entry(manifest: dict[str, Any], name: str) -> dict[str, Any]:
    (entry,) = [s for s in manifest["scripts"] if s["name"] == name]
    return entry


def _keys(entry: dict[str, Any], **parts: str) -> list[str]:
    """The script's fixed KEYS from the manifest's shapes: ``{ns}`` and the
    one-letter placeholders (W, T, P, F) filled in."""
    parts = {"W": W, **parts}
    keys = []
    for slot in entry["keys"]:
        assert slot["key"], (entry["name"], slot)
        segments = slot["key"].replace("{ns}", NS, 1).split(":")
        keys.append(":".join(parts.get(s, s) for s in segments))
    return keys


class Plain:
    """A client of the exported scripts that knows only the manifest."""

    def __init__(self, r: redis.Redis, out: Path, manifest: dict[str, Any]) -> None:
        self.r, self.manifest = r, manifest
        for entry in manifest["scripts"]:
            r.script_load((out / entry["file"]).read_text(encoding="utf-8"))

    def call(self, name: str, *argv: Any, **parts: str) -> Any:
        entry = _entry(self.manifest, name)
        keys = _keys(entry, **parts)
        return self.r.evalsha(entry["sha1"], len(keys), *keys, *argv)


def _envelope(task_id: str, **extra: Any) -> str:
    return json.dumps(
        {"id": task_id, "type": "echo", "args": ["hi"], "kwargs": {}, "priority": 5, **extra}
    )


def _claim(plain: Plain) -> list[Any]:
    reply = plain.call("claim", f"{NS}:", W, 1, 0, "echo")
    assert reply[0] == b"ok", reply
    return reply


@pytest.mark.integration
def test_a_task_round_trips_through_plain_evalsha_of_the_exported_files(
    r: redis.Redis, exported: tuple[Path, dict[str, Any]]
) -> None:
    plain = Plain(r, *exported)
    reply_key = f"{NS}:reply:t1"
    assert plain.call("enqueue", f"{NS}:", "echo", 0, 0, _envelope("t1", reply_to=reply_key)) == [1]
    assert r.llen(f"{NS}:q:echo:5") == 1
    plain.call("heartbeat", W, 10_000, "id", W)

    reply = _claim(plain)
    assert reply[3:5] == [b"echo", b"t1"]
    assert isinstance(json.loads(reply[5])["enqueued_ms"], int)
    assert r.hget(f"{NS}:ACTIVE_TASKS", "echo") == b"1"

    result = json.dumps({"id": "t1", "ok": True, "result": ["hi"]})
    done = plain.call("complete", f"{NS}:", 1, "t1", "echo", 3, reply_key, 60, result, "")
    assert done == 1
    assert r.hget(f"{NS}:ACTIVE_TASKS", "echo") == b"0"
    assert r.hlen(f"{NS}:inflight:{W}") == 0
    assert json.loads(r.lpop(reply_key)) == {"id": "t1", "ok": True, "result": ["hi"]}  # type: ignore[arg-type]
    assert r.hget(f"{NS}:stats:echo", "completed") == b"1"
    assert r.hexists(f"{NS}:IDLE_SINCE", "echo")


@pytest.mark.integration
def test_a_failing_task_is_retried_then_dead_lettered_through_plain_evalsha(
    r: redis.Redis, exported: tuple[Path, dict[str, Any]]
) -> None:
    plain = Plain(r, *exported)
    plain.call("enqueue", f"{NS}:", "echo", 0, 0, _envelope("t2", max_retries=1))
    plain.call("heartbeat", W, 10_000, "id", W)
    envelope = json.loads(_claim(plain)[5])

    # the worker decides: attempts 0 < max_retries 1, so retry with attempts + 1
    retry = json.dumps({**envelope, "attempts": 1})
    assert plain.call("fail", f"{NS}:", "t2", "echo", 4, "retry", 0, retry) == 1
    assert r.hget(f"{NS}:ACTIVE_TASKS", "echo") == b"0"
    assert r.zcard(f"{NS}:delayed:echo") == 1
    promoted = plain.call("promote", f"{NS}:", 100)
    assert promoted[0] == 1

    again = json.loads(_claim(plain)[5])
    assert again["attempts"] == 1
    error = json.dumps({"id": "t2", "ok": False, "error_type": "ValueError", "error": "no"})
    dead = plain.call(
        "fail", f"{NS}:", "t2", "echo", 4, "dead", 0, "ValueError: no", "", 60, error, "", 0
    )
    assert dead == 1
    (record,) = r.lrange(f"{NS}:dead:echo", 0, -1)
    assert json.loads(record)["error"] == "ValueError: no"
    assert r.hget(f"{NS}:stats:echo", "dead") == b"1"
    assert r.hget(f"{NS}:ACTIVE_TASKS", "echo") == b"0"


@pytest.mark.integration
def test_an_invalid_envelope_gets_the_error_text_the_manifest_lists(
    r: redis.Redis, exported: tuple[Path, dict[str, Any]]
) -> None:
    plain = Plain(r, *exported)
    listed = _entry(exported[1], "enqueue")["errors"]
    assert "invalid envelope #<i>: not a JSON object" in listed
    with pytest.raises(redis.ResponseError) as caught:
        plain.call("enqueue", f"{NS}:", "echo", 0, 0, _envelope("ok"), "not json")
    assert str(caught.value) == "invalid envelope #2: not a JSON object"
    assert r.llen(f"{NS}:q:echo:5") == 0
