"""The scaling policy: observations + settings + recent history -> replicas.

This is the one place that decides how many workers a target gets, and it
does no I/O, so the unit tests and ``bench/simulate.py`` drive the very code
the reconciler runs.  Each poll the reconciler calls::

    decision = decide(observation_or_None, policy, history, now=now, current=n)
    history.record(now, observation_or_None, decision)

The rules, in the order they apply:

1. **Sizing** (per served type, summed): demand = queued + due + active;
   look-ahead adds ``upcoming`` (delayed tasks due within the warm-up lead);
   a *rate floor* of arrival rate x mean service time (Little's law) keeps
   the workers of a queue that drains as fast as it fills.  Replicas =
   ceil(tasks / tasks-per-replica), clamped to [min, max].  A type capped at
   K running counts at most K (caps.py); a rate limit bounds its arrivals.
2. **Idle rule**: with nothing queued, due, upcoming or active, go to min
   only when every type has been idle past its threshold (a type that never
   completed a task is idle); until then keep one replica (or min) warm.
   Holding *every* current replica instead would keep a fleet sized for the
   last burst for the whole threshold: in bench/simulate.py that cost about
   as many replica-seconds as KEDA's 300 s cooldown.
3. **Stabilization** like the HPA's: a scale-up goes no higher than the
   lowest recommendation of the up window, a scale-down no lower than the
   highest of the down window (the idle rule's drop to min included).
   With ``maxQueueWaitSeconds`` on a type, the queue-wait rule
   (queue_wait.py) raises the recommendation while its oldest task waits
   longer than that.
4. **Bounded steps**, then **never below the busy**: a scale-down keeps at
   least ceil(active / tasks-per-replica) replicas, and at least one per
   pod still running a task, so -- with pod-deletion-cost ordering the
   removals -- a scale-down only ever removes idle workers.
5. **Fail-static**: no observation (Redis unreadable) -> keep the current
   replicas.  Missing data is never read as idle.

Arrival rates are measured as *ready arrivals*: claimed + growth of the
ready/due backlog between two observations.  The ``enqueued`` counter would
count a delayed task when it is scheduled (possibly hours early) instead of
when it becomes work; look-ahead covers it at the right moment instead.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from taskscale.controller.caps import within_cap
from taskscale.controller.history import RECOMMENDATION as RECOMMENDATION
from taskscale.controller.history import History as History
from taskscale.controller.queue_wait import apply_queue_wait
from taskscale.controller.types import (
    Decision,
    Observation,
    ReasonCode,
    ScalingPolicy,
    TypeObservation,
)

_NEVER_SEEN = TypeObservation(task_type="")
# Causes a decision may report as Steady when it changes nothing.
_SIZING_CODES = frozenset(
    {
        ReasonCode.DEMAND,
        ReasonCode.LOOKAHEAD,
        ReasonCode.RATE_FLOOR,
        ReasonCode.MIN_REPLICAS,
        ReasonCode.MAX_REPLICAS,
        ReasonCode.IDLE,
    }
)


@dataclass(frozen=True)
class _Sizing:
    """What the observation asks for, before windows, steps and holds."""

    queued: int
    due: int
    active: int
    upcoming: int
    busy_rate: float  #: tasks kept busy by arrivals (Little's law), non-idle types
    busy_pods: int
    all_idle: bool
    idle_note: str  #: which type is not idle yet, and for how long still
    details: dict[str, float] = field(default_factory=dict)
    stranded_due: int = 0  #: due delayed tasks not counted: no scheduler alive
    capped: int = 0  #: tasks of capped types beyond their cap: not counted
    cap_note: str = ""

    @property
    def work(self) -> int:
        return self.queued + self.due + self.active


def decide(
    observation: Observation | None,
    policy: ScalingPolicy,
    history: History,
    *,
    now: float,
    current: int,
) -> Decision:
    """How many replicas the target should have now, and why.

    ``now`` is the caller's clock (stabilization windows use it); idle ages
    and rates use ``observation.at``, the Redis clock ``IDLE_SINCE`` and the
    counters were written with.  ``current`` is the target's replicas now.
    """
    if observation is None:
        return Decision(
            desired=current,
            reason_code=ReasonCode.FAIL_STATIC,
            reason=f"{current} -> {current}: Redis could not be read; holding replicas",
        )
    sizing = _size(observation, policy, history)
    rec, code, why = _recommend(sizing, policy)
    working = max(sizing.busy_pods, _ceil_div(sizing.active, policy.tasks_per_replica))
    alive = observation.schedulers_alive != 0
    rec, code, why = apply_queue_wait(
        observation.types,
        policy,
        rec,
        code,
        why,
        working=working,
        current=current,
        scheduler_alive=alive,
    )
    target, code, why = _apply_idle_rule(sizing, policy, rec, code, why, current)
    desired, code, why = _stabilize(policy, history, now, rec, target, code, why, current)
    desired, code, why = _bound_step(policy, desired, code, why, current)
    desired, code, why = _hold_busy(sizing, policy, desired, code, why, current)
    if desired == current and code in _SIZING_CODES and target == current:
        code = ReasonCode.STEADY
    if sizing.stranded_due:
        why += (
            f"; {sizing.stranded_due} due delayed task(s) not counted: "
            "no scheduler is alive to make them ready"
        )
    if sizing.capped:
        why += f"; {sizing.capped} more waiting beyond a concurrency cap ({sizing.cap_note})"
    details = sizing.details
    details[RECOMMENDATION] = rec
    return Decision(
        desired=desired, reason_code=code, reason=f"{current} -> {desired}: {why}", details=details
    )


def _size(observation: Observation, policy: ScalingPolicy, history: History) -> _Sizing:
    """Sum the served types' numbers and derive their rates in one pass."""
    base = history.oldest_sample_since(observation.at - policy.rate_window_s)
    dt = observation.at - base.at if base is not None else 0.0
    queued = due = active = upcoming = 0
    busy_rate = 0.0
    all_idle = True
    idle_note = ""
    longest_wait = -1.0
    details: dict[str, float] = {}
    no_scheduler = observation.schedulers_alive == 0
    stranded = capped = 0
    cap_notes: list[str] = []
    for tp in policy.types:
        name = tp.name
        obs = observation.types.get(name, _NEVER_SEEN)
        if no_scheduler and obs.due:  # nothing can promote them: not work a worker may claim
            stranded += obs.due
            obs = dataclasses.replace(obs, due=0)
        raw, (obs, over) = obs, within_cap(obs, policy.tasks_per_replica, cap_notes)
        capped += over
        queued += obs.queued
        due += obs.due
        active += obs.active
        upcoming += obs.upcoming
        wait = _idle_wait(obs, tp.idle_threshold_s, observation.at)
        if wait > 0:
            all_idle = False
            if wait > longest_wait:
                longest_wait = wait
                idle_note = _idle_note(name, obs, tp.idle_threshold_s, observation.at)
            if base is not None and dt > 0:
                busy_rate += _type_rate(name, raw, base.types.get(name), dt, details)
    return _Sizing(
        queued=queued,
        due=due,
        active=active,
        upcoming=upcoming,
        busy_rate=busy_rate,
        busy_pods=_busy_pods(observation),
        all_idle=all_idle,
        idle_note=idle_note,
        details=details,
        stranded_due=stranded,
        capped=capped,
        cap_note=", ".join(cap_notes),
    )


def _idle_wait(obs: TypeObservation, threshold_s: float, at: float) -> float:
    """Seconds until the type counts as idle (0 = idle now; inf = busy)."""
    if obs.queued or obs.due or obs.active:
        return math.inf
    if obs.idle_since is None:  # never finished a task: never seen
        return 0.0
    return max(0.0, threshold_s - (at - obs.idle_since))


def _idle_note(name: str, obs: TypeObservation, threshold_s: float, at: float) -> str:
    if obs.queued or obs.due or obs.active:
        return f"{name!r} has work"
    idle_for = at - (obs.idle_since or at)
    return f"{name!r} idle {idle_for:.0f} s of {threshold_s:g} s"


def _increase(old: int, new: int) -> int:
    """Counter increase between two reads; a smaller value means the counter
    restarted from zero, so the increase is the new value (never negative)."""
    return new - old if new >= old else new


def _type_rate(
    name: str,
    obs: TypeObservation,
    old: TypeObservation | None,
    dt: float,
    details: dict[str, float],
) -> float:
    """Tasks of one type kept busy by its arrivals: arrival rate x service time."""
    if old is None:
        old = _NEVER_SEEN
    claimed = obs.claimed_total - old.claimed_total
    if claimed < 0:  # counter reset (see _increase), inlined: this runs per type
        claimed = obs.claimed_total
    arrivals = claimed + (obs.queued + obs.due) - (old.queued + old.due)
    finished = _increase(
        old.completed_total + old.failed_total, obs.completed_total + obs.failed_total
    )
    if arrivals <= 0 or finished == 0:
        return 0.0
    service_s = _increase(old.service_ms_total, obs.service_ms_total) / (1000.0 * finished)
    rate = min(arrivals / dt, obs.rate_limit_per_s or math.inf)  # claims obey the limit
    details["arrival_per_s:" + name] = rate
    details["service_s:" + name] = service_s
    return min(rate * service_s, obs.concurrency_limit or math.inf)


def _busy_pods(observation: Observation) -> int:
    """Pods with a task in flight (a pod may run several worker processes)."""
    pods = {w.pod for w in observation.workers if w.busy > 0}
    return len(pods)


def _ceil_div(tasks: float, per_replica: int) -> int:
    return math.ceil(tasks / per_replica - 1e-9) if tasks > 0 else 0


def _recommend(sizing: _Sizing, policy: ScalingPolicy) -> tuple[int, str, str]:
    """The raw recommendation (clamped to [min, max]) and what drove it."""
    tpr = policy.tasks_per_replica
    by_work = _ceil_div(sizing.work + sizing.upcoming, tpr)
    by_rate = _ceil_div(sizing.busy_rate, tpr)
    counts = f"{sizing.queued} tasks queued, {sizing.due} due, {sizing.active} active"
    per = f"({tpr} per replica)"
    if by_rate > by_work:
        raw, code = by_rate, ReasonCode.RATE_FLOOR
        why = f"arrivals keep {sizing.busy_rate:.1f} tasks busy: {raw} replicas {per}"
    elif sizing.upcoming and by_work > _ceil_div(sizing.work, tpr):
        raw, code = by_work, ReasonCode.LOOKAHEAD
        why = (
            f"{counts} and {sizing.upcoming} delayed due within the warm-up lead "
            f"need {raw} replicas {per}"
        )
    elif sizing.active and not (sizing.queued or sizing.due or sizing.upcoming or sizing.capped):
        raw, code = by_work, ReasonCode.HOLD_ACTIVE
        why = f"nothing queued, {sizing.active} tasks active need {raw} replicas {per}"
    else:
        raw, code = by_work, ReasonCode.DEMAND
        why = f"{counts} need {raw} replicas {per}"
    if raw > policy.max_replicas:
        return policy.max_replicas, ReasonCode.MAX_REPLICAS, f"{why}, capped at maxReplicas"
    if raw < policy.min_replicas:
        return policy.min_replicas, ReasonCode.MIN_REPLICAS, f"{why}, raised to minReplicas"
    return raw, code, why


def _apply_idle_rule(
    sizing: _Sizing, policy: ScalingPolicy, rec: int, code: str, why: str, current: int
) -> tuple[int, str, str]:
    """With nothing to do, go to min only once every type is idle.  Until then
    keep one replica warm (the last one is what the idle threshold protects);
    the rest follow demand down through the scale-down window."""
    if sizing.work or sizing.upcoming:
        return rec, code, why
    if sizing.all_idle:
        return policy.min_replicas, ReasonCode.IDLE, _idle_sentence(policy)
    warm = min(current, 1)
    held = min(max(warm, rec), policy.max_replicas)
    if rec > warm:  # the rate floor still asks for more
        return held, code, why
    return (
        held,
        ReasonCode.WAITING_IDLE,
        (f"nothing to do; keeping {held} until every type is idle ({sizing.idle_note})"),
    )


def _idle_sentence(policy: ScalingPolicy) -> str:
    thresholds = sorted({t.idle_threshold_s for t in policy.types})
    if len(thresholds) == 1:
        return f"all types idle for {thresholds[0]:g} s"
    return f"all types idle past their thresholds ({thresholds[0]:g}-{thresholds[-1]:g} s)"


def _stabilize(
    policy: ScalingPolicy,
    history: History,
    now: float,
    rec: int,
    target: int,
    code: str,
    why: str,
    current: int,
) -> tuple[int, str, str]:
    """HPA-style windows: up to the lowest, down to the highest recent recommendation."""
    if target > current and policy.scale_up_stabilization_s > 0:
        window = policy.scale_up_stabilization_s
        lowest = min(history.recommendations_since(now - window), default=rec)
        limit = max(current, min(lowest, rec))
        if limit < target:
            return (
                limit,
                ReasonCode.STABILIZING,
                (f"{why}; held to {limit} by the {window:g} s scale-up window"),
            )
    if target < current and policy.scale_down_stabilization_s > 0:
        window = policy.scale_down_stabilization_s
        highest = max(history.recommendations_since(now - window), default=rec)
        limit = min(current, max(highest, rec))
        if limit > target:
            return (
                limit,
                ReasonCode.STABILIZING,
                (f"{why}; held at {limit} by the {window:g} s scale-down window"),
            )
    return target, code, why


def _bound_step(
    policy: ScalingPolicy, desired: int, code: str, why: str, current: int
) -> tuple[int, str, str]:
    up, down = policy.max_scale_up_step, policy.max_scale_down_step
    if up and desired - current > up:
        return current + up, ReasonCode.STEP_LIMIT, f"{why}; step limited to +{up}"
    if down and current - desired > down:
        return current - down, ReasonCode.STEP_LIMIT, f"{why}; step limited to -{down}"
    return desired, code, why


def _hold_busy(
    sizing: _Sizing, policy: ScalingPolicy, desired: int, code: str, why: str, current: int
) -> tuple[int, str, str]:
    """A scale-down never goes below what the running tasks occupy."""
    if desired >= current or not (sizing.active or sizing.busy_pods):
        return desired, code, why
    floor = max(_ceil_div(sizing.active, policy.tasks_per_replica), sizing.busy_pods, 1)
    floor = min(floor, current, policy.max_replicas)
    if desired >= floor:
        return desired, code, why
    return (
        floor,
        ReasonCode.HOLD_ACTIVE,
        (f"{sizing.active} tasks active on {sizing.busy_pods} busy pods: keeping {floor}"),
    )
