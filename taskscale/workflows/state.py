"""Reading a workflow, awaiting its result, cancelling it.

:func:`read` returns one workflow as it is now (its steps with state,
timing, results or errors); :func:`wait` blocks like an RPC call until it
has finished (its ``done`` list, or a timeout); :func:`cancel` ends it as a
whole through ``workflow_cancel.lua`` (steps not started never start,
running steps see ``current_task().cancelled``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from taskscale import checks
from taskscale.connection import RedisLike, client_for
from taskscale.keys import Keys, check_name
from taskscale.luascripts import bound_script
from taskscale.redis_urls import RedisClient
from taskscale.text import as_text

#: The states a workflow ends in.
FINAL = ("succeeded", "failed", "cancelled")


class WorkflowFailed(Exception):
    """:func:`wait` on a workflow that failed or was cancelled; ``state`` says which."""

    def __init__(self, workflow_id: str, state: str, reason: str) -> None:
        super().__init__(f"workflow {workflow_id} {state}: {reason}")
        self.workflow_id, self.state, self.reason = workflow_id, state, reason


class WorkflowTimeout(TimeoutError):
    """:func:`wait` gave up before the workflow finished."""


@dataclass(frozen=True)
class StepState:
    id: str
    type: str
    task_id: str
    state: str
    parents: list[str]
    label: str = ""
    ready_ms: int | None = None
    done_ms: int | None = None
    #: The step's result (succeeded) or its error object (failed, skipped).
    result: Any = None


@dataclass(frozen=True)
class WorkflowState:
    id: str
    state: str
    policy: str
    name: str
    reason: str
    total: int
    finished: int
    failed: int
    created_ms: int
    finished_ms: int | None
    sinks: list[str]
    steps: list[StepState] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.state in FINAL

    @property
    def result(self) -> Any:
        """The sinks' results: one sink's result, or their list in order."""
        by_id = {s.id: s.result for s in self.steps}
        values = [by_id.get(s) for s in self.sinks]
        return values[0] if len(values) == 1 else values

    @property
    def waiting(self) -> int:
        """Steps waiting on a parent (not yet released)."""
        return sum(1 for s in self.steps if s.state in ("waiting", "held"))

    def as_dict(self) -> dict[str, Any]:
        doc = {k: v for k, v in self.__dict__.items() if k != "steps"}
        doc["steps"] = [dict(s.__dict__) for s in self.steps]
        return doc


def _int(value: Any) -> int | None:
    return None if value is None else int(as_text(value))


def _json(value: Any) -> Any:
    if value is None:
        return None
    try:
        return json.loads(as_text(value))
    except ValueError:
        return as_text(value)


def read(
    workflow_id: str, *, client: RedisLike = None, keys: Keys | None = None
) -> WorkflowState | None:
    """The workflow as it is now, or None when it is unknown (or expired)."""
    check_name("workflow id", workflow_id)
    conn = client_for(client)
    keys = Keys.or_env(keys)
    pipe = conn.pipeline(transaction=True)
    for member in ("workflow", "workflow_steps", "workflow_state", "workflow_results"):
        pipe.hgetall(getattr(keys, member)(workflow_id))
    meta_raw, defs_raw, state_raw, results_raw = pipe.execute()
    if not meta_raw:
        return None
    meta = {as_text(k): as_text(v) for k, v in meta_raw.items()}
    st = {as_text(k): v for k, v in state_raw.items()}
    results = {as_text(k): v for k, v in results_raw.items()}
    steps = []
    for sid_raw, d_raw in sorted(defs_raw.items(), key=lambda kv: int(as_text(kv[0])[1:] or 0)):
        sid, d = as_text(sid_raw), json.loads(as_text(d_raw))
        steps.append(
            StepState(
                id=sid,
                type=d["type"],
                task_id=d["task"],
                state=as_text(st.get(sid, b"unknown")),
                parents=list(d.get("parents") or []),
                label=d.get("label", ""),
                ready_ms=_int(st.get(sid + "|ready_ms")),
                done_ms=_int(st.get(sid + "|done_ms")),
                result=_json(results.get(sid)),
            )
        )
    return WorkflowState(
        id=workflow_id,
        state=meta.get("state", "unknown"),
        policy=meta.get("policy", "stop"),
        name=meta.get("name", ""),
        reason=meta.get("reason", ""),
        total=int(meta.get("total", 0)),
        finished=int(meta.get("finished", 0)),
        failed=int(meta.get("failed", 0)),
        created_ms=int(meta.get("created_ms", 0)),
        finished_ms=_int(meta.get("finished_ms")),
        sinks=json.loads(meta.get("sinks", "[]")),
        steps=steps,
    )


def wait(
    workflow_id: str,
    *,
    timeout: float = 60.0,
    client: RedisLike = None,
    keys: Keys | None = None,
) -> Any:
    """Block until the workflow has finished; return its result (the sinks').

    Raises :class:`WorkflowFailed` when it failed or was cancelled,
    :class:`WorkflowTimeout` after ``timeout`` seconds, LookupError for an
    unknown workflow.  Several callers may wait at once: each reads the
    state again after every wake (the ``done`` list is a signal, the state
    hash the truth)."""
    checks.seconds("timeout", timeout)
    conn = client_for(client)
    keys = Keys.or_env(keys)
    deadline = time.monotonic() + timeout
    while True:
        state = read(workflow_id, client=conn, keys=keys)
        if state is None:
            raise LookupError(f"no workflow {workflow_id} (never submitted, or expired)")
        if state.done:
            if state.state != "succeeded":
                raise WorkflowFailed(workflow_id, state.state, state.reason)
            return state.result
        left = deadline - time.monotonic()
        if left <= 0:
            raise WorkflowTimeout(
                f"workflow {workflow_id} has not finished after {timeout:g}s "
                f"({state.finished}/{state.total} steps done)"
            )
        _block(conn, keys.workflow_done(workflow_id), min(left, 1.0))


def _block(conn: RedisClient, done_key: str, seconds: float) -> None:
    # LINDEX-then-BLMOVE would need a second key; a short BLPOP whose notice
    # is pushed back keeps the list readable by every other waiter.
    got = conn.blpop([done_key], timeout=max(seconds, 0.01))
    if got is not None:
        conn.rpush(done_key, got[1])


@dataclass(frozen=True)
class CancelResult:
    """``outcome``: "ended" (it was running, now ``state``), "finished" (it
    had already ended in ``state``), "unknown"."""

    outcome: str
    state: str


def end(
    workflow_id: str,
    state: str,
    reason: str,
    *,
    client: RedisLike = None,
    keys: Keys | None = None,
) -> CancelResult:
    """End a running workflow in ``state`` ("cancelled" or "failed") with ``reason``."""
    check_name("workflow id", workflow_id)
    conn = client_for(client)
    keys = Keys.or_env(keys)
    outcome, final = bound_script(conn, "workflow_cancel")(
        keys=[keys.workflows], args=[keys.prefix, workflow_id, state, reason], client=conn
    )
    return CancelResult(as_text(outcome), as_text(final))


def cancel(
    workflow_id: str,
    reason: str = "cancelled by a caller",
    *,
    client: RedisLike = None,
    keys: Keys | None = None,
) -> CancelResult:
    """Cancel a workflow as a whole: pending steps never start, queued ones
    are removed, running ones see ``current_task().cancelled``."""
    return end(workflow_id, "cancelled", reason, client=client, keys=keys)
