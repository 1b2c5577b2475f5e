"""The history keys' members of :class:`taskscale.keys.Keys` (a base class of
it), apart so keys.py stays one screenful of the task queue's own keys, as
:mod:`taskscale.workflow_keys` does for workflows.

The shapes are rows of ``keys.KEY_SHAPES`` like every other key
(docs/schema.md, "History"); ``Keys`` supplies ``_key``, which builds a name
from that table.
"""

from __future__ import annotations


class HistoryKeys:
    """Key names of a namespace's history and recent runs (taskscale.history)."""

    def _key(self, member: str, *parts: object) -> str:
        raise NotImplementedError  # Keys builds every name from KEY_SHAPES

    def history(self, task_type: str, bucket: int) -> str:
        """HASH of one 10 s bucket of a type's history (taskscale.history):
        counts, samples and log-scale histograms; expires after 24 h."""
        return self._key("history", task_type, bucket)

    def recent(self, task_type: str) -> str:
        """LIST of the type's most recently finished runs, newest first (JSON
        records), capped by the workers' ``--recent-cap``."""
        return self._key("recent", task_type)

    @property
    def history_sampled(self) -> str:
        """STRING: the last history bucket a scheduler sampled queued/running in."""
        return self._key("history_sampled")
