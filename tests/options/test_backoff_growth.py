"""RetryPolicy.backoff_ms stops growing after attempt 64 (pure: no Redis).

The clamp ``min(attempts, 64)`` in execution.py is not (only) an overflow
guard -- backoff.exponential has its own -- it is behaviour: a factor near 1
(or below it), or a tiny base under a large cap, reaches attempt 64 before
the cap, and the delay stays there instead of growing on."""

from __future__ import annotations

import pytest

from taskscale.worker.execution import RetryPolicy


def former(attempts: int, base_s: float, factor: float, cap_s: float) -> int:
    """The delay as execution.py has computed it since the start, jitter 0."""
    try:
        delay = base_s * factor ** min(max(0, attempts), 64)
    except OverflowError:
        return max(1, round(cap_s * 1000))
    return max(1, round(min(cap_s, delay) * 1000))


@pytest.mark.parametrize(
    ("base_s", "factor", "cap_s"),
    [
        (1.0, 2.0, 3600.0),
        (3.0, 2.0, 10.0),
        (1.0, 1.1, 3600.0),
        (1.0, 0.5, 3600.0),
        (1e-12, 2.0, 1e8),
    ],
)
def test_backoff_ms_is_the_former_formula_for_every_attempt(
    base_s: float, factor: float, cap_s: float
) -> None:
    policy = RetryPolicy(base_s=base_s, factor=factor, cap_s=cap_s, jitter=0.0)
    assert [policy.backoff_ms(a) for a in range(201)] == [
        former(a, base_s, factor, cap_s) for a in range(201)
    ]


def test_a_slow_factor_stops_growing_at_attempt_64() -> None:
    policy = RetryPolicy(base_s=1.0, factor=1.1, cap_s=3600.0, jitter=0.0)
    assert policy.backoff_ms(200) == policy.backoff_ms(64) < 3_600_000
