"""Tracing without a backend: when it is on, what the envelope carries and
which spans a producer and an in-process worker record (an in-memory
exporter); malformed trace fields are ignored, never an error; off adds
nothing to the envelope (issue 24)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from support.waiting import wait_until
from support.workers import running_worker
from taskscale import tracing
from taskscale.keys import Keys
from taskscale.producer import Producer

KEYS = Keys("taskscale")
VALID = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.mark.parametrize(
    ("environ", "on"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "x"}, False),  # naming a service asks for nothing
        ({"TASKSCALE_TRACING": "1"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://h:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://h"}, False),
        ({"TASKSCALE_TRACING": "0", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://h"}, False),
    ],
)
def test_tracing_is_on_only_when_asked(environ: dict[str, str], on: bool) -> None:
    assert tracing.wanted(environ) is on


@pytest.mark.parametrize(
    "value",
    [
        None,
        42,
        "",
        "garbage",
        VALID + "-",  # 56 characters, well-formed otherwise
        VALID.upper(),
        VALID.replace("0af7", "0ag7"),
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333-01",  # a short span id
        VALID + "1",  # 3 flag digits
        VALID[:36] + VALID[36:].upper(),  # upper-case span id
        VALID + "\n",
        VALID.replace("-", "_", 1),
    ],
)
def test_a_malformed_traceparent_is_ignored(value: object) -> None:
    assert not tracing.valid_traceparent(value)
    assert tracing.carrier({"traceparent": value, "tracestate": "a=b"}) == {}


def test_a_valid_traceparent_and_a_bounded_tracestate_are_carried() -> None:
    assert tracing.carrier({"traceparent": VALID, "tracestate": "a=b"}) == {
        "traceparent": VALID,
        "tracestate": "a=b",
    }
    long_state = "a=" + "b" * 511
    assert tracing.carrier({"traceparent": VALID, "tracestate": long_state}) == {
        "traceparent": VALID
    }


@pytest.fixture
def spans() -> Iterator[Any]:
    """This process traced into memory; yields the exporter."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.reset(tracing.Tracing(provider.get_tracer("tests")))
    try:
        yield exporter
    finally:
        tracing.reset()
        provider.shutdown()


def queued(r: redis.Redis, task_type: str) -> dict[str, Any]:
    raw = r.lindex(KEYS.queue(task_type), 0)
    assert raw is not None
    doc: dict[str, Any] = json.loads(raw)
    return doc


@pytest.mark.integration
def test_off_adds_no_trace_field(
    r: redis.Redis, producer: Producer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("TASKSCALE_TRACING", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    tracing.reset()
    assert tracing.current() is None
    producer.enqueue("echo", 1)
    assert not {"traceparent", "tracestate", "tracefirst"} & set(queued(r, "echo"))


@pytest.mark.integration
def test_the_envelope_carries_the_send_span_and_a_callers_own_context_wins(
    r: redis.Redis, producer: Producer, spans: Any
) -> None:
    task_id = producer.enqueue("echo", 1)
    (send,) = spans.get_finished_spans()
    assert send.name == "send echo" and send.attributes["messaging.message.id"] == task_id
    context = send.get_span_context()
    expected = f"00-{context.trace_id:032x}-{context.span_id:016x}-"
    sent = queued(r, "echo")["traceparent"]
    assert sent.startswith(expected) and int(sent[-2:], 16) & 1  # sampled
    r.delete(KEYS.queue("echo"))
    producer.enqueue("echo", 2, extra={"traceparent": VALID})
    assert queued(r, "echo")["traceparent"] == VALID
    r.delete(KEYS.queue("echo"))
    producer.enqueue_many("echo", [[1], [2], [3]])
    batch = spans.get_finished_spans()[-1]
    assert batch.attributes["messaging.batch.message_count"] == 3


@pytest.mark.integration
def test_a_worker_runs_a_task_with_a_malformed_context_in_a_new_trace(
    redis_url: str, r: redis.Redis, producer: Producer, spans: Any
) -> None:
    traced = tracing.current()
    tracing.reset(None)  # an untraced producer (another language's) wrote these
    producer.enqueue("echo", "bad", extra={"traceparent": "00-zz-not-a-context", "tracestate": 7})
    producer.enqueue("echo", "good", extra={"traceparent": VALID})
    tracing.reset(traced)
    with running_worker(redis_url, ("echo",), keys=KEYS):
        found = wait_until(
            lambda: (
                [s for s in spans.get_finished_spans() if s.name == "process echo"][:2]
                if len([s for s in spans.get_finished_spans() if s.name == "process echo"]) >= 2
                else None
            ),
            what="two process spans",
        )
    assert int(r.hget(KEYS.stats("echo"), "completed") or 0) == 2
    by_parent = {s.parent is None: s for s in found}
    assert set(by_parent) == {True, False}  # the malformed one is a root, the other a child
    child = by_parent[False]
    assert f"{child.context.trace_id:032x}" == VALID.split("-")[1]
    assert f"{child.parent.span_id:016x}" == VALID.split("-")[2]
    assert child.attributes["taskscale.task.outcome"] == "ok"
    assert child.attributes["taskscale.task.attempt"] == 1
    waits = [s for s in spans.get_finished_spans() if s.name == "wait echo"]
    assert len(waits) == 2 and all(w.end_time >= w.start_time > 0 for w in waits)


@pytest.mark.integration
def test_an_unsampled_task_builds_no_span_and_its_sub_tasks_stay_in_its_trace(
    redis_url: str, r: redis.Redis, producer: Producer, spans: Any
) -> None:
    import tracing_tasks  # noqa: F401  (registers tracing.parent)

    unsampled = VALID[:-2] + "02"  # random trace id, not sampled
    traced = tracing.current()
    assert traced is not None and traced.skips_unsampled  # the SDK's default: parent-based
    tracing.reset(None)
    producer.enqueue("tracing.parent", 1, redis_url, extra={"traceparent": unsampled})
    tracing.reset(traced)
    with running_worker(redis_url, ("tracing.parent",), keys=KEYS):
        wait_until(lambda: r.llen(KEYS.queue("tracing.leaf")), what="the sub-task")
    sub_task = queued(r, "tracing.leaf")["traceparent"]
    assert sub_task.split("-")[1] == VALID.split("-")[1]  # the same trace
    assert not int(sub_task[-2:], 16) & 1  # still not sampled
    assert spans.get_finished_spans() == ()


def test_a_sampler_that_is_not_parent_based_gets_every_task() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON

    tracer = TracerProvider(sampler=ALWAYS_ON).get_tracer("tests")
    assert not tracing.Tracing(tracer).skips_unsampled
