"""The scaling rules, in the order they apply: the one place a decision is made.

Every rule is a pure module of this package with one function,
``apply(facts, step) -> step`` (base.py: :class:`Facts` is what the pass
knows, :class:`Step` the decision so far).  :data:`RULES` lists them in
order, and :func:`apply` runs them for the reconcile pass and for
``policy.decide`` (the simulator's entry) alike; a rule whose input is
missing -- ``decide`` has no pause, fallback or StatefulSet -- returns the
step it was given (so :func:`apply` skips the four whose setting -- a
fallback, draining pods, a rollout, a StatefulSet -- the facts lack:
:data:`PLAIN_RULES`).  An override (pause, fallback, fail-static) marks its
step final and no rule after it runs.

A new scaling signal is one new module here with its ``apply``, its place in
:data:`RULES`, its test, its CRD field and its docs (docs/architecture.md,
"Where to add a scaling signal"); tests/controller/test_rules_registry.py
fails for a module that is not listed, and checks the order is the
documented one.
"""

from __future__ import annotations

from taskscale.controller.rules import (
    busy_hold,
    caps,
    drain_capacity,
    fail_static,
    fallback,
    idle,
    no_scheduler,
    ordinal_hold,
    pause,
    queue_wait,
    rollout_hold,
    sizing,
    stabilization,
    steady,
    step_limit,
)
from taskscale.controller.rules.base import Facts, Rule, Step
from taskscale.controller.types import Decision, ReasonCode

__all__ = ["NEED_SETTINGS", "PLAIN_RULES", "RULES", "Facts", "Rule", "Step", "apply"]

RULES: tuple[Rule, ...] = (
    pause.apply,  # Paused: a pause annotation decides alone
    fallback.apply,  # Fallback: Redis unread for afterFailures passes -> its replicas
    fail_static.apply,  # FailStatic: Redis unread -> hold the current replicas
    sizing.apply,  # Demand, Lookahead, RateFloor, HoldActive, Min/MaxReplicas
    queue_wait.apply,  # QueueWait: the oldest task waits past maxQueueWaitSeconds
    drain_capacity.apply,  # Demand: a busy draining pod's free threads are no capacity
    idle.apply,  # Idle, WaitingIdle: min only once every type is idle
    stabilization.apply,  # Stabilizing: the scale-up / scale-down windows
    step_limit.apply,  # StepLimit: maxScaleUpStep / maxScaleDownStep
    busy_hold.apply,  # HoldActive: a scale-down keeps the running tasks
    steady.apply,  # Steady: nothing changes
    no_scheduler.apply,  # (sentence) due tasks not counted with no scheduler alive
    caps.apply,  # (sentence) tasks waiting beyond a concurrency cap
    rollout_hold.apply,  # RolloutHold: no scale-down in the middle of a rollout
    ordinal_hold.apply,  # HoldActive: a StatefulSet keeps its highest busy ordinal
)


#: The rules that read a setting only the reconcile pass gives (a fallback,
#: draining pods, a rollout, a StatefulSet) and return the step they were
#: given without it.
NEED_SETTINGS = frozenset(
    (fallback.apply, drain_capacity.apply, rollout_hold.apply, ordinal_hold.apply)
)
#: :data:`RULES` without those: what runs for facts with none of the settings
#: (``policy.decide``'s, and most passes'), four calls fewer a scaler a pass.
PLAIN_RULES: tuple[Rule, ...] = tuple(r for r in RULES if r not in NEED_SETTINGS)


def apply(facts: Facts) -> Decision:
    """The decision :data:`RULES` make from ``facts``."""
    current = facts.current
    step = Step(current, ReasonCode.STEADY, "no rule changed the replicas")
    plain = (
        facts.fallback is None
        and not facts.draining
        and facts.rollout is None
        and facts.statefulset is None
    )
    for rule in PLAIN_RULES if plain else RULES:
        step = rule(facts, step)
        if step.final:
            break
    return step.decision(current)
