"""The controller and paused task types (``taskscale types pause``): the
observer reads the paused hash in its one round trip; a scaler whose types
are all paused holds its replicas (Paused); with some paused, their backlog
and their waits drive nothing, the others decide."""

from __future__ import annotations

import time

import pytest
import redis

from taskscale.controller.observer import Observer, ObserveRequest
from taskscale.controller.policy import History, decide
from taskscale.controller.types import Observation, ReasonCode, ScalingPolicy, TypePolicy
from taskscale.keys import Keys
from taskscale.pausing import pause_type, resume_type
from taskscale.producer import Call, Producer

pytestmark = pytest.mark.integration


def observe(r: redis.Redis, keys: Keys, *types: str) -> Observation:
    return Observer(r, keys).observe({"s": ObserveRequest(types=types, lead_s=0)})["s"]


def test_every_type_paused_holds_the_current_replicas(r: redis.Redis, keys: Keys) -> None:
    Producer(r, keys=keys).enqueue_many("mail", [Call((i,)) for i in range(40)])
    pause_type("mail", client=r, keys=keys)
    got = observe(r, keys, "mail", "other")
    assert got.types["mail"].paused and not got.types["other"].paused
    only_mail = ScalingPolicy(types=(TypePolicy("mail"),), tasks_per_replica=4, max_replicas=20)
    for current in (0, 3):
        decision = decide(got, only_mail, History(), now=got.at, current=current)
        assert (decision.desired, decision.reason_code) == (current, ReasonCode.PAUSED)
        assert "paused" in decision.reason
    resume_type("mail", client=r, keys=keys)
    got = observe(r, keys, "mail")
    assert not got.types["mail"].paused
    decision = decide(got, only_mail, History(), now=got.at, current=0)
    assert decision.desired == 10  # 40 / 4: demand again


def test_a_paused_types_backlog_and_wait_drive_nothing(r: redis.Redis, keys: Keys) -> None:
    producer = Producer(r, keys=keys)
    producer.enqueue_many("mail", [Call((i,)) for i in range(40)])
    producer.enqueue_many("thumbs", [Call((i,)) for i in range(8)])
    pause_type("mail", client=r, keys=keys)
    got = observe(r, keys, "mail", "thumbs")
    policy = ScalingPolicy(
        types=(TypePolicy("mail", max_queue_wait_s=0.001), TypePolicy("thumbs")),
        tasks_per_replica=4,
        max_replicas=20,
    )
    decision = decide(got, policy, History(), now=got.at, current=0)
    assert decision.desired == 2  # thumbs' 8 / 4; mail's 40 (and its wait) left out
    assert decision.reason_code != ReasonCode.PAUSED


def test_a_paused_types_old_task_keeps_no_replica(r: redis.Redis, keys: Keys) -> None:
    producer = Producer(r, keys=keys)
    producer.enqueue_many("mail", [Call((1,))])
    producer.enqueue_many("thumbs", [Call((i,)) for i in range(4)])
    pause_type("mail", client=r, keys=keys)
    time.sleep(0.01)
    policy = ScalingPolicy(
        types=(TypePolicy("mail", max_queue_wait_s=0.001), TypePolicy("thumbs")),
        tasks_per_replica=4,
        max_replicas=20,
        scale_down_stabilization_s=0,
    )
    got = observe(r, keys, "mail", "thumbs")
    assert (got.types["mail"].oldest_ready_s or 0) > 0.001
    # an unpaused type waiting that long would hold the 3 (no scale-down while it waits)
    assert decide(got, policy, History(), now=got.at, current=3).desired == 1
