"""Exponential backoff: the one formula every hand-written retry loop uses.

A loop that sleeps between its own attempts -- the supervisor restarting a
crashed worker process, the claimer after a Redis error, the reconciler
retrying a failed scaler, the demand listener resubscribing, the TaskScaler
watch relisting, a failed task waiting for its retry -- waits
:func:`exponential` of its attempt count, optionally spread by a jitter so
that many callers failing together do not retry in step:

* :func:`full_jitter` -- anywhere in ``[0, delay)`` (the most spread);
* :func:`equal_jitter` -- in ``[delay / 2, delay)``: half fixed, half random;
* :func:`spread` -- within ``+-fraction`` of the delay.

Each caller keeps its own numbers (base, cap, factor, which jitter); only the
formula is shared.  Pure: no sleeping, no I/O; the random source is a
parameter, so a test can pin it.  (A call wrapped in tenacity uses
:mod:`taskscale.retrying` instead.)
"""

from __future__ import annotations

import random
from collections.abc import Callable

__all__ = ["equal_jitter", "exponential", "full_jitter", "spread"]

#: A uniform random number in [0, 1).
Rand = Callable[[], float]


def exponential(attempt: int, *, base_s: float, cap_s: float, factor: float = 2.0) -> float:
    """``base_s * factor ** attempt`` seconds, at most ``cap_s``.

    ``attempt`` 0 (or less) is ``base_s``; each further attempt multiplies by
    ``factor``.  Never overflows: a delay too large for a float is ``cap_s``."""
    try:
        delay = base_s * float(factor) ** max(0, attempt)
    except OverflowError:
        return cap_s
    return min(cap_s, delay)


def full_jitter(delay: float, rand: Rand = random.random) -> float:
    """A random delay in ``[0, delay)``."""
    return delay * rand()


def equal_jitter(delay: float, rand: Rand = random.random) -> float:
    """A random delay in ``[delay / 2, delay)``: half fixed, half random."""
    return delay * (0.5 + rand() / 2)


def spread(delay: float, fraction: float, rand: Rand = random.random) -> float:
    """A random delay in ``[delay * (1 - fraction), delay * (1 + fraction))``."""
    return delay * (1 + fraction * (2 * rand() - 1))
