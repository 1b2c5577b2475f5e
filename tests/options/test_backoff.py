"""Retry backoff under a task's own options (pure: no Redis)."""

from __future__ import annotations

import pytest

from taskscale.options import Resolved, TaskOptions, resolve
from taskscale.worker.execution import RetryPolicy


def test_a_tasks_base_and_cap_replace_the_workers_with_its_factor_and_jitter() -> None:
    policy = RetryPolicy(base_s=1.0, factor=2.0, cap_s=3600.0, jitter=0.1)
    options = Resolved(retry_backoff=0.5, retry_backoff_max=2.0)
    delays = [policy.for_task(options, attempts) / 1000 for attempts in range(6)]
    for got, want in zip(delays, [0.5, 1.0, 2.0, 2.0, 2.0, 2.0], strict=True):
        assert want * 0.9 <= got <= want * 1.1, delays


def test_a_schedule_is_exact_and_its_last_delay_repeats() -> None:
    policy = RetryPolicy(jitter=0.5)
    options = resolve(TaskOptions(retry_backoff=[0, 5, 60]).envelope_fields(), None)
    assert [policy.for_task(options, a) for a in range(5)] == [1, 5000, 60000, 60000, 60000]


def test_without_options_the_workers_policy_applies() -> None:
    policy = RetryPolicy(base_s=3.0, factor=2.0, cap_s=10.0, jitter=0.0)
    assert [policy.for_task(Resolved(), a) for a in range(3)] == [3000, 6000, 10000]


def test_absurd_option_values_are_refused_with_a_sentence() -> None:
    for bad in ({"timeout": 1e30}, {"result_ttl": 10**12}, {"retry_backoff": [1, float("nan")]}):
        with pytest.raises(ValueError, match="must be"):
            TaskOptions(**bad)  # type: ignore[arg-type]
