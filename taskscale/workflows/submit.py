"""Submitting a workflow: its compiled steps as the definitions
``workflow_submit.lua`` stores, in one atomic call.

Each step's envelope is written here as text cut around its arguments
(``pre`` + arguments + ``post``), so the scripts join the parents' results
in as JSON text when they release it, never decoding and encoding them
again.  The fields that mark a step, ``workflow`` and ``step``, come right
after the id (docs/schema.md, "Workflows").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from taskscale import checks
from taskscale.connection import RedisLike, client_for
from taskscale.envelope import EnvelopeError, new_task_id
from taskscale.keys import DEFAULT_MAX_PAYLOAD_BYTES, Keys, check_name
from taskscale.luascripts import bound_script
from taskscale.workflows.nodes import Compiled, Node, Plan, compile_node

_COMPACT = (",", ":")
POLICIES = ("stop", "continue")
#: Seconds a finished workflow's state and results are kept by default.
DEFAULT_TTL_S = 24 * 3600


@dataclass(frozen=True)
class SubmitOptions:
    """How a workflow runs: its failure policy, how long its results are
    kept once it has finished, an optional id and name."""

    policy: str = "stop"
    ttl_s: int = DEFAULT_TTL_S
    workflow_id: str | None = None
    name: str = ""

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, not {self.policy!r}")
        checks.whole("ttl_s", self.ttl_s, least=1)
        if self.workflow_id is not None:
            check_name("workflow id", self.workflow_id)
            if len(self.workflow_id) > 64:
                raise ValueError("a workflow id has at most 64 characters")


def _dumps(value: Any, what: str) -> str:
    try:
        return json.dumps(value, separators=_COMPACT, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise EnvelopeError(f"{what}: arguments are not JSON: {exc}") from None


def step_definition(workflow_id: str, c: Compiled) -> dict[str, Any]:
    """The stored definition of one step (docs/schema.md, "Workflows")."""
    step = c.step
    task_id = f"{workflow_id}.{c.sid}"
    head = {"id": task_id, "workflow": workflow_id, "step": c.sid, "type": step.type}
    pre = _dumps(head, task_id)[:-1] + ',"args":['
    tail: dict[str, Any] = {"kwargs": step.kwargs, "priority": step.priority, "attempts": 0}
    if step.options is not None:
        tail.update(step.options.envelope_fields())
    post = "]," + _dumps(tail, task_id)[1:]
    own = _dumps(list(step.args), task_id)[1:-1]
    doc: dict[str, Any] = {
        "type": step.type,
        "task": task_id,
        "priority": step.priority,
        "pre": pre,
        "own": own,
        "post": post,
        "parents": c.parents,
    }
    if c.gate:
        doc["gate"] = c.gate
    if c.callback:
        doc["cb"] = True
    if step.label:
        doc["label"] = step.label
    return doc


def submit_plan(
    plan: Plan, options: SubmitOptions, *, client: RedisLike = None, keys: Keys | None = None
) -> str:
    """Store and start ``plan``; return the workflow id."""
    conn = client_for(client)
    keys = Keys.or_env(keys)
    workflow_id = options.workflow_id or new_task_id()
    args: list[Any] = [
        keys.prefix,
        workflow_id,
        options.policy,
        options.ttl_s,
        json.dumps(plan.sinks),
        json.dumps(plan.gates, separators=_COMPACT) if plan.gates else "{}",
        options.name,
    ]
    for c in plan.steps:
        text = _dumps(step_definition(workflow_id, c), c.sid)
        if len(text.encode()) > DEFAULT_MAX_PAYLOAD_BYTES:
            raise EnvelopeError(f"step {c.sid} ({c.step.type}): its definition is over 1 MiB")
        args += [c.sid, text]
    bound_script(conn, "workflow_submit")(keys=[keys.workflows], args=args, client=conn)
    return workflow_id


def submit(
    node: Node,
    options: SubmitOptions | None = None,
    *,
    client: RedisLike = None,
    keys: Keys | None = None,
) -> str:
    """Compile ``node`` and submit it; return the workflow id."""
    return submit_plan(compile_node(node), options or SubmitOptions(), client=client, keys=keys)
