"""The worker's per-task tracing hook, timed in-process (no Redis, no export).

Why: the drain benchmark (bench/tracing_bench.py) on the shared machine is
too noisy to see a few microseconds; this times exactly what tracing adds to
one task in the worker -- :meth:`taskscale.tracing.Tracing.worker_run`
around a run that does nothing -- for a task whose ``traceparent`` says
"not sampled" (the 99 % of a 1 % sampler) and one that says "sampled" (two
SDK spans, ``wait`` and ``process``, handed to a BatchSpanProcessor whose
exporter drops them -- or, with ``--encode``, encodes them as the OTLP
exporter does, without sending) -- and for tasks with no ``traceparent``
(an untraced producer's: roots, 1 % of them sampled).  Reports the process's CPU time (every
thread's: the batch processor's thread encodes) per task above the bare
run, best of ``--repeat``, and the cost of a 1 % mix.

    .venv/bin/python -m bench.tracing_hook_bench --n 50000 --encode
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from typing import Any

from taskscale import tracing


@dataclass
class _Task:
    task_type: str
    task_id: str
    raw: bytes
    now_ms: int
    trace_parent: Any = None


@dataclass
class _Outcome:
    kind: str = "ok"
    error: str = ""
    retry_envelope: str = ""


def _tracing(encode: bool) -> tuple[tracing.Tracing, Any]:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.sdk.trace.sampling import ParentBasedTraceIdRatio

    class Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            if encode:  # what OTLPSpanExporter does before its HTTP POST
                encode_spans(spans).SerializeToString()
            return SpanExportResult.SUCCESS

    provider = TracerProvider(sampler=ParentBasedTraceIdRatio(0.01))
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    return tracing.Tracing(provider.get_tracer("bench")), provider


def _task(flags: str | None, i: int) -> _Task:
    """A task whose ``traceparent`` has these flags; None: it has none (a root)."""
    doc = {
        "id": f"t{i}",
        "type": "noop",
        "args": [],
        "kwargs": {},
        "enqueued_ms": 1_700_000_000_000,
        "attempts": 0,
    }
    if flags is not None:
        doc["traceparent"] = f"00-{i + 1:032x}-{i + 1:016x}-{flags}"
    raw = json.dumps(doc, separators=(",", ":")).encode()
    return _Task("noop", f"t{i}", raw, 1_700_000_000_005)


def per_task_us(run: Any, tasks: list[_Task], flush: Any = None) -> float:
    """Process CPU µs per task (every thread's), the spans' export included."""
    started = time.process_time()
    for task in tasks:
        run(task)
    if flush is not None:
        flush()
    return (time.process_time() - started) / len(tasks) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=50000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--encode", action="store_true", help="encode the spans as OTLP")
    args = parser.parse_args()
    outcome = _Outcome()

    def bare(task: Any) -> _Outcome:
        return outcome

    trace, provider = _tracing(args.encode)
    traced = trace.worker_run(bare, "w1")
    unsampled = [_task("00", i) for i in range(args.n)]
    sampled = [_task("01", i) for i in range(args.n // 10)]
    mixed = [_task("01" if i % 100 == 0 else "00", i) for i in range(args.n)]  # 1 %
    roots = [_task(None, i) for i in range(args.n)]  # an untraced producer's: 1 % of roots kept
    best: dict[str, float] = {}
    for _ in range(args.repeat):  # best of: the machine is shared
        for name, run, tasks in (
            ("bare", bare, unsampled),
            ("unsampled", traced, unsampled),
            ("sampled", traced, sampled),
            ("1 % mix", traced, mixed),
            ("no context (1 % of roots)", traced, roots),
        ):
            cost = per_task_us(run, tasks, provider.force_flush)
            best[name] = min(best.get(name, 1e9), cost)
    print(f"bare run: {best['bare']:.2f} us/task (CPU)")
    for name in ("unsampled", "sampled", "1 % mix", "no context (1 % of roots)"):
        print(f"{name}: +{best[name] - best['bare']:.2f} us/task")


if __name__ == "__main__":
    main()
