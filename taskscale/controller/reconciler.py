"""The reconcile loop: observe, decide, apply, report -- for every scaler.

Level-triggered, in the manner of kubernetes/sample-controller: every pass
starts from what Redis and the target say *now*, never from the event that
woke it, so a missed wake-up or a restart costs at most one poll interval.
What wakes a pass is either a scaler's poll interval, or a demand signal from
Redis (the enqueue script publishes a type when its queue goes from empty to
non-empty) for a scaler whose target sits at zero replicas -- so
scale-from-zero waits for one round trip, not for the next poll.

Scalers that share a Redis and key namespace form a *group*: the passes that
are due together read Redis in one :meth:`Observer.observe` round trip, and
one :class:`DemandListener` serves the whole group.

Failures are contained per scaler.  When Redis can't be read, the policy is
called with no observation and holds the current replicas (fail-static);
when the target is missing or the API fails, nothing is changed.  Either way
the :class:`Reporter` hears about it (conditions, Events), the error metrics
count every failed attempt, and the scaler is retried with exponential
backoff.  Short retries inside a pass use tenacity with jittered backoff.

The reconciler knows nothing about Kubernetes: the actuator and the reporter
are injected, so ``taskscale demo`` runs the same loop with a local process
pool and a console reporter.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import redis
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from taskscale.controller.config import ScalerConfig
from taskscale.controller.metrics import ControllerMetrics
from taskscale.controller.observer import DemandListener, Observer, ObserveRequest, busy_by_pod
from taskscale.controller.policy import History, decide
from taskscale.controller.types import Actuator, Decision, Observation
from taskscale.keys import Keys

log = logging.getLogger(__name__)
T = TypeVar("T")


class TargetNotFound(LookupError):
    """The scale target does not exist (raised by actuators)."""


class Problem:
    """Why a pass could not do its job: condition and Event reasons."""

    REDIS_UNREACHABLE = "RedisUnreachable"
    TARGET_NOT_FOUND = "TargetNotFound"
    SCALE_FAILED = "ScaleFailed"


@dataclass(frozen=True)
class RetrySettings:
    """Short in-pass retries (tenacity, exponential backoff with full jitter)."""

    attempts: int = 3
    initial_s: float = 0.05
    max_s: float = 1.0


def call_with_retries(
    fn: Callable[[], T],
    *,
    settings: RetrySettings,
    retry_if: Callable[[BaseException], bool],
    on_error: Callable[[BaseException], None],
) -> T:
    """Call ``fn``, retrying errors ``retry_if`` accepts; ``on_error`` sees every
    failed attempt (retried or not), so a retry never hides an error from the
    metrics.  The last error is re-raised."""

    def attempt() -> T:
        try:
            return fn()
        except Exception as exc:
            on_error(exc)
            raise

    retrying = Retrying(
        stop=stop_after_attempt(max(1, settings.attempts)),
        wait=wait_random_exponential(multiplier=settings.initial_s, max=settings.max_s),
        retry=retry_if_exception(retry_if),
        reraise=True,
    )
    return retrying(attempt)


@dataclass(frozen=True)
class ReconcilerSettings:
    redis: RetrySettings = field(default_factory=RetrySettings)
    #: Socket timeouts of the Redis clients the reconciler opens.
    redis_timeout_s: float = 2.0
    #: After a failed pass, the scaler is retried after a delay that starts
    #: here and doubles per consecutive failure (with jitter), up to max.
    error_backoff_initial_s: float = 1.0
    error_backoff_max_s: float = 30.0
    #: Longest sleep of the run loop (its heartbeat period).
    max_sleep_s: float = 1.0
    #: Subscribe to demand signals (off: poll only, e.g. to measure the difference).
    listen_for_demand: bool = True


@dataclass(frozen=True)
class PassOutcome:
    """What one pass of one scaler saw and did; reporters turn it into
    status, conditions, Events or console lines."""

    config: ScalerConfig
    at: float  #: wall-clock time of the pass (unix s)
    observation: Observation | None  #: None: Redis could not be read
    current: int | None  #: replicas before the pass; None: target unreadable
    decision: Decision | None  #: None when the target could not be read
    scaled: bool = False  #: the target was changed to ``decision.desired``
    redis_error: str | None = None
    problem: str | None = None  #: a Problem constant (the pass failed)
    message: str = ""  #: what went wrong, for a condition or an Event

    @property
    def ok(self) -> bool:
        return self.problem is None


class Reporter(Protocol):
    """Where outcomes go: Kubernetes status + Events, or the demo's console."""

    def report(self, outcome: PassOutcome) -> None: ...


class LoggingReporter:
    """Logs scale changes and problems (the default when nothing else is wanted)."""

    def report(self, outcome: PassOutcome) -> None:
        if outcome.problem is not None:
            log.warning("%s: %s: %s", outcome.config.key, outcome.problem, outcome.message)
        elif outcome.scaled and outcome.decision is not None:
            log.info("%s: %s", outcome.config.key, outcome.decision.reason)


@dataclass
class _Scaler:
    config: ScalerConfig
    actuator: Actuator
    group: tuple[str, str]  #: (redis url, key namespace)
    history: History
    next_due: float = 0.0  #: monotonic time of the next pass
    failures: int = 0
    last_current: int | None = None


@dataclass
class _Group:
    client: redis.Redis
    observer: Observer
    listener: DemandListener | None = None
    members: set[str] = field(default_factory=set)


class Reconciler:
    """Keeps every registered scaler's target at the size its policy asks for.

    Register scalers with :meth:`upsert` (again whenever the spec changes),
    drop them with :meth:`remove`; :meth:`run` loops until :meth:`stop`.
    Thread-safe: the Kubernetes watcher upserts from its own thread.
    """

    def __init__(
        self,
        *,
        reporter: Reporter | None = None,
        metrics: ControllerMetrics | None = None,
        settings: ReconcilerSettings | None = None,
        clock: Callable[[], float] = time.time,
        heartbeat: Callable[[], None] | None = None,
    ) -> None:
        self._reporter = reporter or LoggingReporter()
        self.metrics = metrics or ControllerMetrics()
        self._settings = settings or ReconcilerSettings()
        self._clock = clock
        self._heartbeat = heartbeat
        self._lock = threading.Lock()
        self._scalers: dict[str, _Scaler] = {}
        self._groups: dict[tuple[str, str], _Group] = {}
        self._wake = threading.Event()
        self._stopping = threading.Event()

    # --- registration ----------------------------------------------------------
    def upsert(self, config: ScalerConfig, *, actuator: Actuator, redis_url: str) -> None:
        """Add a scaler or update its config; a changed config is reconciled at once.
        Ignored once the reconciler is stopped (a late watch event)."""
        if self._stopping.is_set():
            return
        group_key = (redis_url, config.redis.key_namespace)
        stale: _Group | None = None
        with self._lock:
            scaler = self._scalers.get(config.key)
            if scaler is None:
                history = History.for_policy(config.policy)
                scaler = _Scaler(config, actuator, group_key, history)
                self._scalers[config.key] = scaler
            elif scaler.config == config and scaler.group == group_key:
                scaler.actuator = actuator
                return
            else:
                stale = self._leave_group(scaler)
                if scaler.config.policy != config.policy:
                    scaler.history = History.for_policy(config.policy)
                scaler.config, scaler.actuator, scaler.group = config, actuator, group_key
                scaler.next_due = 0.0
            self._join_group(scaler)
            self.metrics.scalers.set(len(self._scalers))
        if stale is not None:
            self._close_group(stale)
        self._wake.set()

    def remove(self, key: str) -> None:
        """Stop reconciling a scaler (its target keeps its current size)."""
        with self._lock:
            scaler = self._scalers.pop(key, None)
            stale = self._leave_group(scaler) if scaler is not None else None
            self.metrics.scalers.set(len(self._scalers))
        if scaler is not None:
            self.metrics.forget_scaler(key, scaler.config.policy.type_names())
        if stale is not None:
            self._close_group(stale)

    def keys(self) -> list[str]:
        with self._lock:
            return sorted(self._scalers)

    def _join_group(self, scaler: _Scaler) -> None:
        group = self._groups.get(scaler.group)
        if group is None:
            group = self._open_group(scaler.group)
            self._groups[scaler.group] = group
        group.members.add(scaler.config.key)

    def _leave_group(self, scaler: _Scaler) -> _Group | None:
        group = self._groups.get(scaler.group)
        if group is None:
            return None
        group.members.discard(scaler.config.key)
        if group.members:
            return None
        del self._groups[scaler.group]
        return group

    def _open_group(self, group_key: tuple[str, str]) -> _Group:
        url, key_namespace = group_key
        timeout = self._settings.redis_timeout_s
        client = redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout, health_check_interval=30
        )
        keys = Keys(key_namespace)
        group = _Group(client=client, observer=Observer(client, keys))
        if self._settings.listen_for_demand:
            group.listener = DemandListener(
                client,
                keys,
                lambda task_type: self._on_demand(group_key, task_type),
                on_error=lambda exc: self.metrics.count_redis_error("demand"),
            )
            group.listener.start()
        return group

    @staticmethod
    def _close_group(group: _Group) -> None:
        if group.listener is not None:
            group.listener.stop()
        group.client.close()

    # --- waking ------------------------------------------------------------------
    def _on_demand(self, group_key: tuple[str, str], task_type: str) -> None:
        """A queue of ``task_type`` went non-empty: reconcile at once every scaler
        of this Redis serving it whose target is (or may be) at zero."""
        woke = False
        with self._lock:
            for scaler in self._scalers.values():
                if (
                    scaler.group == group_key
                    and scaler.last_current in (0, None)
                    and task_type in scaler.config.policy.type_names()
                ):
                    scaler.next_due = 0.0
                    woke = True
        if woke:
            self._wake.set()

    def wake(self, key: str | None = None) -> None:
        """Reconcile one scaler (or all) at once."""
        with self._lock:
            for name, scaler in self._scalers.items():
                if key is None or name == key:
                    scaler.next_due = 0.0
        self._wake.set()

    def wait_listening(self, timeout: float) -> bool:
        """True once every group's demand listener is subscribed (tests, benchmarks)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            listeners = [g.listener for g in self._groups.values() if g.listener is not None]
        return all(
            listener.wait_subscribed(max(0.0, deadline - time.monotonic()))
            for listener in listeners
        )

    # --- the loop ------------------------------------------------------------------
    def run(self) -> None:
        """Reconcile scalers as they fall due until :meth:`stop` is called."""
        while not self._stopping.is_set():
            self._wake.clear()
            delay = self.reconcile_due()
            if self._heartbeat is not None:
                self._heartbeat()
            self._wake.wait(min(max(delay, 0.0), self._settings.max_sleep_s))

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()

    def close(self) -> None:
        """Stop the demand listeners and close the Redis clients."""
        self.stop()
        with self._lock:
            groups = list(self._groups.values())
            self._groups.clear()
            self._scalers.clear()
        for group in groups:
            self._close_group(group)

    def reconcile_due(self) -> float:
        """Run every pass that is due now; return seconds until the next one."""
        now = time.monotonic()
        with self._lock:
            due = [s for s in self._scalers.values() if s.next_due <= now]
            groups = {key: self._groups[key] for key in {s.group for s in due}}
        for key, group in groups.items():
            if self._stopping.is_set():
                break
            self._pass_group(group, [s for s in due if s.group == key])
        with self._lock:
            next_due = min((s.next_due for s in self._scalers.values()), default=None)
        return self._settings.max_sleep_s if next_due is None else next_due - time.monotonic()

    def reconcile_now(self, key: str) -> PassOutcome:
        """One pass of one scaler, now (tests and the demo's single steps)."""
        with self._lock:
            scaler = self._scalers[key]
            group = self._groups[scaler.group]
        return self._pass_group(group, [scaler])[0]

    # --- one pass ------------------------------------------------------------------
    def _pass_group(self, group: _Group, scalers: list[_Scaler]) -> list[PassOutcome]:
        started = time.perf_counter()
        observations, error = self._observe(group, scalers)
        observe_s = time.perf_counter() - started
        outcomes = []
        for scaler in scalers:
            t0 = time.perf_counter()
            outcome = self._pass(scaler, observations.get(scaler.config.key), error)
            self.metrics.reconcile_duration.observe(observe_s + time.perf_counter() - t0)
            self._schedule(scaler, outcome)
            self._report(outcome)
            outcomes.append(outcome)
        return outcomes

    def _observe(
        self, group: _Group, scalers: Iterable[_Scaler]
    ) -> tuple[Mapping[str, Observation], str | None]:
        requests = {
            s.config.key: ObserveRequest(
                types=s.config.policy.type_names(), lead_s=s.config.policy.warmup_lead_s
            )
            for s in scalers
        }
        try:
            result = call_with_retries(
                lambda: group.observer.observe(requests),
                settings=self._settings.redis,
                retry_if=lambda exc: isinstance(exc, redis.ConnectionError | redis.TimeoutError),
                on_error=lambda exc: self.metrics.count_redis_error("observe"),
            )
            return result, None
        except redis.RedisError as exc:
            log.warning("observe failed for %s: %s", sorted(requests), exc)
            return {}, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__

    def _pass(
        self, scaler: _Scaler, observation: Observation | None, redis_error: str | None
    ) -> PassOutcome:
        config, now = scaler.config, self._clock()
        if observation is None and redis_error is None:
            redis_error = "the observer returned nothing for this scaler"
        base = PassOutcome(config, now, observation, None, None, redis_error=redis_error)
        try:
            current = scaler.actuator.current_replicas()
        except TargetNotFound as exc:
            return _replace(base, problem=Problem.TARGET_NOT_FOUND, message=str(exc))
        except Exception as exc:
            log.exception("%s: reading the target failed", config.key)
            return _replace(base, problem=Problem.SCALE_FAILED, message=_describe(exc))
        scaler.last_current = current
        decision = decide(observation, config.policy, scaler.history, now=now, current=current)
        scaler.history.record(now, observation, decision)
        self._record(config.key, observation, current, decision)
        outcome = _replace(base, current=current, decision=decision)
        if redis_error is not None:
            outcome = _replace(outcome, problem=Problem.REDIS_UNREACHABLE, message=redis_error)
        if decision.desired == current:
            return outcome
        return self._apply(scaler, outcome, decision, current)

    def _apply(
        self, scaler: _Scaler, outcome: PassOutcome, decision: Decision, current: int
    ) -> PassOutcome:
        workers = outcome.observation.workers if outcome.observation is not None else ()
        try:
            scaler.actuator.scale(decision.desired, busy_by_pod=busy_by_pod(workers))
        except TargetNotFound as exc:
            return _replace(outcome, problem=Problem.TARGET_NOT_FOUND, message=str(exc))
        except Exception as exc:
            log.exception("%s: scaling to %d failed", scaler.config.key, decision.desired)
            return _replace(outcome, problem=Problem.SCALE_FAILED, message=_describe(exc))
        scaler.last_current = decision.desired
        self.metrics.record_scale(
            scaler.config.key, before=current, after=decision.desired, reason=decision.reason_code
        )
        log.info("%s: %s", scaler.config.key, decision.reason)
        return _replace(outcome, scaled=True)

    def _record(
        self, key: str, observation: Observation | None, current: int, decision: Decision
    ) -> None:
        if observation is not None:
            self.metrics.record_observation(key, observation)
        self.metrics.record_decision(
            key, current=current, desired=decision.desired, reason=decision.reason_code
        )

    def _schedule(self, scaler: _Scaler, outcome: PassOutcome) -> None:
        now = time.monotonic()
        if outcome.ok:
            scaler.failures = 0
            scaler.next_due = now + scaler.config.poll_interval_s
            return
        scaler.failures += 1
        settings = self._settings
        ceiling = min(
            settings.error_backoff_max_s,
            settings.error_backoff_initial_s * 2 ** min(scaler.failures - 1, 30),
        )
        # Half fixed, half jitter: scalers failing together do not retry in step.
        scaler.next_due = now + ceiling * (0.5 + random.random() / 2)

    def _report(self, outcome: PassOutcome) -> None:
        try:
            self._reporter.report(outcome)
        except Exception:
            log.exception("%s: reporting the outcome failed", outcome.config.key)


def _replace(outcome: PassOutcome, **changes: object) -> PassOutcome:
    return dataclasses.replace(outcome, **changes)  # type: ignore[arg-type]


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
