"""The observer reads each type's flow-control limits in its one round trip,
and the reconciler's decision for a capped type stops at its cap."""

from __future__ import annotations

import pytest
import redis

from taskscale.controller.observer import Observer, ObserveRequest
from taskscale.controller.policy import History, decide
from taskscale.controller.types import ScalingPolicy, TypePolicy
from taskscale.keys import Keys
from taskscale.limits import set_limits
from taskscale.producer import Call, Producer

pytestmark = pytest.mark.integration


def test_observation_carries_each_types_limits(r: redis.Redis) -> None:
    keys = Keys("taskscale")
    set_limits("capped", concurrency=6, rate="30/min", client=r, keys=keys)
    set_limits("fast", rate="100/s", client=r, keys=keys)
    r.hset(keys.limits, "broken", "not json")
    Producer(r, keys=keys).enqueue_many("capped", [Call((i,)) for i in range(40)])
    got = Observer(r, keys).observe(
        {"s": ObserveRequest(types=("capped", "fast", "plain", "broken"), lead_s=0)}
    )["s"]
    capped, fast, plain = got.types["capped"], got.types["fast"], got.types["plain"]
    assert (capped.concurrency_limit, capped.rate_limit_per_s) == (6, 0.5)
    assert (fast.concurrency_limit, fast.rate_limit_per_s) == (None, 100.0)
    assert (plain.concurrency_limit, plain.rate_limit_per_s) == (None, None)
    assert got.types["broken"].concurrency_limit is None  # ignored, as claim.lua does
    policy = ScalingPolicy(types=(TypePolicy("capped"),), tasks_per_replica=4, max_replicas=20)
    decision = decide(got, policy, History(), now=got.at, current=0)
    assert decision.desired == 2  # ceil(6 / 4), not ceil(40 / 4)
    assert "'capped' runs at most 6: 2 replicas at most" in decision.reason
