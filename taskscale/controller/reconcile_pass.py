"""One reconcile pass over a group of scalers: observe -> decide -> act -> report.

The scalers of a group that fall due together read Redis in one
:meth:`Observer.observe` round trip (retried briefly with jitter); then, per
scaler, the target's replicas are read, the pure policy decides, the actuator
applies a change, the metrics record it and the reporter hears the outcome.

The group's first pass reads the server's version first, as every taskscale
process does when it starts (:func:`taskscale.connection.check_version`):
the controller has no Redis of its own at start, each TaskScaler names one,
so the check is made when a Redis is first used, and a server older than 7.0
(whose scripts would fail in a way nobody can read) is a failed pass with the
one line "Redis 6.2.14 is too old: taskscale needs 7.0 or later" as its
message -- the other TaskScalers go on.  It is read again on each later pass
until it passes (the server may be upgraded).

Failures are contained per scaler.  When Redis can't be read, the policy is
called with no observation and holds the current replicas (fail-static);
when the target is missing or the API fails, nothing is changed.  Either way
the outcome names the :class:`Problem`, and the error metrics count every
failed attempt.  When the next pass is due is not decided here: the
reconciler passes its scheduler in (``schedule``), called before the report.

Every pass with an observation also protects the target's busy pods from
voluntary disruption and flags the pods of a leaving node in Redis
(protection.py; issue 23), before the decision.

The decision is the scaling rules' (taskscale/controller/rules/, applied in
their one ordered list), given the scaler's settings beyond its policy: its
pause annotations, ``spec.fallback`` with the count of passes in a row that
could not read Redis, and whether the target is a StatefulSet (the ordinal
hold); a scale-down is decided again with the target's rollout, read only
then (the rollout hold).  Every decision is recorded in the scaler's history, the overrides'
too, so the scale-down window applies after a pause or a fallback ends.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Mapping

import redis

from taskscale.connection import RedisTooOld, check_version
from taskscale.controller.config import ScalerConfig
from taskscale.controller.job_demand import CountsJobs, JobCensus, decide_jobs
from taskscale.controller.metrics import ControllerMetrics
from taskscale.controller.observer import ObserveRequest
from taskscale.controller.outcome import PassOutcome, Problem, Reporter, TargetNotFound
from taskscale.controller.protection import protect
from taskscale.controller.rules import Facts
from taskscale.controller.rules import apply as apply_rules
from taskscale.controller.scaler_state import ScalerGroup, ScalerState
from taskscale.controller.target_owner import conflict_message
from taskscale.controller.types import Decision, Observation, Protection, busy_by_pod
from taskscale.errors import one_line
from taskscale.retrying import RetrySettings, call_with_retries

#: The reconciler's logger (the pass moved out of reconciler.py).
log = logging.getLogger("taskscale.controller.reconciler")


class ReconcilePass:
    """Runs passes with the reconciler's reporter, metrics, retries and clock."""

    def __init__(
        self,
        *,
        reporter: Reporter,
        metrics: ControllerMetrics,
        redis_retries: RetrySettings,
        clock: Callable[[], float],
        schedule: Callable[[ScalerState, PassOutcome], None],
    ) -> None:
        self._reporter = reporter
        self._metrics = metrics
        self._redis_retries = redis_retries
        self._clock = clock
        self._schedule = schedule

    def run(
        self,
        group: ScalerGroup,
        scalers: list[ScalerState],
        shadowed: Mapping[str, str] | None = None,
    ) -> list[PassOutcome]:
        """One pass of each of ``scalers`` (all members of ``group``);
        ``shadowed``: scaler key -> the key of the scaler that owns its target
        (target_owner.py): those change nothing and report the conflict."""
        shadowed = shadowed or {}
        started = time.perf_counter()
        observations, error = self._observe(
            group, [s for s in scalers if s.config.key not in shadowed]
        )
        observe_s = time.perf_counter() - started
        outcomes = []
        for scaler in scalers:
            t0 = time.perf_counter()
            owner = shadowed.get(scaler.config.key)
            if owner is not None:
                outcome = self._conflict(scaler, owner)
            else:
                outcome = self._pass(group, scaler, observations.get(scaler.config.key), error)
            self._metrics.reconcile_duration.observe(observe_s + time.perf_counter() - t0)
            self._schedule(scaler, outcome)
            self._report(outcome)
            outcomes.append(outcome)
        return outcomes

    def _observe(
        self, group: ScalerGroup, scalers: Iterable[ScalerState]
    ) -> tuple[Mapping[str, Observation], str | None]:
        requests = {
            s.config.key: ObserveRequest(
                types=s.config.policy.type_names(),
                lead_s=s.config.policy.lookahead_s,  # warm-up + node provisioning
                sources=s.config.sources,
                ages=s.config.policy.queue_wait_types(),
            )
            for s in scalers
        }
        if not requests:  # every scaler of the pass has a target conflict
            return {}, None

        def observe() -> Mapping[str, Observation]:
            if not group.version_checked:
                check_version(group.client.info("server"))  # RedisTooOld: not retried
                group.version_checked = True
            return group.observer.observe(requests)

        try:
            result = call_with_retries(
                observe,
                settings=self._redis_retries,
                retry_if=lambda exc: isinstance(exc, redis.ConnectionError | redis.TimeoutError),
                on_error=lambda exc: self._metrics.count_redis_error("observe", *requests),
            )
            return result, None
        except RedisTooOld as exc:
            log.warning("%s: %s", ", ".join(sorted(requests)), exc)
            return {}, str(exc)
        except redis.RedisError as exc:
            log.warning("observe failed for %s: %s", sorted(requests), exc)
            return {}, one_line(exc, typed=True)

    def _conflict(self, scaler: ScalerState, owner: str) -> PassOutcome:
        """A pass of a scaler whose target another one owns: nothing read or changed."""
        config = scaler.config
        return PassOutcome(
            config,
            self._clock(),
            None,
            None,
            None,
            problem=Problem.TARGET_CONFLICT,
            message=conflict_message(config, owner),
        )

    def _pass(
        self,
        group: ScalerGroup,
        scaler: ScalerState,
        observation: Observation | None,
        redis_error: str | None,
    ) -> PassOutcome:
        config, now = scaler.config, self._clock()
        if observation is None and redis_error is None:
            redis_error = "the observer returned nothing for this scaler"
        base = PassOutcome(config, now, observation, None, None, redis_error=redis_error)
        try:
            current = scaler.actuator.current_replicas()
            scaler.last_current = current
            jobs = None
            if isinstance(scaler.actuator, CountsJobs):  # Job mode: which Jobs have claimed
                workers = observation.workers if observation is not None else ()
                jobs = scaler.actuator.census(busy_by_pod(workers))
            base = _replace(base, protection=self._protect(group, scaler, observation))
            draining = frozenset(base.protection.draining) if base.protection else frozenset()
            decision = _decide(
                scaler,
                observation,
                now=now,
                current=current,
                error=redis_error,
                jobs=jobs,
                draining=draining,
            )
        except TargetNotFound as exc:
            return _replace(base, problem=Problem.TARGET_NOT_FOUND, message=str(exc))
        except Exception as exc:
            log.exception("%s: reading the target failed", config.key)
            return _replace(base, problem=Problem.SCALE_FAILED, message=one_line(exc, typed=True))
        self._record(config.key, observation, current, decision)
        if jobs is not None and observation is None:
            jobs = None  # without the registry every Job looks unclaimed: keep the last shown
        if jobs is not None:
            self._metrics.record_jobs(config.key, jobs.as_dict())
        outcome = _replace(base, current=current, decision=decision, jobs=jobs)
        if redis_error is not None:
            outcome = _replace(outcome, problem=Problem.REDIS_UNREACHABLE, message=redis_error)
        if decision.desired == current:
            return outcome
        applied = self._apply(scaler, outcome, decision, current)
        if applied.scaled and jobs is not None and isinstance(scaler.actuator, CountsJobs):
            # the Jobs just created, in the status, metrics and console at once
            workers = observation.workers if observation is not None else ()
            jobs = scaler.actuator.census(busy_by_pod(workers))
            self._metrics.record_jobs(config.key, jobs.as_dict())
            applied = _replace(applied, jobs=jobs)
        return applied

    def _protect(
        self, group: ScalerGroup, scaler: ScalerState, observation: Observation | None
    ) -> Protection | None:
        """Busy pods marked, draining pods flagged (protection.py); a failure is
        logged and leaves the pass to scale as usual."""
        try:
            protection = protect(
                scaler.actuator, group.client, scaler.config.redis.key_namespace, observation
            )
        except Exception as exc:
            log.warning("%s: protecting busy pods failed: %s", scaler.config.key, one_line(exc))
            return None
        if protection is not None:
            self._metrics.record_protection(scaler.config.key, protection)
        return protection

    def _apply(
        self, scaler: ScalerState, outcome: PassOutcome, decision: Decision, current: int
    ) -> PassOutcome:
        workers = outcome.observation.workers if outcome.observation is not None else ()
        try:
            scaler.actuator.scale(decision.desired, busy_by_pod=busy_by_pod(workers))
        except TargetNotFound as exc:
            return _replace(outcome, problem=Problem.TARGET_NOT_FOUND, message=str(exc))
        except Exception as exc:
            log.exception("%s: scaling to %d failed", scaler.config.key, decision.desired)
            return _replace(
                outcome, problem=Problem.SCALE_FAILED, message=one_line(exc, typed=True)
            )
        scaler.last_current = decision.desired
        self._metrics.record_scale(
            scaler.config.key, before=current, after=decision.desired, reason=decision.reason_code
        )
        log.info("%s: %s", scaler.config.key, decision.reason)
        return _replace(outcome, scaled=True)

    def _record(
        self, key: str, observation: Observation | None, current: int, decision: Decision
    ) -> None:
        if observation is not None:
            self._metrics.record_observation(key, observation)
        self._metrics.record_decision(
            key, current=current, desired=decision.desired, reason=decision.reason_code
        )

    def _report(self, outcome: PassOutcome) -> None:
        try:
            self._reporter.report(outcome)
        except Exception:
            log.exception("%s: reporting the outcome failed", outcome.config.key)


def _decide(
    scaler: ScalerState,
    observation: Observation | None,
    *,
    now: float,
    current: int,
    error: str | None,
    jobs: JobCensus | None = None,
    draining: frozenset[str] = frozenset(),
) -> Decision:
    """The scaling rules' decision, with the scaler's pause, fallback and target
    kind; in Job mode (``jobs``: the census), how many Jobs should be active."""
    config = scaler.config
    scaler.redis_failures = 0 if observation is not None else scaler.redis_failures + 1
    if jobs is not None:
        decision = decide_jobs(observation, config.policy, jobs, pause=config.pause)
        scaler.history.record(now, observation, decision)
        return decision
    facts = Facts(
        observation,
        config.policy,
        scaler.history,
        now,
        current,
        pause=config.pause,
        fallback=config.fallback,
        redis_failures=scaler.redis_failures,
        redis_error=error or "",
        statefulset=config.target if _is_stateful_set(config) else None,
        draining=draining,
    )
    decision = apply_rules(facts)
    if decision.desired < current:
        # only a scale-down waits for a rollout (rules/rollout_hold.py): the
        # target's rollout is read then, not on every pass
        rollout = scaler.actuator.rollout()
        if rollout is not None:
            decision = apply_rules(facts._replace(rollout=rollout))
    # every decision, an override's too: after a pause or a fallback ends, the
    # scale-down window holds what it set like any other recommendation
    scaler.history.record(now, observation, decision)
    return decision


def _is_stateful_set(config: ScalerConfig) -> bool:
    """A StatefulSet removes its highest ordinals, busy or not (rules/ordinal_hold.py)."""
    return config.target_ref.group == "apps" and config.target_ref.kind == "StatefulSet"


def _replace(outcome: PassOutcome, **changes: object) -> PassOutcome:
    return dataclasses.replace(outcome, **changes)  # type: ignore[arg-type]
