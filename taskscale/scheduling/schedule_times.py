"""When a periodic schedule fires: the timing rules, with no I/O.

A schedule is either a cron expression (5 fields, or 6 with seconds first),
read in a time zone (IANA name, default UTC), or an interval: ``every=N``
seconds fires at the multiples of N since the Unix epoch (``every=60`` at the
start of each minute), so every scheduler computes the same instants without
sharing an anchor.  Cron expressions are parsed and iterated by ``cronsim``
(maintained, typed, no dependencies; it follows Debian cron across daylight
saving changes: a time skipped by a spring-forward runs at the first valid
minute after it, a repeated one runs once).

All instants are unix milliseconds from the Redis clock, passed in by the
caller; nothing here reads a clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError


@dataclass(frozen=True)
class Timing:
    """Exactly one of ``cron`` (with ``tz``) and ``every_ms``."""

    cron: str = ""
    every_ms: int = 0
    tz: str = ""
    #: After downtime: True runs every missed occurrence, False runs them once.
    catch_up: bool = False


#: The longest interval of an ``every=`` schedule (10 years, like a delay).
_MAX_EVERY_S = 10 * 365 * 24 * 3600


def timing(
    *,
    cron: str | None = None,
    every: float | None = None,
    tz: str | None = None,
    catch_up: bool = False,
) -> Timing:
    """A checked :class:`Timing`; ValueError with a sentence for bad input."""
    if (cron is None) == (every is None):
        raise ValueError("give exactly one of cron='* * * * *' and every=seconds")
    if every is not None:
        if tz:
            raise ValueError("tz applies to cron schedules only (every= counts from the epoch)")
        if isinstance(every, bool) or not isinstance(every, int | float):
            raise ValueError(f"every must be a number of seconds, not {every!r}")
        if not math.isfinite(every) or every <= 0:
            raise ValueError(f"every must be a finite number of seconds > 0, not {every!r}")
        if every > _MAX_EVERY_S:
            raise ValueError(f"every must be at most {_MAX_EVERY_S} s (10 years), not {every!r}")
        every_ms = round(every * 1000)
        if every_ms < 1:
            raise ValueError(f"every must be at least 0.001 seconds, not {every!r}")
        return Timing(every_ms=every_ms, catch_up=bool(catch_up))
    assert cron is not None
    if not isinstance(cron, str):
        raise ValueError(f"invalid cron expression {cron!r}: a string such as '*/5 * * * *'")
    if not cron.strip():
        raise ValueError(f"invalid cron expression {cron!r}: it is empty")
    if tz is not None and not isinstance(tz, str):
        raise ValueError(f"unknown time zone {tz!r}: use an IANA name such as Europe/Berlin")
    expr = " ".join(cron.split())
    zone = _zone(tz or "")
    try:
        CronSim(expr, datetime.now(zone))
    except (CronSimError, ValueError) as exc:
        raise ValueError(f"invalid cron expression {cron!r}: {exc}") from None
    return Timing(cron=expr, tz=tz or "", catch_up=bool(catch_up))


def _zone(tz: str) -> ZoneInfo:
    if not tz:
        return ZoneInfo("UTC")
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown time zone {tz!r}: use an IANA name such as Europe/Berlin or UTC"
        ) from None


def first_after(spec: Timing, after_ms: int) -> int:
    """The first occurrence strictly after ``after_ms`` (unix ms)."""
    if spec.every_ms:
        return (after_ms // spec.every_ms + 1) * spec.every_ms
    zone = _zone(spec.tz)
    start = datetime.fromtimestamp(after_ms / 1000, UTC).astimezone(zone)
    try:
        found = next(iter(CronSim(spec.cron, start)))
    except (CronSimError, StopIteration) as exc:
        raise ValueError(f"cron expression {spec.cron!r} has no next occurrence: {exc}") from None
    return max(after_ms + 1, round(found.timestamp() * 1000))


def following(spec: Timing, previous_ms: int, now_ms: int) -> int:
    """The occurrence to materialize once ``previous_ms`` is due (0 = none yet).

    Without catch-up it is the first after ``now``, so the ticks missed while
    every scheduler was down are covered by the one that was pending (it runs
    once, late); with catch-up it is the first after ``previous_ms``, so each
    missed tick runs in turn.
    """
    if previous_ms <= 0:
        return first_after(spec, now_ms)
    if spec.catch_up:
        return first_after(spec, previous_ms)
    return first_after(spec, max(previous_ms, now_ms))
