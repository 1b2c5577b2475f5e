"""The worker's three tracing paths (taskscale/tracing.py, ``_begin``): an
unsampled parent builds no span and carries its context on the task; a task
with no trace context is a root whose ``process`` span the sampler decides
first, so a sampled-out root builds nothing more (no decode, no ``wait``
span) and a sampled root holds its ``wait`` span; a sampled parent is parsed
without the propagator, its ``tracestate`` kept (issue 24)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from support.waiting import wait_until
from support.workers import running_worker
from taskscale import tracing
from taskscale.keys import Keys
from taskscale.producer import Producer
from taskscale.worker.execution import Claimed, Outcome

KEYS = Keys("taskscale")
TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT_SPAN = "b7ad6b7169203331"
SAMPLED = f"00-{TRACE}-{PARENT_SPAN}-01"
#: The trace id the test id generator hands out first (the first root's).
ROOT_TRACE = 0x1111_2222_3333_4444_5555_6666_7777_8888


def known_ids() -> Any:
    """An id generator whose first trace id is ROOT_TRACE (then ROOT_TRACE + 1...)."""
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class Known(RandomIdGenerator):
        spans, traces = 0x100, ROOT_TRACE - 1

        def generate_trace_id(self) -> int:
            self.traces += 1
            return self.traces

        def generate_span_id(self) -> int:
            self.spans += 1
            return self.spans

    return Known()


def tracer_with(sampler: Any) -> Iterator[tuple[Any, Any]]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler, id_generator=known_ids())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    traced = tracing.Tracing(provider.get_tracer("tests"))
    tracing.reset(traced)
    try:
        yield traced, exporter
    finally:
        tracing.reset()
        provider.shutdown()


@pytest.fixture
def dropping() -> Iterator[tuple[Any, Any]]:
    """Every root sampled out (parent-based, as 1 % drops 99 % of roots)."""
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased

    yield from tracer_with(ParentBased(ALWAYS_OFF))


@pytest.fixture
def keeping() -> Iterator[tuple[Any, Any]]:
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased

    yield from tracer_with(ParentBased(ALWAYS_ON))


def claimed(**fields: object) -> Claimed:
    now = int(time.time() * 1000)
    doc = {"id": "t1", "type": "noop", "args": [], "enqueued_ms": now - 50, **fields}
    return Claimed("noop", "t1", json.dumps(doc, separators=(",", ":")).encode(), now)


def run_traced(traced: Any, task: Claimed) -> list[Claimed]:
    seen: list[Claimed] = []

    def run(t: Claimed) -> Outcome:
        seen.append(t)
        return Outcome(t.task_id, t.task_type, "ok", 0)

    assert traced.worker_run(run, "w1")(task).kind == "ok"
    return seen


def test_a_sampled_out_root_builds_nothing_and_carries_its_context(
    dropping: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    traced, exporter = dropping

    def no_decode(_raw: object) -> object:
        raise AssertionError("a sampled-out root must not decode its envelope")

    monkeypatch.setattr(tracing.json, "loads", no_decode)
    (task,) = run_traced(traced, claimed())
    carried = task.trace_parent.get_span_context()
    assert carried.trace_id == ROOT_TRACE and carried.is_valid and not carried.trace_flags.sampled
    assert not task.trace_parent.is_recording()
    assert exporter.get_finished_spans() == ()


def test_an_unsampled_parent_is_carried_as_its_traceparent(dropping: tuple[Any, Any]) -> None:
    traced, exporter = dropping
    value = SAMPLED[:-2] + "00"
    (task,) = run_traced(traced, claimed(traceparent=value))
    assert task.trace_parent == value.encode()
    assert exporter.get_finished_spans() == ()


def test_a_sampled_root_holds_its_wait_span(keeping: tuple[Any, Any]) -> None:
    traced, exporter = keeping
    (task,) = run_traced(traced, claimed())
    assert task.trace_parent is None
    spans = {s.name: s for s in exporter.get_finished_spans()}
    process, wait = spans["process noop"], spans["wait noop"]
    assert process.parent is None and process.context.trace_id == ROOT_TRACE
    assert wait.context.trace_id == ROOT_TRACE  # one trace, not two roots
    assert wait.parent is not None and wait.parent.span_id == process.context.span_id
    assert process.attributes["taskscale.task.attempt"] == 1
    assert process.attributes["taskscale.worker.id"] == "w1"
    assert wait.attributes["messaging.operation.type"] == "receive"


def test_a_sampled_parent_is_parsed_with_its_tracestate(keeping: tuple[Any, Any]) -> None:
    traced, exporter = keeping
    run_traced(traced, claimed(traceparent=SAMPLED, tracestate="vendor=abc", attempts=2))
    spans = {s.name: s for s in exporter.get_finished_spans()}
    for span in spans.values():
        assert f"{span.context.trace_id:032x}" == TRACE
        assert span.parent is not None and f"{span.parent.span_id:016x}" == PARENT_SPAN
        assert span.parent.is_remote
        assert span.context.trace_state.get("vendor") == "abc"
    assert spans["process noop"].attributes["taskscale.task.attempt"] == 3


@pytest.mark.parametrize(
    "value",
    [
        "ff" + SAMPLED[2:],  # version ff is invalid (W3C)
        f"00-{'0' * 32}-{PARENT_SPAN}-01",  # an all-zero trace id
        f"00-{TRACE}-{'0' * 16}-01",  # an all-zero span id
    ],
)
def test_an_invalid_parent_starts_a_trace(keeping: tuple[Any, Any], value: str) -> None:
    traced, exporter = keeping
    run_traced(traced, claimed(traceparent=value))
    (process,) = [s for s in exporter.get_finished_spans() if s.name == "process noop"]
    assert process.parent is None and process.context.trace_id == ROOT_TRACE


@pytest.mark.integration
def test_a_sampled_out_roots_sub_tasks_stay_in_its_trace(
    redis_url: str, r: redis.Redis, producer: Producer, dropping: tuple[Any, Any]
) -> None:
    import tracing_tasks  # noqa: F401  (registers tracing.parent)

    traced, exporter = dropping
    tracing.reset(None)  # a producer that does not trace wrote it: no traceparent
    producer.enqueue("tracing.parent", 1, redis_url)
    tracing.reset(traced)
    with running_worker(redis_url, ("tracing.parent",), keys=KEYS):
        raw = wait_until(lambda: r.lindex(KEYS.queue("tracing.leaf"), 0), what="the sub-task")
    sub_task = json.loads(raw)["traceparent"]
    assert sub_task.split("-")[1] == f"{ROOT_TRACE:032x}"  # the root's trace, not a new one
    assert not int(sub_task[-2:], 16) & 1  # not sampled
    assert exporter.get_finished_spans() == ()


@pytest.mark.integration
@pytest.mark.parametrize("task_type", ["tracing.parent", "tracing.async_parent"])
def test_an_unsampled_parents_sub_tasks_stay_in_its_trace(
    redis_url: str, r: redis.Redis, producer: Producer, dropping: tuple[Any, Any], task_type: str
) -> None:
    import tracing_tasks  # noqa: F401  (registers the tasks)

    traced, exporter = dropping
    unsampled = SAMPLED[:-2] + "00"
    tracing.reset(None)
    producer.enqueue(task_type, 1, redis_url, extra={"traceparent": unsampled})
    tracing.reset(traced)
    with running_worker(redis_url, (task_type,), keys=KEYS):
        raw = wait_until(lambda: r.lindex(KEYS.queue("tracing.leaf"), 0), what="the sub-task")
    sub_task = json.loads(raw)["traceparent"]
    assert sub_task.split("-")[1] == TRACE and not int(sub_task[-2:], 16) & 1
    assert exporter.get_finished_spans() == ()


@pytest.mark.integration
def test_a_misshapen_unsampled_parent_is_not_carried_into_sub_tasks(
    redis_url: str, r: redis.Redis, producer: Producer, dropping: tuple[Any, Any]
) -> None:
    """The fast path skipped the task (its shape says "not sampled") but its
    ids are not hex: what it sends starts a trace of its own."""
    import tracing_tasks  # noqa: F401  (registers tracing.parent)

    traced, exporter = dropping
    tracing.reset(None)
    misshapen = SAMPLED[:-2].replace("0af7", "0ag7") + "00"
    producer.enqueue("tracing.parent", 1, redis_url, extra={"traceparent": misshapen})
    tracing.reset(traced)
    with running_worker(redis_url, ("tracing.parent",), keys=KEYS):
        raw = wait_until(lambda: r.lindex(KEYS.queue("tracing.leaf"), 0), what="the sub-task")
    sub_task = json.loads(raw)["traceparent"]
    assert sub_task.split("-")[1] == f"{ROOT_TRACE:032x}"  # a new trace, the send's own
    assert exporter.get_finished_spans() == ()
