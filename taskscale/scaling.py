"""Read the scaling decisions the controller records (the dashboard's scaling page).

The controller's :class:`~taskscale.controller.decision_log.DecisionLog`
writes, per scaler, its last pass and a capped timeline of decisions
(docs/schema.md, "Scaling decisions"); this reader lives on the runtime side
so the dashboard needs no Kubernetes client.
"""

from __future__ import annotations

import json
from typing import Any

from taskscale.keys import Keys
from taskscale.redis_urls import RedisClient
from taskscale.text import as_text


def _doc(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        doc = json.loads(as_text(raw))
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def read_scalers(client: RedisClient, keys: Keys, *, decisions: int = 50) -> list[dict[str, Any]]:
    """Every scaler that reported a pass: ``{...last pass, "reported_ms",
    "decisions": [newest first]}``, ordered by scaler key."""
    found: list[tuple[bytes | str, float]] = client.zrange(  # type: ignore[assignment]
        keys.scalers, 0, -1, withscores=True
    )
    names = sorted((as_text(n), int(s)) for n, s in found)
    if not names:
        return []
    pipe = client.pipeline(transaction=False)
    for name, _ in names:
        pipe.get(keys.scaler(name))
        pipe.lrange(keys.decisions(name), 0, max(0, decisions - 1))
    replies = pipe.execute()
    out: list[dict[str, Any]] = []
    for i, (name, reported_ms) in enumerate(names):
        last = _doc(replies[2 * i]) or {"scaler": name}
        timeline = [d for d in (_doc(r) for r in replies[2 * i + 1]) if d is not None]
        out.append({**last, "scaler": name, "reported_ms": reported_ms, "decisions": timeline})
    return out
