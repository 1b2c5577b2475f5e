"""A pod being drained gives no capacity: size the other replicas without it.

A pod on a node that is cordoned or tainted for removal gets the Redis drain
flag (controller/drain_flags.py) and claims nothing more; while it finishes
its running tasks the PodDisruptionBudget keeps it, and the ReplicaSet makes
its replacement only once it is evicted.  The sizing counts its running
tasks like any (they are work), but its free threads are no capacity: with
``tasksPerReplica`` 4, a draining pod running 1 task and 7 queued, the sizing
asks for ceil(8 / 4) = 2 replicas, of which the draining one takes none of
the queue.

So, with busy draining pods (an idle one is evicted at once and replaced by
the ReplicaSet: counting it would only churn), the work minus what they run
is sized on the other replicas, plus one replica per busy draining pod:
ceil(7 / 4) + 1 = 3 -- a replacement starts elsewhere while the drain waits.
It only ever raises the recommendation (clamped to maxReplicas); after the
eviction the pod is no longer draining and the usual scale-down (its window,
idle pods first) takes the extra replica back.

Pure: a rule of the list (rules/__init__.py), after the sizing and the
queue-wait rule; the recommendation it raises is the one the windows remember.
"""

from __future__ import annotations

from taskscale.controller.rules.base import Facts, Step, ceil_div
from taskscale.controller.types import ReasonCode, busy_by_pod


def apply(facts: Facts, step: Step) -> Step:
    """Raise the recommendation by what busy draining pods can no longer take."""
    observation, sizing, policy = facts.observation, step.sizing, facts.policy
    if observation is None or sizing is None or not facts.draining:
        return step
    busy = busy_by_pod(observation.workers)
    held = {pod: busy[pod] for pod in facts.draining if busy.get(pod, 0) > 0}
    if not held:
        return step
    running = sum(held.values())
    others = ceil_div(max(0, sizing.work - running), policy.tasks_per_replica)
    wanted = others + len(held)
    capped = min(wanted, policy.max_replicas)
    if capped <= step.replicas:
        return step
    why = (
        f"{len(held)} draining pod(s) finish {running} task(s) and take no more: "
        f"{others} other replica(s) for the rest of the work"
    )
    code = ReasonCode.DEMAND
    if capped < wanted:
        code, why = ReasonCode.MAX_REPLICAS, f"{why}, capped at maxReplicas"
    return Step(capped, code, f"{step.why}; {why}", capped, sizing)
