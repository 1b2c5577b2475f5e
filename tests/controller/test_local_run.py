"""The one-VM setup (taskscale.controller.local_run.run_local), with real
processes: a SIGTERM to the process running it stops every worker it started
-- no child is left running, a busy one finishes its task first -- and while
it runs, the pool is on the console's Scaling page (the reader the page uses).

Before issue 26 the documented setup ran ``reconciler.run()`` with no
handler: SIGTERM ended the process at once and its workers, in sessions of
their own, went on as orphans.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import redis

from support.waiting import wait_until
from support.workers import NAMESPACE, process_env
from taskscale.keys import Keys
from taskscale.producer import Producer
from taskscale.scaling import read_scalers

pytestmark = pytest.mark.integration

SCRIPT = textwrap.dedent(
    """
    import sys
    from taskscale.controller.local import LocalPoolSettings
    from taskscale.controller.local_run import LocalScaler, run_local
    from taskscale.controller.types import ScalingPolicy, TypePolicy

    pool = LocalPoolSettings(types=("sleep",), redis_url=sys.argv[1], namespace=sys.argv[2],
                             threads=2, imports=("taskscale.examples",),
                             extra_args=("--grace", "20", "--heartbeat", "1"))
    policy = ScalingPolicy(types=(TypePolicy("sleep", idle_threshold_s=300),),
                           tasks_per_replica=2, min_replicas=2, max_replicas=2)
    run_local(LocalScaler(pool, policy, name="vm", poll_interval_s=0.5))
    """
)


def children(pid: int) -> set[int]:
    """Live processes whose parent is ``pid``."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(stat.parent.name))
    return found


def two(found: set[int]) -> set[int] | None:
    return found if len(found) == 2 else None


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_sigterm_stops_every_worker_and_the_pool_is_on_the_scaling_page(
    redis_url: str, tmp_path: Path
) -> None:
    script = tmp_path / "one_vm.py"
    script.write_text(SCRIPT)
    r = redis.Redis.from_url(redis_url)
    keys = Keys(NAMESPACE)
    log = (tmp_path / "one_vm.log").open("wb")  # not a pipe: the workers inherit it
    proc = subprocess.Popen(
        [sys.executable, str(script), redis_url, NAMESPACE],
        env=process_env(redis_url),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    workers: set[int] = set()
    try:
        workers = wait_until(lambda: two(children(proc.pid)), timeout=30, what="two workers")
        wait_until(lambda: r.zcard(keys.workers) == 2, timeout=30, what="two workers registered")
        # on the Scaling page: the page's own reader finds the pool, sized as it is
        page = wait_until(
            lambda: (
                [
                    s
                    for s in read_scalers(r, keys)
                    if s["scaler"] == "local/vm" and s["current"] == 2
                ]
                or None
            ),
            timeout=20,
            what="the pool on the Scaling page at its two workers",
        )
        assert page[0]["current"] == 2 and page[0]["types"] == ["sleep"], page
        # a task that is running when the SIGTERM comes is finished, not lost
        Producer(r, keys=keys).enqueue("sleep", seconds=2.0)
        wait_until(lambda: int(r.hget(keys.active, "sleep") or 0) == 1, what="the task running")
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=40)
        err = (tmp_path / "one_vm.log").read_text()
        assert code == 0, err
        assert "Traceback" not in err, err
        left = {pid for pid in workers if alive(pid)}
        assert left == set(), f"workers left running after SIGTERM: {left}"
        assert int(r.hget(keys.stats("sleep"), "completed") or 0) == 1
    finally:
        for pid in workers:
            if alive(pid):
                subprocess.run(["kill", "-9", str(pid)], check=False)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
        r.close()


def test_the_documented_one_vm_setup_uses_run_local() -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs" / "operating.md").read_text()
    section = guide[guide.index("## Without Kubernetes: one VM") :]
    section = section[: section.index("\n## ", 10)]
    assert "run_local(" in section and "reconciler.run()" not in section


def test_a_stop_event_ends_it_from_another_thread(redis_url: str) -> None:
    import threading

    from taskscale.controller.local import LocalPoolSettings
    from taskscale.controller.local_run import LocalScaler, run_local
    from taskscale.controller.types import ScalingPolicy, TypePolicy

    scaler = LocalScaler(
        LocalPoolSettings(types=("sleep",), redis_url=redis_url, namespace=NAMESPACE),
        ScalingPolicy(types=(TypePolicy("sleep"),), max_replicas=1),
        name="thread",
    )
    stop = threading.Event()
    runner = threading.Thread(target=run_local, args=(scaler,), kwargs={"stop": stop})
    started = time.monotonic()
    runner.start()
    r = redis.Redis.from_url(redis_url)
    try:
        wait_until(
            lambda: any(s["scaler"] == "local/thread" for s in read_scalers(r, Keys(NAMESPACE))),
            timeout=20,
            what="a first pass recorded",
        )
    finally:
        stop.set()
        runner.join(30)
        r.close()
    assert not runner.is_alive()
    assert time.monotonic() - started < 30
