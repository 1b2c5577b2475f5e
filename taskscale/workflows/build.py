"""The public builders: ``taskscale.chain``, ``group``, ``batch``, ``dag``, ``step``.

Each returns a :class:`Workflow` -- a part that nests inside another
builder, and that ``.enqueue()`` submits as a whole (returning the
workflow id).  A part is a :class:`~taskscale.workflows.nodes.Step`, a task
type's name (a step without arguments) or another :class:`Workflow`.
"""

from __future__ import annotations

from typing import Any, Union

from taskscale import checks
from taskscale.connection import RedisLike
from taskscale.keys import DEFAULT_PRIORITY, Keys
from taskscale.options import TaskOptions
from taskscale.workflows.nodes import (
    Batch,
    Chain,
    Dag,
    DagNode,
    Group,
    Node,
    Plan,
    Step,
    compile_node,
)
from taskscale.workflows.submit import DEFAULT_TTL_S, SubmitOptions, submit_plan


class Workflow:
    """A workflow part that can be enqueued on its own or nested in another."""

    def __init__(self, node: Node) -> None:
        self.node = node

    def plan(self) -> Plan:
        """The flat DAG of steps this part compiles to."""
        return compile_node(self.node)

    def enqueue(
        self,
        *,
        policy: str = "stop",
        ttl_s: int = DEFAULT_TTL_S,
        workflow_id: str | None = None,
        name: str = "",
        client: RedisLike = None,
        keys: Keys | None = None,
    ) -> str:
        """Submit the workflow; return its id.  ``policy``: "stop" (the first
        failed step fails it, the default) or "continue" (a failed step's
        dependants are skipped, the rest run); ``ttl_s``: how long its
        state and results are kept once it has finished."""
        options = SubmitOptions(policy=policy, ttl_s=ttl_s, workflow_id=workflow_id, name=name)
        return submit_plan(self.plan(), options, client=client, keys=keys)

    def __repr__(self) -> str:
        return f"Workflow({self.node!r})"


Part = Union[Workflow, Step, str]  # noqa: UP007 (a runtime alias)


def _node(part: Part) -> Node:
    if isinstance(part, Workflow):
        return part.node
    if isinstance(part, Step):
        return part
    if isinstance(part, str):
        return Step(part)
    raise TypeError(
        f"a workflow part is a step, a task type or a workflow, not {type(part).__name__}"
    )


def step(
    task_type: str,
    *args: Any,
    priority: int | str = DEFAULT_PRIORITY,
    options: TaskOptions | None = None,
    label: str = "",
    **kwargs: Any,
) -> Step:
    """One step: task ``task_type`` with its own ``args`` and ``kwargs``
    (results of its parents come first, docs/workflows.md)."""
    return Step(task_type, tuple(args), dict(kwargs), priority, options, label)  # type: ignore[arg-type]


def chain(*parts: Part) -> Workflow:
    """Each part after the one before; a part after a step gets its result."""
    return Workflow(Chain(tuple(_node(p) for p in parts)))


def group(*parts: Part, limit: int = 0) -> Workflow:
    """Parts run together; what follows gets their results in order.
    ``limit``: the most of the group's steps ready or running at once."""
    checks.whole("limit", limit, least=0)
    return Workflow(Group(tuple(_node(p) for p in parts), limit))


def batch(*parts: Part, callback: Step | str) -> Workflow:
    """Parts run together (a failure does not stop the others when enqueued
    with ``policy="continue"``), then ``callback`` once all have finished,
    given ``{"total", "succeeded", "failed"}`` as its first argument."""
    cb = callback if isinstance(callback, Step) else Step(callback)
    return Workflow(Batch(tuple(_node(p) for p in parts), cb))


class DagBuilder(Workflow):
    """Steps with explicit dependencies: ``add`` returns a name that later
    steps list in ``after``."""

    def __init__(self) -> None:
        super().__init__(Dag(()))
        self._nodes: list[DagNode] = []

    def add(
        self, part: Part, *, after: tuple[str, ...] | list[str] = (), name: str | None = None
    ) -> str:
        known = {n.name for n in self._nodes}
        name = name or f"n{len(self._nodes)}"
        if name in known:
            raise ValueError(f"DAG step {name!r} is already added")
        missing = [a for a in after if a not in known]
        if missing:
            raise ValueError(
                f"DAG step {name!r} waits for unknown step(s) {missing}: add them first"
            )
        node = _node(part)
        if isinstance(node, Step) and not node.label:
            node = Step(node.type, node.args, node.kwargs, node.priority, node.options, name)
        self._nodes.append(DagNode(name, node, tuple(after)))
        self.node = Dag(tuple(self._nodes))
        return name


def dag() -> DagBuilder:
    """A DAG builder: ``d = dag(); a = d.add(step("fetch", url)); d.add("parse", after=[a])``."""
    return DagBuilder()
