"""``taskscale workflow show|cancel ID [--json]`` from the command line."""

from __future__ import annotations

import json

import pytest
import redis

from support.scripts import W, claim, heartbeat
from support.workers import run_taskscale
from taskscale.keys import Keys
from taskscale.luascripts import scripts_for
from taskscale.workflows import chain, group, read, step

pytestmark = pytest.mark.integration

KEYS = Keys("taskscale")


def test_show_lists_the_steps_and_cancel_ends_it(redis_url: str, r: redis.Redis) -> None:
    wf = chain(step("fetch", "u"), group("a", "b")).enqueue(name="nightly", client=r, keys=KEYS)
    heartbeat(r, KEYS)
    (fetch,) = claim(r, KEYS, 1, "fetch")
    reply = '{"id":"' + fetch["id"] + '","ok":true,"result":{"pages":3}}'
    scripts_for(r).complete(
        keys=[KEYS.active, KEYS.idle_since, KEYS.inflight(W)],
        args=[KEYS.prefix, 1, fetch["id"], "fetch", 5, "", 60, reply, ""],
        client=r,
    )
    shown = run_taskscale(redis_url, "workflow", "show", wf)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith(f"workflow {wf} (nightly): running; 1/3 steps final, 0 failed")
    assert lines[1].startswith("  s0     fetch: succeeded") and lines[1].endswith('{"pages":3}')
    assert lines[2] == "  s1     a after s0: ready"

    as_json = json.loads(run_taskscale(redis_url, "workflow", "show", wf, "--json").stdout)
    assert as_json["state"] == "running" and as_json["steps"][0]["result"] == {"pages": 3}
    assert [s["state"] for s in as_json["steps"]] == ["succeeded", "ready", "ready"]

    stopped = run_taskscale(redis_url, "workflow", "cancel", wf, "--json")
    assert json.loads(stopped.stdout) == {"id": wf, "outcome": "ended", "state": "cancelled"}
    again = run_taskscale(redis_url, "workflow", "cancel", wf)
    assert again.stdout.strip() == f"workflow {wf}: already cancelled"
    got = read(wf, client=r, keys=KEYS)
    assert got is not None and got.reason == "cancelled from the command line"


@pytest.mark.parametrize("action", ["show", "cancel"])
def test_an_unknown_or_malformed_id(redis_url: str, action: str) -> None:
    unknown = run_taskscale(redis_url, "workflow", action, "nope")
    assert unknown.returncode == 3
    assert unknown.stdout.strip() == "workflow nope: unknown (never submitted, or expired)"
    bad = run_taskscale(redis_url, "workflow", action, "a b")
    assert bad.returncode != 0 and "invalid workflow id" in bad.stderr + bad.stdout
    assert "Traceback" not in bad.stderr
