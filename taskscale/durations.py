"""A length of time as a person reads it: the one formatter of the CLI's
tables (``taskscale status``, ``schedules list``).

``79029.2`` seconds is "21h57m", not "79029.2s": two units at most, the
larger first, so a nightly schedule's next run, a worker's last heartbeat
and an idle type read alike.
"""

from __future__ import annotations

import math

_MINUTE, _HOUR, _DAY = 60, 3600, 86400


def span(seconds: float) -> str:
    """``4.2s``, ``3m05s``, ``21h57m``, ``3d04h`` (negative and nan read as 0,
    infinity as ``forever``); each unit rounded down."""
    if math.isnan(seconds) or seconds < 0:
        seconds = 0.0
    if math.isinf(seconds):
        return "forever"
    if seconds < _MINUTE:
        return f"{math.floor(seconds * 10) / 10:.1f}s"
    whole = int(seconds)
    if whole < _HOUR:
        return f"{whole // _MINUTE}m{whole % _MINUTE:02d}s"
    if whole < _DAY:
        return f"{whole // _HOUR}h{whole % _HOUR // _MINUTE:02d}m"
    return f"{whole // _DAY}d{whole % _DAY // _HOUR:02d}h"
