"""A trace from a Python producer through a real worker, a retry, sub-tasks
and an RPC reply arrives in a real Jaeger connected: one trace id, every
span under the right parent, the retry linked to its first attempt -- for
every one of the test's traces (issue 24).  The worker and the scheduler are
subprocesses configured only by the standard OTEL_* variables."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from support.jaeger import Jaeger, jaeger_binary
from support.waiting import wait_until
from support.workers import processes, start, start_worker
from taskscale import tracing
from taskscale.keys import Keys
from taskscale.rpc import call

pytestmark = pytest.mark.integration

KEYS = Keys("taskscale")
CALLS = 3
#: Spans of one call's trace: the test's root, call, send, 2 x (wait, process)
#: of the flaky task, its 2 sends (one task, a fan-out of 2), 3 x (wait, process).
SPANS_PER_TRACE = 15


@pytest.fixture(scope="module")
def jaeger() -> Iterator[Jaeger]:
    binary = jaeger_binary()
    if binary is None:
        pytest.skip("Jaeger is not built: bash scripts/build-jaeger.sh (scripts/setup.sh runs it)")
    with Jaeger(binary) as server:
        yield server


@pytest.fixture
def tracer(jaeger: Jaeger) -> Iterator[Any]:
    """This process traced into Jaeger (the producer and the RPC caller)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "ts-test"}))
    exporter = OTLPSpanExporter(endpoint=jaeger.otlp_url + "/v1/traces")
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.reset(tracing.Tracing(provider.get_tracer("tests")))
    try:
        yield provider.get_tracer("tests")
    finally:
        tracing.reset()
        provider.shutdown()


def otel_env(jaeger: Jaeger, service: str) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp_url,
        "OTEL_SERVICE_NAME": service,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }


def tags(span: dict[str, Any]) -> dict[str, Any]:
    return {tag["key"]: tag["value"] for tag in span["tags"]}


def refs(span: dict[str, Any], kind: str) -> list[str]:
    return [ref["spanID"] for ref in span["references"] if ref["refType"] == kind]


def parent(span: dict[str, Any]) -> str | None:
    found = refs(span, "CHILD_OF")
    assert len(found) <= 1, span
    return found[0] if found else None


def test_each_call_arrives_as_one_connected_trace(
    jaeger: Jaeger, redis_url: str, r: redis.Redis, tracer: Any
) -> None:
    tag = uuid.uuid4().hex[:8]
    worker = start_worker(
        redis_url,
        types="tracing.flaky,tracing.leaf",
        imports=("tracing_tasks",),
        env=otel_env(jaeger, f"ts-worker-{tag}"),
    )
    scheduler = start(
        redis_url,
        ["scheduler", "--max-sleep", "0.2", "--log-level", "WARNING"],
        env=otel_env(jaeger, f"ts-scheduler-{tag}"),
    )
    trace_ids: list[str] = []
    with processes(worker, scheduler):
        for n in range(CALLS):
            with tracer.start_as_current_span("test call") as root:
                assert call(r, "tracing.flaky", n, keys=KEYS, timeout=30) == {"n": n, "attempt": 2}
            trace_ids.append(format(root.get_span_context().trace_id, "032x"))
        for trace_id in trace_ids:
            wait_until(
                lambda t=trace_id: len(jaeger.trace(t)) >= SPANS_PER_TRACE,  # type: ignore[misc]
                what=f"the {SPANS_PER_TRACE} spans of trace {trace_id} in Jaeger",
            )
        promotions = wait_until(
            lambda: jaeger.traces(f"ts-scheduler-{tag}"), what="the scheduler's promote spans"
        )
    for trace_id in trace_ids:
        check_connected(jaeger.trace(trace_id), trace_id, f"ts-worker-{tag}")
    promote = [s for t in promotions for s in t if s["operationName"] == "promote"]
    assert promote and all(tags(s)["messaging.batch.message_count"] >= 1 for s in promote)


def check_connected(spans: list[dict[str, Any]], trace_id: str, worker_service: str) -> None:
    assert len(spans) == SPANS_PER_TRACE, sorted(s["operationName"] for s in spans)
    assert {s["traceID"] for s in spans} == {trace_id}
    assert {ref["traceID"] for s in spans for ref in s["references"]} <= {trace_id}
    by_name: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        by_name.setdefault(span["operationName"], []).append(span)
    ids = {s["spanID"] for s in spans}
    assert all(parent(s) in ids for s in spans if s["operationName"] != "test call")

    (root,) = by_name["test call"]
    (rpc,) = by_name["call tracing.flaky"]
    (send,) = by_name["send tracing.flaky"]
    assert parent(root) is None and parent(rpc) == root["spanID"] and parent(send) == rpc["spanID"]
    assert tags(send)["messaging.destination.name"] == "tracing.flaky"

    runs = sorted(by_name["process tracing.flaky"], key=lambda s: tags(s)["taskscale.task.attempt"])
    waits = by_name["wait tracing.flaky"]
    assert len(runs) == 2 and len(waits) == 2
    assert all(parent(s) == send["spanID"] for s in runs + waits)
    assert all(s["serviceName"] == worker_service for s in runs + waits)
    first, second = runs
    assert [tags(first)["taskscale.task.outcome"], tags(second)["taskscale.task.outcome"]] == [
        "retry",
        "ok",
    ]
    assert tags(first)["taskscale.worker.id"] and tags(first)["messaging.message.id"]
    assert refs(second, "FOLLOWS_FROM") == [first["spanID"]]  # the retry's link
    assert refs(first, "FOLLOWS_FROM") == []

    sends = by_name["send tracing.leaf"]
    assert len(sends) == 2 and all(parent(s) == second["spanID"] for s in sends)
    assert sorted(tags(s).get("messaging.batch.message_count", 1) for s in sends) == [1, 2]
    send_ids = {s["spanID"] for s in sends}
    leaves = by_name["process tracing.leaf"] + by_name["wait tracing.leaf"]
    assert len(leaves) == 6 and all(parent(s) in send_ids for s in leaves)
