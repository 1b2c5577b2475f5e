"""``taskscale worker --processes P``: a supervisor of P real worker processes.

Every test runs the real command against a real redis-server, with tasks
(tests/worker/gate_tasks.py) that hold their thread until the test opens a
gate, so what is running when a process is killed or signalled is known
exactly.  No scheduler runs: a dead child's tasks can only come back through
the supervisor.
"""

from __future__ import annotations

import os
import signal
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from gate_tasks import FINISHED, GATE, STARTED

from support.redis_server import free_port
from support.waiting import wait_until
from support.workers import taskscale_process, worker_argv
from taskscale.controller.observer import Observer, ObserveRequest
from taskscale.controller.types import busy_by_pod
from taskscale.keys import Keys
from taskscale.producer import Call, Producer
from taskscale.status import collect, render

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WAIT_S = 30.0


class Pod:
    """A supervisor process and every child pid it was seen with (for cleanup)."""

    def __init__(self, url: str, log: Path, *extra: str) -> None:
        self.log = log
        with open(log, "wb") as out:
            argv = worker_argv(
                "gated", "gate_tasks", threads=2, lease=5, heartbeat=0.3, idle_wait=0.5, grace=30
            )
            self.proc = taskscale_process(url, *argv, *extra, stderr=out)
        self.seen: set[int] = set()

    def children(self, r: redis.Redis, keys: Keys) -> dict[str, dict[str, str]]:
        """Registered workers: id -> registry record."""
        out = {}
        for raw in r.zrange(keys.workers, 0, -1):
            wid = raw.decode()
            record = {k.decode(): v.decode() for k, v in r.hgetall(keys.worker(wid)).items()}
            if record:
                out[wid] = record
                self.seen.add(int(record["pid"]))
        return out

    def kill_all(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        for pid in self.seen:
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"taskscale.cli" in cmdline:
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def pods(tmp_path: Path) -> Iterator[list[Pod]]:
    started: list[Pod] = []
    yield started
    for pod in started:
        pod.kill_all()


def start(pods: list[Pod], url: str, tmp_path: Path, *extra: str) -> Pod:
    pod = Pod(url, tmp_path / f"pod{len(pods)}.log", *extra)
    pods.append(pod)
    return pod


def count(r: redis.Redis, key: str) -> dict[int, int]:
    return {int(k): int(v) for k, v in r.hgetall(key).items()}


def test_two_processes_register_two_children_of_one_pod_counted_as_one_pod(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer, pods: list[Pod], tmp_path: Path
) -> None:
    producer.enqueue_many("gated", [Call((n,)) for n in range(4)])
    pod = start(pods, redis_url, tmp_path, "--processes=2")

    wait_until(lambda: len(count(r, STARTED)) == 4, timeout=WAIT_S)
    children = pod.children(r, keys)
    assert len(children) == 2
    ids = sorted(children)
    base = ids[0][: -len("-0")]
    assert ids == [f"{base}-0", f"{base}-1"]
    assert len({c["pod"] for c in children.values()}) == 1
    assert len({c["pid"] for c in children.values()} | {str(pod.proc.pid)}) == 3
    # the controller sees one pod running the 4 tasks of both processes
    # (once both heartbeats have carried their busy count)
    observer = Observer(r, keys)

    def per_pod() -> dict[str, int] | None:
        seen = observer.observe({"s": ObserveRequest(("gated",), 0)})["s"].workers
        found = busy_by_pod(seen)
        return found if sum(found.values()) == 4 else None

    assert wait_until(per_pod, timeout=WAIT_S) == {children[ids[0]]["pod"]: 4}
    # taskscale status adds the pod's total to its workers
    lines = render(collect(r, keys)).splitlines()
    assert [children[ids[0]]["pod"], "2", "4/4"] in [line.split() for line in lines]

    r.set(GATE, 1)
    wait_until(lambda: len(count(r, FINISHED)) == 4, timeout=WAIT_S)
    pod.proc.send_signal(signal.SIGTERM)
    assert pod.proc.wait(WAIT_S) == 0
    assert r.zcard(keys.workers) == 0


def test_a_killed_child_is_restarted_and_its_tasks_run_again_exactly_once(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer, pods: list[Pod], tmp_path: Path
) -> None:
    tasks = 10
    ids = producer.enqueue_many("gated", [Call((n,)) for n in range(tasks)])
    pod = start(pods, redis_url, tmp_path, "--processes=2")
    wait_until(lambda: len(count(r, STARTED)) == 4, timeout=WAIT_S)
    children = pod.children(r, keys)
    victim = sorted(children)[0]
    held = {k.decode() for k in r.hkeys(keys.inflight(victim))}
    assert len(held) == 2

    os.kill(int(children[victim]["pid"]), signal.SIGKILL)

    # no scheduler runs and the lease is 5 s: the supervisor gave them back,
    # and a new incarnation registered under a new id
    wait_until(lambda: victim not in pod.children(r, keys), timeout=WAIT_S)
    wait_until(lambda: f"{victim}-r1" in pod.children(r, keys), timeout=WAIT_S)
    numbers = {n for n, tid in enumerate(ids) if tid in held}
    wait_until(lambda: all(count(r, STARTED).get(n) == 2 for n in numbers), timeout=WAIT_S)
    r.set(GATE, 1)
    wait_until(lambda: len(count(r, FINISHED)) == tasks, timeout=WAIT_S)

    assert count(r, FINISHED) == dict.fromkeys(range(tasks), 1)
    wait_until(lambda: int(r.hget(keys.active, "gated") or 0) == 0, timeout=WAIT_S)
    assert int(r.hget(keys.stats("gated"), "completed") or 0) == tasks
    assert int(r.hget(keys.stats("gated"), "requeued") or 0) == 2
    pod.proc.send_signal(signal.SIGTERM)
    assert pod.proc.wait(WAIT_S) == 0
    assert r.zcard(keys.workers) == 0 and not r.keys(keys.inflight("*"))


def test_sigterm_drains_every_child_and_exits_zero(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer, pods: list[Pod], tmp_path: Path
) -> None:
    tasks = 10
    producer.enqueue_many("gated", [Call((n,)) for n in range(tasks)])
    pod = start(pods, redis_url, tmp_path, "--processes=2", "--log-level=info")
    wait_until(lambda: len(count(r, STARTED)) == 4, timeout=WAIT_S)

    pod.proc.send_signal(signal.SIGTERM)
    # both children stopped claiming and wait for their running tasks
    wait_until(lambda: pod.log.read_text().count("stopping; waiting") == 2, timeout=WAIT_S)
    r.set(GATE, 1)

    assert pod.proc.wait(WAIT_S) == 0
    assert count(r, FINISHED) == dict.fromkeys(count(r, STARTED), 1)
    assert len(count(r, FINISHED)) == 4
    assert r.llen(keys.queue("gated")) == tasks - 4
    assert int(r.hget(keys.active, "gated") or 0) == 0
    assert r.zcard(keys.workers) == 0 and not r.keys(keys.inflight("*"))


def test_processes_auto_runs_one_child_per_cpu_of_the_cgroup_limit(
    redis_url: str,
    r: redis.Redis,
    keys: Keys,
    pods: list[Pod],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    (cgroup / "cpu.max").write_text("150000 100000\n")  # 1.5 CPUs: 2 processes
    monkeypatch.setenv("TASKSCALE_CGROUP_ROOT", str(cgroup))
    pod = start(pods, redis_url, tmp_path, "--processes=auto")
    wait_until(lambda: len(pod.children(r, keys)) == 2, timeout=WAIT_S)
    pod.proc.send_signal(signal.SIGTERM)
    assert pod.proc.wait(WAIT_S) == 0
    assert r.zcard(keys.workers) == 0


def two_free_ports() -> int:
    """A port P with P and P + 1 both free on loopback now."""
    for _ in range(50):
        port = free_port()
        if port < 65535:
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
            return port
    raise AssertionError("no two consecutive free ports")


def http_status(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def test_child_i_serves_its_metrics_and_probes_on_the_port_plus_i(
    redis_url: str, r: redis.Redis, keys: Keys, pods: list[Pod], tmp_path: Path
) -> None:
    port = two_free_ports()
    pod = start(pods, redis_url, tmp_path, "--processes=2", f"--metrics-port={port}")
    for each in (port, port + 1):
        wait_until(lambda p=each: http_status(p, "/readyz") == 200, timeout=WAIT_S)
        assert http_status(each, "/metrics") == 200
    assert len(pod.children(r, keys)) == 2
    pod.proc.send_signal(signal.SIGTERM)
    assert pod.proc.wait(WAIT_S) == 0
