"""The workflow keys' members of :class:`taskscale.keys.Keys` (a base class of
it), apart so keys.py stays one screenful of the task queue's own keys.

The shapes are rows of ``keys.KEY_SHAPES`` like every other key
(docs/schema.md, "Workflows"); ``Keys`` supplies ``_key``, which builds a
name from that table.
"""

from __future__ import annotations


class WorkflowKeys:
    """Key names of workflows (taskscale.workflows) in one namespace."""

    def _key(self, member: str, *parts: object) -> str:
        raise NotImplementedError  # Keys builds every name from KEY_SHAPES

    @property
    def workflows(self) -> str:
        """ZSET workflow id -> unix ms it started, while it runs (the sweep's index)."""
        return self._key("workflows")

    def workflow(self, workflow_id: str) -> str:
        """HASH a workflow's state, policy, counts, sinks, gates and reason."""
        return self._key("workflow", workflow_id)

    def workflow_steps(self, workflow_id: str) -> str:
        """HASH step id -> JSON definition (type, envelope text, parents, children)."""
        return self._key("workflow_steps", workflow_id)

    def workflow_state(self, workflow_id: str) -> str:
        """HASH step id -> state, and S|left, S|ready_ms, S|done_ms, S|task, S|env."""
        return self._key("workflow_state", workflow_id)

    def workflow_results(self, workflow_id: str) -> str:
        """HASH step id -> its result (JSON) or error object."""
        return self._key("workflow_results", workflow_id)

    def workflow_done(self, workflow_id: str) -> str:
        """LIST the completion notice is pushed to (what a waiter blocks on)."""
        return self._key("workflow_done", workflow_id)

    def workflow_held(self, workflow_id: str, gate: str) -> str:
        """LIST step ids held back by a group's limit, in release order."""
        return self._key("workflow_held", workflow_id, gate)

    @property
    def workflow_totals(self) -> str:
        """HASH counters of every workflow: started, succeeded, failed, cancelled."""
        return self._key("workflow_totals")
