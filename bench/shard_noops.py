"""No-op task types for bench.shard_bench (imported by its worker processes)."""

from __future__ import annotations

from typing import Any

from taskscale.tasks import registry

TYPES = tuple(f"n{i}" for i in range(12))


def noop(*args: Any, **kwargs: Any) -> None:
    return None


for _name in TYPES:
    registry.register(_name, noop)
