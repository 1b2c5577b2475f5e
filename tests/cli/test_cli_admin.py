"""``taskscale dead|delayed|queue|task|types`` from the command line."""

from __future__ import annotations

import json
import subprocess

import pytest
import redis

from support.workers import run_taskscale
from taskscale.keys import Keys
from taskscale.producer import Producer

pytestmark = pytest.mark.integration


def run(
    url: str, *argv: str, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return run_taskscale(url, *argv, env=extra_env)


def make_dead(r: redis.Redis, keys: Keys, n: int) -> list[str]:
    """n dead letters of type t, written as fail.lua writes them."""
    ids = []
    for i in range(n):
        task_id = f"id{i}"
        env = json.dumps({"id": task_id, "type": "t", "args": [i], "kwargs": {}, "attempts": 3})
        rec = {
            "envelope": env,
            "error": f"RuntimeError: boom {i}",
            "failed_ms": 1,
            "traceback": "x",
        }
        r.rpush(keys.dead("t"), json.dumps(rec))
        ids.append(task_id)
    return ids


def test_dead_list_requeue_and_purge(redis_url: str, r: redis.Redis) -> None:
    keys = Keys("taskscale")
    make_dead(r, keys, 3)
    listed = run(redis_url, "dead", "list", "t", "--json")
    assert listed.returncode == 0, listed.stderr
    docs = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [d["task_id"] for d in docs] == ["id0", "id1", "id2"]
    assert "boom 1" in run(redis_url, "dead", "list", "t").stdout
    done = run(redis_url, "dead", "requeue", "t", "--id", "id1")
    assert done.returncode == 0 and "requeued 1" in done.stdout
    assert json.loads(r.lindex(keys.queue("t"), 0) or b"{}")["id"] == "id1"
    missing = run(redis_url, "dead", "purge", "t", "--id", "nope", "--yes")
    assert missing.returncode == 1 and "not among" in missing.stdout
    assert "purged 2" in run(redis_url, "dead", "purge", "t", "--yes").stdout
    assert r.llen(keys.dead("t")) == 0


def test_task_lookup_and_queue_purge(redis_url: str, r: redis.Redis) -> None:
    keys = Keys("taskscale")
    producer = Producer(r, keys=keys)
    task_id = producer.enqueue("t", 1)
    found = run(redis_url, "task", task_id)
    assert found.returncode == 0 and "queued at priority 5" in found.stdout
    assert json.loads(run(redis_url, "task", task_id, "--json").stdout)["state"] == "queued"
    assert "purged 1 ready" in run(redis_url, "queue", "purge", "t", "--yes").stdout
    gone = run(redis_url, "task", task_id)
    assert gone.returncode == 3 and "never enqueued" in gone.stdout


def test_delayed_run_and_types_forget(redis_url: str, r: redis.Redis) -> None:
    keys = Keys("taskscale")
    producer = Producer(r, keys=keys)
    later = producer.enqueue("t", 1, delay=3600)
    assert later in run(redis_url, "delayed", "list", "t").stdout
    refused = run(redis_url, "types", "forget", "t")
    assert refused.returncode == 2 and "--force deletes them" in refused.stderr
    assert run(redis_url, "delayed", "run", "t", later).returncode == 0
    assert r.llen(keys.queue("t")) == 1
    assert run(redis_url, "types", "forget", "t", "--force", "--yes").returncode == 0
    assert not r.sismember(keys.types, "t") and r.llen(keys.queue("t")) == 0


def test_destructive_flags_are_never_taken_from_the_environment(
    redis_url: str, r: redis.Redis
) -> None:
    """Every other option may come from TASKSCALE_<OPTION> (here the URL and
    namespace do); an exported TASKSCALE_FORCE=1 or TASKSCALE_DELAYED=1 must
    not turn an ordinary command into a wider deletion."""
    keys = Keys("taskscale")
    producer = Producer(r, keys=keys)
    producer.enqueue("t", 1)
    producer.enqueue("t", 2, delay=3600)
    exported = {"TASKSCALE_FORCE": "1", "TASKSCALE_DELAYED": "1"}

    refused = run(redis_url, "types", "forget", "t", extra_env=exported)
    assert refused.returncode == 2 and "--force deletes them" in refused.stderr
    assert r.sismember(keys.types, "t")
    purged = run(redis_url, "queue", "purge", "t", "--yes", extra_env=exported)
    assert purged.returncode == 0 and "purged 1 ready task(s)" in purged.stdout
    assert r.zcard(keys.delayed("t")) == 1  # the delayed task is kept

    # on the command line they still act
    assert (
        run(redis_url, "types", "forget", "t", "--force", "--yes", extra_env=exported).returncode
        == 0
    )
    assert not r.sismember(keys.types, "t") and r.zcard(keys.delayed("t")) == 0
