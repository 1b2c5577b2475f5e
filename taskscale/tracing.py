"""OpenTelemetry tracing: the one place that knows OpenTelemetry.

Why a module of its own: tracing is optional (extra ``taskscale[otel]``) and
must cost nothing when off, so the producer, the RPC and fan-out calls, the
worker and the scheduler each ask :func:`current` once (None when off: one
None check) and hand their work to a :class:`Tracing` method when it is on.
OpenTelemetry is imported only here, and only once tracing is asked for.

On when the extra is installed and ``TASKSCALE_TRACING=1``, or an OTLP
endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``..._TRACES_ENDPOINT``) or
``OTEL_TRACES_EXPORTER`` (other than ``none``) is set; ``TASKSCALE_TRACING=0``
turns it off whatever else is set.  The rest is the standard OTEL_*
variables, read by the SDK (sampler, service name, batch processor, OTLP
endpoint and headers).  An application that set its own tracer provider
keeps it.  The W3C trace context rides in the envelope's ``traceparent`` /
``tracestate`` fields (docs/schema.md); ``tracefirst`` names the first
attempt's run span so that retries link to it.  docs/tracing.md.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any, Protocol, TypeVar

from taskscale.context import running_task
from taskscale.trace_context import (
    TRACEFIRST,
    TRACEPARENT,
    TRACESTATE,
    carrier,
    unsampled_parent,
    valid_traceparent,
)

log = logging.getLogger(__name__)

TRACING_ENV = "TASKSCALE_TRACING"
#: ``messaging.system`` of every span.
SYSTEM = "taskscale"
_NS_PER_MS = 1_000_000

T = TypeVar("T")


class ClaimedTask(Protocol):
    """What the worker hands over (``worker.execution.Claimed``)."""

    task_type: str
    task_id: str
    raw: bytes
    now_ms: int
    trace_parent: Any


class TaskOutcome(Protocol):
    """What a run returns (``worker.execution.Outcome``)."""

    kind: str
    error: str
    retry_envelope: str


def wanted(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the environment asks for tracing (see the module docstring)."""
    env = os.environ if environ is None else environ
    flag = env.get(TRACING_ENV, "").strip().lower()
    if flag in ("0", "false", "no", "off"):
        return False
    if flag in ("1", "true", "yes", "on"):
        return True
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    return bool(
        exporter
        or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


_UNSET: Any = object()
_active: Any = _UNSET
_lock = threading.Lock()


def current() -> Tracing | None:
    """The process's tracing, or None when off (decided once, then cached)."""
    active = _active
    if active is _UNSET:
        active = _decide()
    return active  # type: ignore[no-any-return]


def _decide() -> Tracing | None:
    global _active
    with _lock:
        if _active is _UNSET:
            _active = _configure() if wanted() else None
        return _active  # type: ignore[no-any-return]


def reset(tracing: Tracing | Any | None = _UNSET) -> None:
    """Forget (or set) the cached decision: for tests and embedding programs."""
    global _active
    with _lock:
        _active = tracing


def _configure() -> Tracing | None:
    try:
        from opentelemetry import trace
    except ImportError:
        log.warning("tracing is asked for but taskscale[otel] is not installed; tracing is off")
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider):  # nobody set one: ours, from OTEL_*
        built = _sdk_provider()
        if built is None:
            return None
        trace.set_tracer_provider(built)
        provider = trace.get_tracer_provider()
    return Tracing(provider.get_tracer("taskscale"))


def _sdk_provider() -> Any:
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning("tracing is asked for but opentelemetry-sdk is missing; tracing is off")
        return None
    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    provider = TracerProvider(resource=Resource.create({} if named else {"service.name": SYSTEM}))
    for exporter in _exporters():
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def _exporters() -> list[Any]:
    """The span exporters ``OTEL_TRACES_EXPORTER`` names (default otlp)."""
    found: list[Any] = []
    for name in (os.environ.get("OTEL_TRACES_EXPORTER") or "otlp").lower().split(","):
        name = name.strip()
        if name == "otlp":
            protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get(
                "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
            )
            try:
                if protocol == "grpc":  # needs opentelemetry-exporter-otlp-proto-grpc
                    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                        OTLPSpanExporter as Grpc,
                    )

                    found.append(Grpc())
                else:
                    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                        OTLPSpanExporter,
                    )

                    found.append(OTLPSpanExporter())
            except ImportError as exc:
                log.warning("OTLP exporter (%s) not installed: %s", protocol, exc)
        elif name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            found.append(ConsoleSpanExporter())
        elif name and name != "none":
            log.warning("OTEL_TRACES_EXPORTER=%s is not supported; ignored", name)
    return found


class Tracing:
    """Spans of one process, through an OpenTelemetry tracer."""

    def __init__(self, tracer: Any) -> None:
        from opentelemetry import context, trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self._tracer = tracer
        self._trace = trace
        self._context = context
        self._w3c = TraceContextTextMapPropagator()
        # A parent-based sampler drops every span under an unsampled remote
        # parent: the worker then skips them without building any (issue 24:
        # 1 % sampling within 3 % of tracing off).
        sampler = getattr(tracer, "sampler", None)
        described = sampler.get_description() if sampler is not None else ""
        self.skips_unsampled = "remoteParentNotSampled:AlwaysOffSampler" in described

    def _parent(self) -> Any:
        """The context a send or call starts in: the current span's, or the
        unsampled context of the task that runs here (carried on its
        :class:`~taskscale.context.TaskContext` instead of a span)."""
        if self._trace.get_current_span().get_span_context().is_valid:
            return None
        task = running_task()
        carried = None if task is None else task.trace_parent
        if carried is None:
            return None
        if isinstance(carried, bytes):  # an envelope's unsampled traceparent
            return self._remote(carrier({TRACEPARENT: carried.decode()}))  # hex checked here
        return self._trace.set_span_in_context(carried)  # a sampled-out root's span

    def _remote(self, found: Mapping[str, str]) -> Any:
        """The OpenTelemetry context of a :func:`carrier` (parsed here: a few
        µs less than the propagator's extract); None when it is empty or not
        a context (the spans then start a trace)."""
        parent = found.get(TRACEPARENT)
        if parent is None or parent[:2] == "ff":  # W3C: version ff is invalid
            return None
        trace_id, span_id = int(parent[3:35], 16), int(parent[36:52], 16)
        if not trace_id or not span_id:
            return None
        state = found.get(TRACESTATE)
        context = self._trace.SpanContext(
            trace_id,
            span_id,
            is_remote=True,
            trace_flags=self._trace.TraceFlags(int(parent[53:], 16)),
            trace_state=None if state is None else self._trace.TraceState.from_header([state]),
        )
        return self._trace.set_span_in_context(self._trace.NonRecordingSpan(context))

    # --- producers -------------------------------------------------------------
    def publish(
        self,
        task_type: str,
        fields: MutableMapping[str, Any],
        send: Callable[[], T],
        *,
        count: int = 1,
    ) -> T:
        """Run ``send`` (which builds envelopes from ``fields`` and pushes
        them) in a PRODUCER span whose context ``fields`` then carries."""
        attrs: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.operation.type": "send",
            "messaging.operation.name": "send",
            "messaging.destination.name": task_type,
        }
        if count != 1:
            attrs["messaging.batch.message_count"] = count
        kind = self._trace.SpanKind.PRODUCER
        parent = self._parent()
        with self._tracer.start_as_current_span(
            f"send {task_type}", context=parent, kind=kind, attributes=attrs
        ):
            if not valid_traceparent(fields.get(TRACEPARENT)):  # a caller's own wins
                self._w3c.inject(fields)
            result = send()
            if isinstance(result, str):
                self._trace.get_current_span().set_attribute("messaging.message.id", result)
            return result

    def call(self, task_type: str, wait: Callable[[], T]) -> T:
        """An RPC call (enqueue, then wait for the reply) as a CLIENT span."""
        attrs = {"messaging.system": SYSTEM, "messaging.destination.name": task_type}
        kind = self._trace.SpanKind.CLIENT
        parent = self._parent()
        with self._tracer.start_as_current_span(
            f"call {task_type}", context=parent, kind=kind, attributes=attrs
        ):
            return wait()

    # --- the scheduler ---------------------------------------------------------
    def promotion(self, started_ns: int, promoted: int, lateness_ms: int) -> None:
        """One promote.lua call that moved ``promoted`` due tasks (a span of its own trace)."""
        attrs = {
            "messaging.system": SYSTEM,
            "messaging.batch.message_count": promoted,
            "taskscale.promote.lateness_ms": lateness_ms,
        }
        span = self._tracer.start_span("promote", start_time=started_ns, attributes=attrs)
        span.end()

    # --- workers ---------------------------------------------------------------
    def worker_run(
        self, run: Callable[[Any], Any], worker_id: str
    ) -> Callable[[ClaimedTask], TaskOutcome]:
        """``run`` (TaskRunner.run) traced: the queue wait, then the run."""

        skip = self.skips_unsampled

        def traced(task: ClaimedTask) -> TaskOutcome:
            if skip:  # the path of 99 % of the tasks at 1 %: inline, no method call
                unsampled = unsampled_parent(task.raw)
                if unsampled is not None:
                    task.trace_parent = unsampled
                    return run(task)  # type: ignore[no-any-return]
            state = self._begin(task, worker_id)
            if state is None:  # no span would be recorded: none is built
                return run(task)  # type: ignore[no-any-return]
            try:
                outcome: TaskOutcome = run(task)
            except BaseException as exc:
                self._abort(state, exc)
                raise
            self._end(state, outcome)
            return outcome

        return traced

    async def worker_run_async(
        self, run: Callable[[Any], Awaitable[Any]], task: ClaimedTask, worker_id: str
    ) -> Any:
        """The async executor's run of ``task``, traced as :meth:`worker_run`."""
        unsampled = unsampled_parent(task.raw) if self.skips_unsampled else None
        if unsampled is not None:
            task.trace_parent = unsampled
            return await run(task)
        state = self._begin(task, worker_id)
        if state is None:
            return await run(task)
        try:
            outcome = await run(task)
        except BaseException as exc:
            self._abort(state, exc)
            raise
        self._end(state, outcome)
        return outcome

    def _begin(self, task: ClaimedTask, worker_id: str) -> tuple[Any, Any, dict[str, Any]] | None:
        """The spans of a claimed task (its ``process`` span current), or None
        when nothing would be recorded: then nothing is built, and the task's
        ``trace_parent`` carries its unsampled context for what it sends.

        The callers first look for an unsampled ``traceparent`` in the raw
        text (with a parent-based sampler: no span is built under it); here
        a task with no trace field is a root, whose ``process`` span is
        started before the envelope is decoded -- at low rates the sampler
        drops most roots, and nothing more is built for them."""
        raw = task.raw
        attrs: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.destination.name": task.task_type,
            "messaging.message.id": task.task_id,
            "taskscale.worker.id": worker_id,
        }
        kind = self._trace.SpanKind.CONSUMER
        name = f"process {task.task_type}"
        span = None
        if b'"trace' not in raw:  # a root: the sampler decides before anything else is built
            span = self._tracer.start_span(
                name, kind=kind, attributes={**attrs, "messaging.operation.type": "process"}
            )
            if not span.is_recording():
                task.trace_parent = span
                return None
        try:
            doc = json.loads(raw)
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            doc = {}
        attempts = doc.get("attempts")
        attempt = (attempts if type(attempts) is int else 0) + 1
        parent = None if span is not None else self._remote(carrier(doc))
        if span is None:
            links = []
            if TRACEFIRST in doc:  # a retry: link to the first attempt's run
                first = self._remote(carrier(doc, TRACEFIRST))
                if first is not None:
                    linked = self._trace.get_current_span(first).get_span_context()
                    links.append(self._trace.Link(linked, {"taskscale.link": "first"}))
            span = self._tracer.start_span(
                name,
                context=parent,
                kind=kind,
                links=links,
                attributes={
                    **attrs,
                    "taskscale.task.attempt": attempt,
                    "messaging.operation.type": "process",
                },
            )
            if not span.is_recording():  # a sampler that is not parent-based dropped it
                task.trace_parent = span
                return None
        else:
            span.set_attribute("taskscale.task.attempt", attempt)
        context = self._trace.set_span_in_context(span, parent)
        since = _ms(doc.get("due_ms")) or _ms(doc.get("enqueued_ms"))
        if since and since <= task.now_ms:  # both on the Redis clock
            wait = self._tracer.start_span(
                f"wait {task.task_type}",
                context=context if parent is None else parent,  # a root's: under its run
                start_time=since * _NS_PER_MS,
                attributes={
                    "messaging.system": SYSTEM,
                    "messaging.destination.name": task.task_type,
                    "messaging.message.id": task.task_id,
                    "messaging.operation.type": "receive",
                },
            )
            wait.end(end_time=task.now_ms * _NS_PER_MS)
        return span, self._context.attach(context), doc

    def _abort(self, state: tuple[Any, Any, dict[str, Any]], exc: BaseException) -> None:
        span, token, _ = state
        self._context.detach(token)
        span.record_exception(exc)
        span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, type(exc).__name__))
        span.end()

    def _end(self, state: tuple[Any, Any, dict[str, Any]], outcome: TaskOutcome) -> None:
        span, token, doc = state
        self._context.detach(token)
        span.set_attribute("taskscale.task.outcome", outcome.kind)
        if outcome.kind != "ok":
            message = (outcome.error or outcome.kind)[:200]
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, message))
        if outcome.kind == "retry" and outcome.retry_envelope and TRACEFIRST not in doc:
            first: dict[str, str] = {}
            self._w3c.inject(first, context=self._trace.set_span_in_context(span))
            if TRACEPARENT in first:
                retry = json.loads(outcome.retry_envelope)
                retry[TRACEFIRST] = first[TRACEPARENT]
                outcome.retry_envelope = json.dumps(
                    retry, separators=(",", ":"), ensure_ascii=False
                )
        span.end()


def now_ns() -> int:
    """The wall clock in ns (a span's explicit start time)."""
    return time.time_ns()


def _ms(value: object) -> int:
    return value if type(value) is int and value > 0 else 0
