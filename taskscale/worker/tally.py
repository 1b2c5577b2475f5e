"""What a worker holds right now, shared by its claimer, executors and reporter.

One lock guards three things that must agree: how many slots are busy (per
pool: executor threads, ``"sync"``, and event-loop slots, ``"async"``), which
claimed task ids have no recorded outcome yet (what a lost claim reply is
reconciled against), and the per-type counts the registry record shows.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass
class TypeStats:
    completed: int = 0
    failed: int = 0
    total_ms: int = 0

    def as_record(self) -> dict[str, float]:
        runs = max(1, self.completed + self.failed)
        return {
            "completed": self.completed,
            "failed": self.failed,
            "avg_ms": round(self.total_ms / runs, 3),
        }


@dataclass
class Tally:
    """Busy slots (per pool), held task ids and per-type stats under one lock."""

    _busy: dict[str, int] = field(default_factory=dict)
    _held: dict[str, int] = field(default_factory=dict)  #: task id -> claimed at, unix ms
    _stats: dict[str, TypeStats] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def busy(self) -> int:
        """Busy slots of every pool."""
        with self._lock:
            return sum(self._busy.values())

    def busy_in(self, pool: str) -> int:
        """Busy slots of one pool."""
        with self._lock:
            return self._busy.get(pool, 0)

    def claimed(self, task_ids: Iterable[str], pool: str = "sync", at_ms: int = 0) -> None:
        """``task_ids`` were claimed at ``at_ms`` (Redis clock, the claim's reply)."""
        ids = list(task_ids)
        with self._lock:
            self._busy[pool] = self._busy.get(pool, 0) + len(ids)
            self._held.update(dict.fromkeys(ids, at_ms))

    def released(self, pool: str = "sync") -> None:
        """One slot of ``pool`` is free again (its outcome may not be recorded yet)."""
        with self._lock:
            self._busy[pool] -= 1

    def recorded(self, outcomes: Iterable[tuple[str, str, bool, int]]) -> None:
        """Outcomes ``(task_id, task_type, ok, service_ms)`` are in Redis."""
        with self._lock:
            for task_id, task_type, ok, service_ms in outcomes:
                self._held.pop(task_id, None)
                stats = self._stats.setdefault(task_type, TypeStats())
                if ok:
                    stats.completed += 1
                else:
                    stats.failed += 1
                stats.total_ms += service_ms

    def not_held(self, task_ids: Iterable[str]) -> list[str]:
        """Of ``task_ids``, those this worker does not know it holds (sorted)."""
        with self._lock:
            return sorted(set(task_ids) - self._held.keys())

    def held_since(self, most: int = 200) -> dict[str, int]:
        """Up to ``most`` held task ids and when each was claimed (the
        registry record's ``running``: the console's started/elapsed)."""
        with self._lock:
            return dict(list(self._held.items())[:most])

    def snapshot(self) -> tuple[int, dict[str, dict[str, float]]]:
        """``(busy, {type: {completed, failed, avg_ms}})`` at one instant."""
        with self._lock:
            busy = sum(self._busy.values())
            return busy, {t: s.as_record() for t, s in self._stats.items()}
