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
formula is shared.  A caller that holds a lease (a worker) caps its delays
with :func:`lease_cap` too: a retry must come soon after the server is back,
or an outage shorter than the lease costs the lease.  Pure: no sleeping, no
I/O; the random source is a parameter, so a test can pin it.  (A call wrapped in tenacity uses
:mod:`taskscale.retrying` instead.)
"""

from __future__ import annotations

import random
from collections.abc import Callable

__all__ = ["equal_jitter", "exponential", "full_jitter", "lease_cap", "spread"]

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


#: The longest wait between two attempts of a lease holder, as a fraction of
#: its lease: with a 10 s lease an attempt every 0.5 s at most, so an outage
#: of up to ``lease - heartbeat - lease * LEASE_FRACTION`` (minus the jitter)
#: never costs the lease.
LEASE_FRACTION = 0.05
#: ... but never below this (a tiny test lease must not spin).
LEASE_CAP_FLOOR_S = 0.05


def lease_cap(cap_s: float, lease_s: float) -> float:
    """``cap_s``, or less: at most :data:`LEASE_FRACTION` of ``lease_s``
    (not under :data:`LEASE_CAP_FLOOR_S`)."""
    return min(cap_s, max(LEASE_CAP_FLOOR_S, lease_s * LEASE_FRACTION))


def full_jitter(delay: float, rand: Rand = random.random) -> float:
    """A random delay in ``[0, delay)``."""
    return delay * rand()


def equal_jitter(delay: float, rand: Rand = random.random) -> float:
    """A random delay in ``[delay / 2, delay)``: half fixed, half random."""
    return delay * (0.5 + rand() / 2)


def spread(delay: float, fraction: float, rand: Rand = random.random) -> float:
    """A random delay in ``[delay * (1 - fraction), delay * (1 + fraction))``."""
    return delay * (1 + fraction * (2 * rand() - 1))
