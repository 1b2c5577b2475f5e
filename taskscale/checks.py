"""The checks every public function makes of a number it is given.

A duration or a count reaches Redis as whole milliseconds or an integer
argument of a script; NaN, infinities, booleans, strings and absurd sizes
would surface there as Python internals (``cannot convert float NaN to
integer``) or a Lua error. These turn them into one sentence naming the
argument, raised before anything is sent.
"""

from __future__ import annotations

import math

#: The longest duration accepted (10 years): a larger one is a typo, not a plan.
MAX_SECONDS = 10 * 365 * 24 * 3600
#: The largest count accepted.
MAX_COUNT = 1_000_000_000


def seconds(name: str, value: float, *, positive: bool = False) -> float:
    """``value`` if it is a finite number of seconds, at least 0 (above 0 when
    ``positive``) and at most :data:`MAX_SECONDS`; else ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number of seconds, not {value!r}")
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{name} must be a finite number of seconds {bound}, not {value!r}")
    if value > MAX_SECONDS:
        raise ValueError(f"{name} must be at most {MAX_SECONDS} s (10 years), not {value!r}")
    return value


def whole(name: str, value: int, *, least: int, most: int = MAX_COUNT) -> int:
    """``value`` if it is an int (not a bool) from ``least`` to ``most``."""
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise ValueError(f"{name} must be a whole number from {least} to {most}, not {value!r}")
    return value
