"""The simulated world both autoscalers act on: a queue, a schedule, pods.

It models what matters for the comparison and nothing more:

* a FIFO ready queue and a delayed schedule (promoted the instant a task is
  due, like a scheduler that sleeps until the next due time);
* pods with a fixed number of worker threads that claim only when a thread
  is free (non-hoarding), becoming ready a few seconds after they are created;
* removing a pod that is running tasks interrupts them: they go back to the
  head of the queue and are counted;
* the numbers the real observer reads from Redis (queue length, due and
  upcoming delayed tasks, ACTIVE_TASKS, IDLE_SINCE, the stats counters and
  each worker's busy count);
* cold starts: a task becoming ready while there is no pod at all opens one,
  and the first claim after it closes it; its length is the time from work
  at zero replicas (the task's ready time, or when the last pod went, if
  later) to a first task running (:attr:`World.cold_starts`).

Time advances in fixed steps (:attr:`WorldSettings.step_s`).
"""

from __future__ import annotations

import heapq
import random
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass, field

from bench.sim_trace import Trace
from taskscale.controller.types import Observation, TypeObservation, WorkerObservation

TASK_TYPE = "work"


@dataclass(frozen=True)
class WorldSettings:
    threads_per_pod: int = 4
    startup_s: tuple[float, float] = (5.0, 10.0)  #: pod creation -> claiming, uniform
    step_s: float = 0.1
    #: Simulated time after the trace ends, so both scalers can drain and settle.
    tail_s: float = 900.0
    sample_every_s: float = 5.0  #: time-series resolution for the plot


@dataclass(eq=False)
class Task:
    ready_at: float
    service_s: float
    claimed_at: float | None = None  #: first claim (queue wait is measured to it)
    attempt: int = 0  #: bumped on interruption, so stale completions are ignored


@dataclass(eq=False)
class Pod:
    name: str
    ready_at: float
    threads: int
    running: set[Task] = field(default_factory=set)

    def free(self) -> int:
        return self.threads - len(self.running)


@dataclass
class Series:
    """Sampled time series for the plot."""

    t: list[float] = field(default_factory=list)
    queued: list[int] = field(default_factory=list)
    replicas: list[int] = field(default_factory=list)
    active: list[int] = field(default_factory=list)


class World:
    """One run: a trace played against pods that a scaler creates and removes."""

    def __init__(self, trace: Trace, settings: WorldSettings, *, seed: int) -> None:
        self.settings = settings
        self.rng = random.Random(seed * 7919 + 1)
        self._arrivals = trace.arrivals
        self._next_arrival = 0
        self.queue: deque[Task] = deque()
        self._delayed: list[tuple[float, int, Task]] = []  # heap by due time
        self._delayed_due: list[float] = []  # sorted due times, for upcoming counts
        self._completions: list[tuple[float, int, Task, Pod, int]] = []
        self._seq = 0
        self.pods: list[Pod] = []
        self._pod_seq = 0
        self.active = 0
        self.idle_since: float | None = None
        self.enqueued = self.claimed = self.completed = 0
        self.service_ms = self.wait_ms = 0
        self.waits: list[float] = []
        #: Seconds from a task ready at zero pods to the first claim after it.
        self.cold_starts: list[float] = []
        self._cold_since: float | None = None
        self._empty_since = 0.0  #: when the last pod went (a requeued task waits from then)
        self.interrupted = 0
        self.replica_seconds = 0.0
        self.demand_signal = False  #: ready queue went empty -> non-empty this step
        self.series = Series()
        self._next_sample = 0.0

    # --- the passage of time ------------------------------------------------
    def advance(self, t: float) -> None:
        """Everything that happens up to ``t``: arrivals, promotions,
        completions, claims; then account for the pods that existed."""
        was_empty = not self.queue
        self._enqueue_until(t)
        self._promote_until(t)
        self._complete_until(t)
        if self.queue and not self.pods and self._cold_since is None:
            oldest = min(task.ready_at for task in self.queue)
            self._cold_since = max(oldest, self._empty_since)
        self._claim(t)
        self.demand_signal = self.demand_signal or (was_empty and bool(self.queue))
        self.replica_seconds += len(self.pods) * self.settings.step_s
        if t >= self._next_sample:
            self._sample(t)
            self._next_sample += self.settings.sample_every_s

    def _enqueue_until(self, t: float) -> None:
        arrivals = self._arrivals
        while self._next_arrival < len(arrivals) and arrivals[self._next_arrival].enqueued_at <= t:
            a = arrivals[self._next_arrival]
            self._next_arrival += 1
            self.enqueued += 1
            task = Task(ready_at=a.ready_at, service_s=a.service_s)
            if a.delayed:
                self._seq += 1
                heapq.heappush(self._delayed, (a.ready_at, self._seq, task))
                self._delayed_due.insert(bisect_right(self._delayed_due, a.ready_at), a.ready_at)
            else:
                self.queue.append(task)

    def _promote_until(self, t: float) -> None:
        while self._delayed and self._delayed[0][0] <= t:
            _, _, task = heapq.heappop(self._delayed)
            del self._delayed_due[0]
            self.queue.append(task)

    def _complete_until(self, t: float) -> None:
        heap = self._completions
        while heap and heap[0][0] <= t:
            finish, _, task, pod, attempt = heapq.heappop(heap)
            if attempt != task.attempt or task not in pod.running:
                continue  # interrupted meanwhile
            pod.running.discard(task)
            self.active -= 1
            self.completed += 1
            self.service_ms += round(task.service_s * 1000)
            self.idle_since = finish

    def _claim(self, t: float) -> None:
        if not self.queue:
            return
        ready = [p for p in self.pods if p.ready_at <= t and p.free() > 0]
        self.rng.shuffle(ready)  # whichever idle worker wakes first
        for pod in ready:
            for _ in range(min(pod.free(), len(self.queue))):
                self._start(pod, self.queue.popleft(), t)
            if not self.queue:
                return

    def _start(self, pod: Pod, task: Task, t: float) -> None:
        pod.running.add(task)
        self.active += 1
        self.claimed += 1
        if self._cold_since is not None:
            self.cold_starts.append(t - self._cold_since)
            self._cold_since = None
        if task.claimed_at is None:
            task.claimed_at = t
            wait = max(0.0, t - task.ready_at)
            self.waits.append(wait)
            self.wait_ms += round(wait * 1000)
        self._seq += 1
        heapq.heappush(self._completions, (t + task.service_s, self._seq, task, pod, task.attempt))

    def _sample(self, t: float) -> None:
        self.series.t.append(t)
        self.series.queued.append(len(self.queue))
        self.series.replicas.append(len(self.pods))
        self.series.active.append(self.active)

    # --- what an actuator does ------------------------------------------------
    @property
    def replicas(self) -> int:
        return len(self.pods)

    @property
    def pod_starts(self) -> int:
        """Pods created so far (scale churn: each one is a pod start-up)."""
        return self._pod_seq

    def scale_to(self, replicas: int, t: float, *, idle_first: bool) -> None:
        """Create or remove pods.  Pods not ready yet go first (as a
        ReplicaSet does); among ready ones, the least busy first when the
        scaler sets pod-deletion-cost (``idle_first``), else any."""
        while len(self.pods) < replicas:
            self._pod_seq += 1
            startup = self.rng.uniform(*self.settings.startup_s)
            self.pods.append(
                Pod(f"pod-{self._pod_seq}", t + startup, self.settings.threads_per_pod)
            )
        excess = len(self.pods) - replicas
        if excess <= 0:
            return
        for pod in self._removal_order(t, idle_first=idle_first)[:excess]:
            self._remove(pod)
        if not self.pods:
            self._empty_since = t

    def _removal_order(self, t: float, *, idle_first: bool) -> list[Pod]:
        starting = sorted((p for p in self.pods if p.ready_at > t), key=lambda p: -p.ready_at)
        ready = [p for p in self.pods if p.ready_at <= t]
        self.rng.shuffle(ready)
        if idle_first:
            ready.sort(key=lambda p: len(p.running))  # stable: random among equals
        return starting + ready

    def _remove(self, pod: Pod) -> None:
        self.pods.remove(pod)
        for task in sorted(pod.running, key=lambda k: k.ready_at, reverse=True):
            task.attempt += 1
            self.active -= 1
            self.interrupted += 1
            self.queue.appendleft(task)  # requeued at the head, as the reaper does
        pod.running.clear()

    # --- what the observer reads --------------------------------------------
    def upcoming(self, t: float, lead_s: float) -> int:
        """Delayed tasks due within ``lead_s`` (all not yet due: promotion is instant)."""
        return bisect_right(self._delayed_due, t + lead_s)

    def observe(self, t: float, *, lead_s: float) -> Observation:
        """What taskscale's observer would read from Redis at ``t``."""
        tobs = TypeObservation(
            task_type=TASK_TYPE,
            queued=len(self.queue),
            due=0,
            upcoming=self.upcoming(t, lead_s),
            active=self.active,
            idle_since=self.idle_since,
            enqueued_total=self.enqueued,
            claimed_total=self.claimed,
            completed_total=self.completed,
            service_ms_total=self.service_ms,
            wait_ms_total=self.wait_ms,
            oldest_ready_s=t - self.queue[0].ready_at if self.queue else None,
        )
        workers = tuple(
            WorkerObservation(p.name, p.name, (TASK_TYPE,), p.threads, len(p.running))
            for p in self.pods
            if p.ready_at <= t
        )
        return Observation(at=t, types={TASK_TYPE: tobs}, workers=workers)

    def unclaimed_waits(self, t: float) -> list[float]:
        """Waits so far of tasks still never claimed at ``t`` (censored, but counted)."""
        out = [t - task.ready_at for task in self.queue if task.claimed_at is None]
        out += [t - due for due, _, task in self._delayed if due <= t and task.claimed_at is None]
        return out
