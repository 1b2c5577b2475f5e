"""The two autoscalers of the simulation, each acting on a :class:`World`.

* :class:`TaskscaleScaler` runs taskscale's real policy
  (:func:`taskscale.controller.policy.decide`) on observations built the way
  the observer builds them, every poll and at once on a demand signal when
  the target is at zero; its actuator removes idle pods first
  (pod-deletion-cost).
* :class:`KedaScaler` models KEDA's Redis-list scaler driving an HPA with
  their documented defaults: the operator polls the list every 30 s for
  activation (0 -> 1) and cools down to zero 300 s after the list was last
  non-empty; the HPA syncs every 15 s on the list length (queued only,
  in-flight tasks are invisible to it) against an average target per
  replica, with its 10 % tolerance, no scale-up window, a 300 s scale-down
  window, and scale-up limited to max(+100 %, +4 pods) per 15 s.  Pods are
  removed without regard to what they are running.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from bench.sim_world import World
from taskscale.controller.policy import History, decide
from taskscale.controller.types import ReasonCode, ScalingPolicy


class TaskscaleScaler:
    """taskscale's reconcile loop, minus Redis and Kubernetes."""

    def __init__(
        self, policy: ScalingPolicy, *, poll_s: float = 2.0, name: str = "taskscale"
    ) -> None:
        self.name = name
        self.policy = policy
        self.poll_s = poll_s
        self.history = History.for_policy(policy)
        self._next_poll = 0.0
        self.decisions = 0
        self.decide_seconds = 0.0  #: wall time inside decide(), for the report
        self.reasons: dict[str, int] = {code: 0 for code in ReasonCode.ALL}
        #: every replica change: (time, from, to) -- bench/sim_flaps.py counts reversals
        self.changes: list[tuple[float, int, int]] = []

    def tick(self, world: World, t: float) -> None:
        woken = world.demand_signal and world.replicas == 0
        world.demand_signal = False
        if t < self._next_poll and not woken:
            return
        if t >= self._next_poll:
            self._next_poll += self.poll_s
        obs = world.observe(t, lead_s=self.policy.lookahead_s)
        started = time.perf_counter()
        decision = decide(obs, self.policy, self.history, now=t, current=world.replicas)
        self.decide_seconds += time.perf_counter() - started
        self.history.record(t, obs, decision)
        self.decisions += 1
        self.reasons[decision.reason_code] += 1
        if decision.desired != world.replicas:
            self.changes.append((t, world.replicas, decision.desired))
            world.scale_to(decision.desired, t, idle_first=True)


@dataclass(frozen=True)
class KedaSettings:
    """KEDA ScaledObject + HPA defaults (only list_length is the user's choice)."""

    list_length: int = 4  #: target average list length per replica (``listLength``)
    activation_list_length: int = 0
    polling_interval_s: float = 30.0
    cooldown_period_s: float = 300.0
    min_replicas: int = 0  #: KEDA minReplicaCount (the HPA's min is max(1, this))
    max_replicas: int = 10
    hpa_sync_s: float = 15.0
    hpa_tolerance: float = 0.1
    hpa_scale_down_window_s: float = 300.0
    hpa_scale_up_percent: float = 100.0
    hpa_scale_up_pods: int = 4


@dataclass
class KedaScaler:
    """KEDA's operator loop plus the HPA controller, as documented."""

    settings: KedaSettings
    name: str = "KEDA-like"
    _next_poll: float = 0.0
    _next_sync: float = 0.0
    _last_active: float | None = None
    _recommendations: list[tuple[float, int]] = field(default_factory=list)

    def tick(self, world: World, t: float) -> None:
        world.demand_signal = False  # KEDA has no demand wake-up
        if t >= self._next_poll:
            self._next_poll += self.settings.polling_interval_s
            self._operator_poll(world, t)
        if t >= self._next_sync:
            self._next_sync += self.settings.hpa_sync_s
            if world.replicas > 0:  # the HPA does nothing to a target at zero
                self._hpa_sync(world, t)

    def _operator_poll(self, world: World, t: float) -> None:
        s = self.settings
        active = len(world.queue) > s.activation_list_length
        if active:
            self._last_active = t
            if world.replicas == 0:
                world.scale_to(max(1, s.min_replicas), t, idle_first=False)
            return
        cooled = self._last_active is None or t - self._last_active >= s.cooldown_period_s
        if world.replicas > s.min_replicas and cooled and s.min_replicas == 0:
            world.scale_to(0, t, idle_first=False)  # straight to zero, past the HPA
            self._recommendations.clear()

    def _hpa_sync(self, world: World, t: float) -> None:
        s = self.settings
        current = world.replicas
        metric = len(world.queue)  # queued only: in-flight work is not counted
        ratio = metric / (s.list_length * current)
        raw = current if abs(ratio - 1.0) <= s.hpa_tolerance else math.ceil(metric / s.list_length)
        raw = min(max(raw, max(1, s.min_replicas)), s.max_replicas)
        self._recommendations = [
            (at, r) for at, r in self._recommendations if at > t - s.hpa_scale_down_window_s
        ]
        self._recommendations.append((t, raw))
        desired = raw
        if raw < current:
            desired = min(current, max(r for _, r in self._recommendations))
        elif raw > current:
            limit = max(
                math.ceil(current * (1 + s.hpa_scale_up_percent / 100)),
                current + s.hpa_scale_up_pods,
            )
            desired = min(raw, limit)
        if desired != current:
            world.scale_to(desired, t, idle_first=False)
