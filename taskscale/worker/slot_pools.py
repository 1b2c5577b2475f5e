"""A worker's slot pools: executor threads for plain functions, event-loop
slots for ``async def`` ones.

Each pool has its own claimer thread that claims, over the pool's types
only, as many tasks as the pool has free slots (``claim.lua``'s ``free``),
and waits on those types' wake lists only -- so a full pool never takes a
wake token its types' tasks would need elsewhere, and a worker with only
plain functions has one pool and behaves as it always did.  A type with no
registered function goes to the thread pool (where it is dead-lettered with
the reason).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from taskscale.tasks import TaskRegistry
from taskscale.worker.claim_pacing import ClaimPacer
from taskscale.worker.execution import Claimed

#: Pool names, as :class:`~taskscale.worker.tally.Tally` counts them.
SYNC, ASYNC = "sync", "async"


@dataclass
class SlotPool:
    """One kind of slot, the types it runs and how a claimed task reaches it."""

    kind: str
    types: tuple[str, ...]
    slots: int
    pacer: ClaimPacer
    #: Hands one claim's tasks to the pool's executors.
    dispatch: Callable[[list[Claimed]], None]
    #: Set whenever a slot of this pool frees up (wakes its claimer).
    freed: threading.Event = field(default_factory=threading.Event)
    _rotation: int = 0

    def rotated_types(self) -> list[str]:
        """The pool's types, starting one further each call (fairness)."""
        types = list(self.types)
        self._rotation = (self._rotation + 1) % len(types)
        return types[self._rotation :] + types[: self._rotation]


def split_types(
    registry: TaskRegistry, types: tuple[str, ...]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(thread types, async types)`` of ``types``, in their order."""
    async_types = tuple(t for t in types if registry.is_async(t))
    return tuple(t for t in types if t not in async_types), async_types
