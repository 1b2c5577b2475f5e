"""What a workflow is made of, and its compilation to one DAG of steps.

A workflow is built from task types by name: a :class:`Step` (one task), a
:class:`Chain` (each part after the one before, given its result), a
:class:`Group` (parts run together, results collected in order, optionally
at most ``limit`` of its steps ready at once), a :class:`Batch` (parts, then
a callback given the counts of succeeded and failed) and a :class:`Dag`
(steps with explicit dependencies).  They nest freely; :func:`compile_node`
turns any of them into the flat list of steps the Lua scripts run, each
with its parents in order.  Pure: nothing here talks to Redis.

Arguments a step receives (docs/workflows.md): a step with one parent gets
that parent's result as its first positional argument; a step with several
parents gets the list of their results, in parent order; a batch callback
gets ``{"total", "succeeded", "failed"}``; then the step's own arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Union

from taskscale.keys import DEFAULT_PRIORITY, check_name, parse_priority
from taskscale.options import TaskOptions

#: The most steps one workflow may have (one submit script call holds them all).
MAX_STEPS = 10_000


@dataclass(frozen=True)
class Step:
    """One task of a workflow: a type by name, its own arguments, options."""

    type: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    priority: int = DEFAULT_PRIORITY
    options: TaskOptions | None = None
    #: A name shown with the step (a DAG builder's name); not its id.
    label: str = ""

    def __post_init__(self) -> None:
        check_name("task type", self.type)
        object.__setattr__(self, "priority", parse_priority(self.priority))
        if self.options is not None and not isinstance(self.options, TaskOptions):
            raise TypeError(f"options must be a TaskOptions, not {type(self.options).__name__}")


@dataclass(frozen=True)
class Chain:
    parts: tuple[Node, ...]


@dataclass(frozen=True)
class Group:
    parts: tuple[Node, ...]
    #: The most of the group's steps ready or running at once (0 = no limit).
    limit: int = 0


@dataclass(frozen=True)
class Batch:
    parts: tuple[Node, ...]
    callback: Step


@dataclass(frozen=True)
class DagNode:
    """A step of a :class:`Dag` and the names of the steps it waits for."""

    name: str
    node: Node
    after: tuple[str, ...]


@dataclass(frozen=True)
class Dag:
    nodes: tuple[DagNode, ...]


Node = Union[Step, Chain, Group, Batch, Dag]  # noqa: UP007 (a runtime alias)


@dataclass
class Compiled:
    """One step of the flat DAG: its id, its task, its parents in order."""

    sid: str
    step: Step
    parents: list[str]
    children: list[str] = field(default_factory=list)
    gate: str = ""
    callback: bool = False


@dataclass
class Plan:
    """A compiled workflow: its steps in order, its sinks (whose results are
    the workflow's result), its gates (group id -> limit)."""

    steps: list[Compiled]
    sinks: list[str]
    gates: dict[str, int]


class _Compiler:
    def __init__(self) -> None:
        self.steps: list[Compiled] = []
        self.gates: dict[str, int] = {}

    def add(self, step: Step, parents: Sequence[str], gate: str, callback: bool = False) -> str:
        if len(self.steps) >= MAX_STEPS:
            raise ValueError(f"a workflow has at most {MAX_STEPS} steps")
        sid = f"s{len(self.steps)}"
        self.steps.append(Compiled(sid, step, list(parents), gate=gate, callback=callback))
        return sid

    def node(self, node: Node, parents: list[str], gate: str) -> list[str]:
        """Compile ``node`` after ``parents``; return its outputs (sinks)."""
        if isinstance(node, Step):
            return [self.add(node, parents, gate)]
        if isinstance(node, Chain):
            if not node.parts:
                raise ValueError("a chain needs at least one part")
            out = parents
            for part in node.parts:
                out = self.node(part, out, gate)
            return out
        if isinstance(node, Group):
            if not node.parts:
                raise ValueError("a group needs at least one part")
            inner = gate
            if node.limit:
                inner = f"g{len(self.gates)}"
                self.gates[inner] = node.limit
            return [sid for part in node.parts for sid in self.node(part, parents, inner)]
        if isinstance(node, Batch):
            if not node.parts:
                raise ValueError("a batch needs at least one part")
            outs = [sid for part in node.parts for sid in self.node(part, parents, gate)]
            return [self.add(node.callback, outs, gate, callback=True)]
        if isinstance(node, Dag):
            return self.dag(node, parents, gate)
        raise TypeError(f"not a workflow part: {node!r}")

    def dag(self, dag: Dag, parents: list[str], gate: str) -> list[str]:
        if not dag.nodes:
            raise ValueError("a DAG needs at least one step")
        outs: dict[str, list[str]] = {}
        used: set[str] = set()
        for item in dag.nodes:  # the builder adds a node after the ones it waits for
            missing = [a for a in item.after if a not in outs]
            if missing:
                raise ValueError(f"DAG step {item.name!r} waits for unknown step(s) {missing}")
            after = [sid for a in item.after for sid in outs[a]]
            outs[item.name] = self.node(item.node, after or parents, gate)
            used.update(item.after)
        return [sid for item in dag.nodes if item.name not in used for sid in outs[item.name]]


def compile_node(node: Node) -> Plan:
    """The flat DAG of ``node``: ids ``s0``, ``s1``, ... in build order."""
    compiler = _Compiler()
    sinks = compiler.node(node, [], "")
    by_id = {c.sid: c for c in compiler.steps}
    for c in compiler.steps:
        if len(set(c.parents)) != len(c.parents):
            raise ValueError(f"step {c.sid} waits for the same step twice")
        for p in c.parents:
            by_id[p].children.append(c.sid)
    return Plan(compiler.steps, sinks, compiler.gates)
