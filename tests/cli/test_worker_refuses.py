"""A worker whose --types name a type with no registered function refuses to
start: exit 2 and one line naming the types and the modules it imported,
before it claims anything -- a pod's configuration mistake (a typo, a
forgotten --import) must never dead-letter tasks (issue 21, case 8)."""

from __future__ import annotations

import pytest
import redis

from support.workers import run_taskscale
from taskscale.keys import Keys
from taskscale.producer import Producer

pytestmark = pytest.mark.integration


EXAMPLES = "taskscale.examples"


@pytest.mark.parametrize(
    ("argv", "named", "imported"),
    [
        (["--types", "render"], "render", "none"),  # no --import at all
        (["--import", EXAMPLES, "--types", "sleep,slep"], "slep", EXAMPLES),  # a typo
        (["--import", EXAMPLES, "--types", "slep", "--processes", "2"], "slep", EXAMPLES),
    ],
)
def test_a_type_without_a_function_is_refused_and_its_tasks_stay_queued(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer,
    argv: list[str], named: str, imported: str,
) -> None:  # fmt: skip
    producer.enqueue(named, 1)
    done = run_taskscale(redis_url, "worker", *argv, "--idle-wait", "0.2", timeout=60)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"taskscale worker: no function registered for {named} ")
    assert f"(modules imported: {imported})" in lines[0]
    assert r.llen(keys.queue(named)) == 1  # untouched: not claimed, not dead-lettered
    assert r.llen(keys.dead(named)) == 0
    assert r.zcard(keys.workers) == 0  # it never registered
