"""The README Quickstart's shell block ("### Producing") runs as written, in
bash, against a real Redis -- and does what it says: the worker it starts
(``--import taskscale.examples``) runs the ``sleep`` tasks it enqueues.

Before issue 26 the block enqueued ``sleep`` tasks with no worker that
serves them: they waited forever.  The block leaves its worker running in
the background, as a reader's shell would; the test stops it by its pid.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import redis

from support.docs import readme_block
from support.workers import NAMESPACE
from taskscale.keys import Keys

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def _completed(r: redis.Redis, keys: Keys) -> int:
    stats = r.hgetall(keys.stats("sleep"))
    return int(stats.get(b"completed", 0))


def test_the_quickstart_shell_block_runs_and_its_tasks_complete(redis_url: str) -> None:
    block = readme_block("### Producing")
    assert "--import taskscale.examples" in block and "taskscale enqueue sleep" in block
    env = {
        **os.environ,
        "TASKSCALE_REDIS_URL": redis_url,
        "TASKSCALE_NAMESPACE": NAMESPACE,
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
    }
    # $! after the block: the worker it left in the background
    script = f'{block}\necho "worker-pid $!"\n'
    r = redis.Redis.from_url(redis_url)
    with tempfile.TemporaryFile() as out:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, timeout=60, check=False,
        )  # fmt: skip
        out.seek(0)
        text = out.read().decode()
        pid = int(text.rsplit("worker-pid ", 1)[1].split()[0])
        try:
            assert done.returncode == 0, text
            assert "Traceback" not in text, text
            deadline = time.monotonic() + 40
            while _completed(r, Keys(NAMESPACE)) < 100 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert _completed(r, Keys(NAMESPACE)) >= 100, text
        finally:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 20
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
            r.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (its parent, bash, is gone: init reaps it) counts as gone
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"
