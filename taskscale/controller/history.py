"""The policy's memory: recent recommendations, a sparse series of
observations, and the pod starts measured from the passes (:class:`PodStarts`).

``policy.decide`` reads it (the stabilization windows look at the
recommendations, the rate floor at the oldest kept observation of its rate
window); the reconciler writes every decision into it, the overrides'
(pause, fallback) included, so a scale-down after a pause or a fallback ends
is held by the scale-down window like any other.  No I/O.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Iterator
from itertools import islice

from taskscale.controller.types import Decision, Observation, ScalingPolicy

#: ``Decision.details`` key of the raw recommendation (before stabilization,
#: step limits and holds); :meth:`History.record` keeps it for the windows.
RECOMMENDATION = "recommendation"


class History:
    """The recent past the policy needs: raw recommendations (for the
    stabilization windows) and a sparse series of observations (for rates).

    Bounded two ways: entries older than ``max_age_s`` are dropped on each
    :meth:`record`, and no more than ``max_entries`` are kept.  Observations
    are kept at most one per ``sample_every_s``, so 1000 types polled every
    second cost a few dozen snapshots, not hundreds.
    """

    def __init__(
        self,
        *,
        max_age_s: float = 600.0,
        sample_every_s: float = 5.0,
        max_entries: int = 4096,
    ) -> None:
        if max_age_s <= 0 or sample_every_s < 0 or max_entries < 1:
            raise ValueError("History needs max_age_s > 0, sample_every_s >= 0, max_entries >= 1")
        self.max_age_s = max_age_s
        self.sample_every_s = sample_every_s
        self._rec_at: deque[float] = deque(maxlen=max_entries)
        self._recs: deque[int] = deque(maxlen=max_entries)
        self._sample_at: deque[float] = deque(maxlen=max_entries)
        self._samples: deque[Observation] = deque(maxlen=max_entries)
        self._starts = PodStarts(max_age_s=max_age_s)

    @classmethod
    def for_policy(cls, policy: ScalingPolicy, *, sample_every_s: float = 5.0) -> History:
        """A history that keeps just what ``policy``'s windows look at."""
        horizon = max(
            policy.rate_window_s,
            policy.scale_up_stabilization_s,
            policy.scale_down_stabilization_s,
        )
        return cls(max_age_s=horizon + 2 * sample_every_s + 1.0, sample_every_s=sample_every_s)

    def record(self, now: float, observation: Observation | None, decision: Decision) -> None:
        """Remember a decision (and, sparsely, the observation it was made from).

        Its recommendation (``details[RECOMMENDATION]``, else ``desired``) is
        kept for the windows when it was made from an observation -- the
        policy's and a pause's -- or carries a recommendation without one: a
        fallback's replicas, so the scale-down window holds them for a while
        after Redis is read again.  Fail-static's hold (no observation, no
        recommendation) is not a recommendation and is not kept.
        """
        rec = decision.details.get(RECOMMENDATION)
        if observation is not None or rec is not None:
            self._rec_at.append(now)
            self._recs.append(int(rec if rec is not None else decision.desired))
        if observation is not None and (
            not self._sample_at or observation.at - self._sample_at[-1] >= self.sample_every_s
        ):
            self._sample_at.append(observation.at)
            self._samples.append(observation)
        if observation is not None:
            self._starts.record(now, decision.desired, len({w.pod for w in observation.workers}))
        self._prune(now, observation.at if observation is not None else None)

    def pod_start_s(self) -> float | None:
        """The median of the recent measured pod starts (None: none measured)."""
        return self._starts.median()

    def _prune(self, now: float, observed_at: float | None) -> None:
        while self._rec_at and self._rec_at[0] < now - self.max_age_s:
            self._rec_at.popleft()
            self._recs.popleft()
        if observed_at is not None:
            while self._sample_at and self._sample_at[0] < observed_at - self.max_age_s:
                self._sample_at.popleft()
                self._samples.popleft()

    def recommendations_since(self, since: float) -> Iterator[int]:
        """Raw recommendations recorded at or after ``since`` (policy clock)."""
        # islice walks the deque in C: the windows read this on every decision
        return islice(self._recs, bisect_left(self._rec_at, since), None)

    def oldest_sample_since(self, since: float) -> Observation | None:
        """The oldest kept observation taken at or after ``since`` (Redis clock)."""
        start = bisect_left(self._sample_at, since)
        return self._samples[start] if start < len(self._samples) else None

    def __len__(self) -> int:
        return len(self._recs)


class PodStarts:
    """How long a pod asked for takes to show a ready worker, measured from
    the passes: the time from a decision that raised the desired replicas to
    the pass that first saw one more pod with a registered worker (a pod's
    start, plus up to a poll interval).

    Pods are matched first asked, first ready; a scale-down forgets the
    latest asked first (a ReplicaSet removes pods not ready yet first); a
    pod not up within ``max_age_s`` is forgotten (a failed scale, a crash
    loop).  The median of the last ``keep`` measurements resists a pod of
    another Deployment serving the same types coming and going."""

    def __init__(self, *, max_age_s: float, keep: int = 15) -> None:
        self.max_age_s = max_age_s
        self._asked: deque[float] = deque()  #: when each pod still starting was asked for
        self._desired: int | None = None
        self._ready = 0
        self._samples: deque[float] = deque(maxlen=keep)

    def record(self, now: float, desired: int, ready: int) -> None:
        """One pass: the replicas it decided on, the pods with a worker it saw."""
        if self._desired is not None:
            if desired > self._desired:
                self._asked.extend([now] * (desired - self._desired))
            elif desired < self._desired:
                for _ in range(min(len(self._asked), self._desired - desired)):
                    self._asked.pop()  # the starting ones go first
        if ready > self._ready:
            for _ in range(min(len(self._asked), ready - self._ready)):
                self._samples.append(now - self._asked.popleft())
        while self._asked and self._asked[0] < now - self.max_age_s:
            self._asked.popleft()
        self._desired, self._ready = desired, ready

    def median(self) -> float | None:
        """The median of the recent measurements (None: none yet)."""
        if not self._samples:
            return None
        ordered = sorted(self._samples)
        return ordered[len(ordered) // 2]
