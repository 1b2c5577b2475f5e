"""Flow control per task type, across all workers: a rate limit and a concurrency cap.

``set_limits("email", rate="100/s", concurrency=20)`` (or ``taskscale limits
set email --rate 100/s --concurrency 20``) writes the type's limits to the
``{ns}:limits`` hash in one ``limits_set.lua`` call.  Nothing else enforces
them: ``claim.lua`` reads them inside the same atomic step that pops the
tasks, so no worker -- of any number, in any language that calls the script
-- ever claims beyond them:

* **rate**: N tasks per period, a token bucket in Redis refilled on the
  Redis clock (``{ns}:bucket:T``); its ``burst`` (default 1) is how many
  tokens it holds when full.  With burst B, any window of one period sees at
  most N + B - 1 claims of the type.
* **concurrency**: at most K tasks of the type running fleet-wide, counted by
  ``ACTIVE_TASKS``, which complete / fail / requeue / reap keep exact -- so a
  crashed worker's slots come back when the reaper returns its tasks.

The controller reads the same hash: a capped type never asks for more than
ceil(K / tasksPerReplica) replicas.  docs/schema.md has the format.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from redis.commands.core import Script

from taskscale.connection import RedisLike, client_for
from taskscale.keys import Keys, check_name
from taskscale.luascripts import bound_script
from taskscale.redis_urls import RedisClient
from taskscale.text import as_text

#: Tokens a rate bucket holds unless told (``set_limits``, ``taskscale limits set``).
DEFAULT_BURST = 1

#: Every spelling of a period's unit :func:`parse_rate` reads (singular and plural).
_UNITS_S = {
    **dict.fromkeys(("ms", "msec", "millisecond", "milliseconds"), 0.001),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1.0),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60.0),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600.0),
}
_RATE_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d*\.?\d*)\s*([a-z]+)\s*$")


@dataclass(frozen=True)
class TypeLimits:
    """The limits of one task type (None = no such limit)."""

    task_type: str
    #: Tasks per ``period_s`` (the rate limit), or None.
    rate: int | None = None
    period_s: float = 1.0
    #: Tokens the bucket holds when full: claims allowed back to back.
    burst: int = 1
    #: Most tasks of the type running at once across every worker, or None.
    concurrency: int | None = None

    @property
    def rate_per_s(self) -> float | None:
        return None if self.rate is None else self.rate / self.period_s

    def describe(self) -> str:
        """E.g. ``rate 100/1s (burst 1), concurrency 20``."""
        parts = []
        if self.rate is not None:
            parts.append(f"rate {self.rate}/{self.period_s:g}s (burst {self.burst})")
        if self.concurrency is not None:
            parts.append(f"concurrency {self.concurrency}")
        return ", ".join(parts) or "none"

    def to_json(self) -> str:
        doc: dict[str, int] = {}
        if self.rate is not None:
            doc.update(rate=self.rate, period_ms=round(self.period_s * 1000), burst=self.burst)
        if self.concurrency is not None:
            doc["concurrency"] = self.concurrency
        return json.dumps(doc, separators=(",", ":"))

    @classmethod
    def from_json(cls, task_type: str, text: str | bytes) -> TypeLimits:
        """Read a ``{ns}:limits`` field; what a foreign writer left out is no limit."""
        doc = json.loads(text)
        if not isinstance(doc, dict):
            raise ValueError(f"limits of {task_type!r} are not a JSON object")
        rate, period = int(doc.get("rate") or 0), int(doc.get("period_ms") or 0)
        cap = int(doc.get("concurrency") or 0)
        return cls(
            task_type=task_type,
            rate=rate if rate > 0 and period > 0 else None,
            period_s=period / 1000 if period > 0 else 1.0,
            burst=max(1, int(doc.get("burst") or 1)),
            concurrency=cap if cap > 0 else None,
        )


def parse_rate(text: str) -> tuple[int, float]:
    """``"100/s"`` -> (100, 1.0); also ``10/min``, ``5/2s``, ``3/500ms``,
    ``100/hour``: the one reader of a rate (``taskscale limits set --rate``,
    ``set_limits``, ``taskscale demo --rate``).  Units: ms, s / sec / second,
    m / min / minute, h / hr / hour (and their plurals), any case."""
    match = _RATE_RE.match(text.lower())
    unit = _UNITS_S.get(match.group(3)) if match else None
    if match is None or unit is None:
        raise ValueError(
            f"invalid rate {text!r}: use N/UNIT, e.g. 100/s, 10/min, 100/hour, 5/2s, 3/500ms"
        )
    period = float(match.group(2) or 1) * unit
    count = int(match.group(1))
    if count < 1 or not math.isfinite(period) or period < 0.001:
        raise ValueError(f"invalid rate {text!r}: at least 1 task per at least 1 ms")
    if count > 1_000_000_000 or period > 315_360_000:
        raise ValueError(f"invalid rate {text!r}: at most 1e9 tasks per at most 10 years")
    return count, period


def _script(client: RedisClient) -> Script:
    return bound_script(client, "limits_set")


def set_limits(
    task_type: str,
    *,
    rate: str | None = None,
    concurrency: int | None = None,
    burst: int = DEFAULT_BURST,
    client: RedisLike = None,
    keys: Keys | None = None,
) -> TypeLimits:
    """Replace the limits of ``task_type`` (what is not given is no limit).

    ``rate`` like ``"100/s"`` (see :func:`parse_rate`); ``concurrency`` the
    most tasks running at once across all workers; ``burst`` the bucket size.
    Takes effect at every worker's next claim.
    """
    check_name("task type", task_type)
    if rate is None and concurrency is None:
        raise ValueError("give a rate, a concurrency or both (clear_limits removes them)")
    if concurrency is not None and not _whole(concurrency):
        raise ValueError(f"invalid concurrency {concurrency!r}: a whole number from 1 to 1e9")
    if not _whole(burst):
        raise ValueError(f"invalid burst {burst!r}: a whole number from 1 to 1e9")
    if rate is not None and not isinstance(rate, str):
        raise ValueError(f"invalid rate {rate!r}: a string N/UNIT, e.g. '100/s' or '10/min'")
    count, period = parse_rate(rate) if rate is not None else (None, 1.0)
    limits = TypeLimits(task_type, count, period, burst, concurrency)
    _call(task_type, limits.to_json(), client, keys)
    return limits


def _whole(value: object) -> bool:
    """A whole number from 1 to 1e9 (a bool, 1.5 or "3" is not)."""
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 1_000_000_000


def clear_limits(task_type: str, *, client: RedisLike = None, keys: Keys | None = None) -> bool:
    """Remove the limits of ``task_type``; True if it had any."""
    check_name("task type", task_type)
    return _call(task_type, "", client, keys)


def _call(task_type: str, spec: str, client: RedisLike, keys: Keys | None) -> bool:
    conn = client_for(client)
    keys = Keys.or_env(keys)
    return bool(_script(conn)(keys=[keys.limits], args=[keys.prefix, task_type, spec], client=conn))


def get_limits(*, client: RedisLike = None, keys: Keys | None = None) -> dict[str, TypeLimits]:
    """Every type's limits, by type name (a field that does not decode is skipped)."""
    conn = client_for(client)
    keys = Keys.or_env(keys)
    return parse_limits(conn.hgetall(keys.limits))


def parse_limits(raw: dict[Any, Any]) -> dict[str, TypeLimits]:
    """Decode HGETALL ``{ns}:limits`` (a field that does not decode is skipped)."""
    out: dict[str, TypeLimits] = {}
    for field, value in raw.items():
        name = as_text(field)
        try:
            out[name] = TypeLimits.from_json(name, value)
        except (ValueError, TypeError):
            continue
    return dict(sorted(out.items()))
