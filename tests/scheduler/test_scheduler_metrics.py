"""The scheduler's /metrics, /healthz and /readyz (``taskscale scheduler --metrics-port``)."""

from __future__ import annotations

import signal
import urllib.error
import urllib.request

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from support.redis_server import free_port
from support.waiting import wait_until
from support.workers import running_scheduler, taskscale_process
from taskscale.keys import Keys
from taskscale.luascripts import scripts_for
from taskscale.producer import Producer
from taskscale.scheduling.scheduler_metrics import SchedulerMetrics

pytestmark = pytest.mark.integration


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def samples(port: int) -> dict[str, float]:
    code, text = get(port, "/metrics")
    assert code == 200
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if not s.labels or s.name == "taskscale_build_info":
                key = s.name if not s.labels else f"{s.name}{sorted(s.labels.items())}"
                out[key] = s.value
    return out


def test_metrics_count_promotions_reaps_and_heartbeats(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    scripts = scripts_for(r)
    scripts.heartbeat(keys=[keys.workers, keys.worker("gone")], args=["gone", 300], client=r)
    producer.enqueue("a")
    scripts.claim(
        keys=[keys.active, keys.workers, keys.inflight("gone")],
        args=[keys.prefix, "gone", 1, 0, "a"],
        client=r,
    )
    for _ in range(3):
        producer.enqueue("b", delay=0.2)
    metrics = SchedulerMetrics(lease_s=0.4)
    server = metrics.serve(port=0, host="127.0.0.1")
    assert get(server.port, "/readyz")[0] == 503  # no heartbeat yet
    try:
        with running_scheduler(redis_url, keys=keys, metrics=metrics, lease_s=0.4):
            wait_until(
                lambda: samples(server.port).get("taskscale_scheduler_promoted_tasks_total") == 3,
                timeout=10,
            )
            wait_until(
                lambda: samples(server.port).get("taskscale_scheduler_reaped_tasks_total") == 1,
                timeout=10,
            )
            seen = samples(server.port)
            assert seen["taskscale_scheduler_reaped_workers_total"] == 1
            assert seen["taskscale_scheduler_promote_lateness_seconds_count"] >= 1
            assert seen["taskscale_scheduler_alive_schedulers"] == 1
            assert seen["taskscale_scheduler_heartbeat_timestamp_seconds"] > 1.7e9
            assert seen["taskscale_scheduler_redis_errors_total"] == 0
            assert get(server.port, "/healthz")[0] == 200
            assert get(server.port, "/readyz")[0] == 200
    finally:
        server.stop()
    assert r.llen(keys.queue("b")) == 3 and r.llen(keys.queue("a")) == 1


def test_cli_scheduler_serves_metrics_with_its_build_info(redis_url: str) -> None:
    port = free_port()
    proc = taskscale_process(redis_url, "scheduler", "--metrics-port", str(port))
    try:
        wait_until(lambda: get(port, "/readyz")[0] == 200, timeout=20)
        code, text = get(port, "/metrics")
        assert code == 200
        assert 'component="scheduler"' in text and "process_cpu_seconds_total" in text
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
