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

import contextvars
import json
import logging
import os
import re
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any, Protocol, TypeVar

log = logging.getLogger(__name__)

TRACING_ENV = "TASKSCALE_TRACING"
#: Envelope fields (docs/schema.md); longer or malformed values are ignored.
TRACEPARENT, TRACESTATE, TRACEFIRST = "traceparent", "tracestate", "tracefirst"
MAX_TRACEPARENT, MAX_TRACESTATE = 55, 512
#: ``messaging.system`` of every span.
SYSTEM = "taskscale"
_NS_PER_MS = 1_000_000

T = TypeVar("T")

#: A top-level ``traceparent`` whose flags say "not sampled" (last bit 0),
#: found without decoding the envelope: the worker's fast path (below).
_UNSAMPLED = re.compile(rb'"traceparent"\s*:\s*"(00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f][02468ace])"')
#: A valid ``traceparent`` value (:func:`valid_traceparent`).
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
#: The unsampled trace context of the task running in this context (bytes of
#: its ``traceparent``), for the sends and calls it makes: set instead of an
#: OpenTelemetry context, which costs more to build than the 3 % budget.
_unsampled: contextvars.ContextVar[bytes | None] = contextvars.ContextVar(
    "taskscale_unsampled_parent", default=None
)


class ClaimedTask(Protocol):
    """What the worker hands over (``worker.execution.Claimed``)."""

    task_type: str
    task_id: str
    raw: bytes
    now_ms: int


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


def valid_traceparent(value: object) -> bool:
    """A W3C ``traceparent`` as the envelope field allows: a string of at
    most 55 characters, version-traceid-spanid-flags in lower-case hex."""
    # 55 characters is exactly the four parts: nothing may follow them.
    return isinstance(value, str) and _TRACEPARENT.fullmatch(value) is not None


def carrier(doc: Mapping[str, Any], field: str = TRACEPARENT) -> dict[str, str]:
    """The W3C carrier of an envelope's trace fields; empty if malformed."""
    parent = doc.get(field)
    if not valid_traceparent(parent):
        return {}
    found = {TRACEPARENT: str(parent)}
    state = doc.get(TRACESTATE)
    if field == TRACEPARENT and isinstance(state, str) and len(state) <= MAX_TRACESTATE:
        found[TRACESTATE] = state
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
        unsampled context of the task that runs here (the fast path's)."""
        if self._trace.get_current_span().get_span_context().is_valid:
            return None
        unsampled = _unsampled.get()
        if unsampled is None:
            return None
        return self._w3c.extract({TRACEPARENT: unsampled.decode()})

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
            unsampled = _UNSAMPLED.search(task.raw) if skip else None
            if unsampled is not None:  # no span would be recorded: none is built
                token = _unsampled.set(unsampled[1])
                try:
                    return run(task)  # type: ignore[no-any-return]
                finally:
                    _unsampled.reset(token)
            state = self._begin(task, worker_id)
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
        unsampled = _UNSAMPLED.search(task.raw) if self.skips_unsampled else None
        if unsampled is not None:
            token = _unsampled.set(unsampled[1])
            try:
                return await run(task)
            finally:
                _unsampled.reset(token)
        state = self._begin(task, worker_id)
        try:
            outcome = await run(task)
        except BaseException as exc:
            self._abort(state, exc)
            raise
        self._end(state, outcome)
        return outcome

    def _begin(self, task: ClaimedTask, worker_id: str) -> tuple[Any, Any, dict[str, Any]]:
        try:
            doc = json.loads(task.raw)
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            doc = {}
        parent = self._w3c.extract(carrier(doc))
        attempts = doc.get("attempts")
        attrs: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.destination.name": task.task_type,
            "messaging.message.id": task.task_id,
            "taskscale.task.attempt": (attempts if type(attempts) is int else 0) + 1,
            "taskscale.worker.id": worker_id,
        }
        since = _ms(doc.get("due_ms")) or _ms(doc.get("enqueued_ms"))
        if since and since <= task.now_ms:  # both on the Redis clock
            wait = self._tracer.start_span(
                f"wait {task.task_type}",
                context=parent,
                start_time=since * _NS_PER_MS,
                attributes={**attrs, "messaging.operation.type": "receive"},
            )
            wait.end(end_time=task.now_ms * _NS_PER_MS)
        links = []
        if TRACEFIRST in doc:  # a retry: link to the first attempt's run
            first = self._trace.get_current_span(self._w3c.extract(carrier(doc, TRACEFIRST)))
            if first.get_span_context().is_valid:
                link = self._trace.Link(first.get_span_context(), {"taskscale.link": "first"})
                links.append(link)
        span = self._tracer.start_span(
            f"process {task.task_type}",
            context=parent,
            kind=self._trace.SpanKind.CONSUMER,
            links=links,
            attributes={**attrs, "messaging.operation.type": "process"},
        )
        token = self._context.attach(self._trace.set_span_in_context(span, parent))
        return span, token, doc

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
