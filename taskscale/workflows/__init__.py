"""Workflows: chains, groups, batches and DAGs of tasks, with results passed
along (docs/workflows.md).  Re-exports the public API; the modules import
each other by their own names."""

from taskscale.workflows.build import DagBuilder, Workflow, batch, chain, dag, group, step
from taskscale.workflows.state import (
    StepState,
    WorkflowFailed,
    WorkflowState,
    WorkflowTimeout,
    cancel,
    read,
    wait,
)

__all__ = [
    "DagBuilder",
    "StepState",
    "Workflow",
    "WorkflowFailed",
    "WorkflowState",
    "WorkflowTimeout",
    "batch",
    "cancel",
    "chain",
    "dag",
    "group",
    "read",
    "step",
    "wait",
]
