"""The Job-mode actuator: creates one batch/v1 Job per task to run, counts
the Jobs of a TaskScaler by phase, and deletes finished ones beyond the
history limits.

Why it exists: a TaskScaler with ``spec.jobTemplate`` (job_spec.py) targets
Jobs instead of a scalable object; each Job's pod runs ``taskscale worker
--once``.  The reconcile pass reads :meth:`JobActuator.current_replicas`
(the active Jobs), asks :meth:`JobActuator.census` which of them have a
worker that claimed, lets :func:`~taskscale.controller.job_demand.decide_jobs`
say how many active Jobs there should be, and :meth:`JobActuator.scale`
creates the difference -- never deletes: a Job ends when its one task does.

The Jobs and their pods are found by the scaler's label
(:data:`~taskscale.controller.job_spec.SCALER_LABEL`), so a controller
restart or failover picks up where the last one was.  Finished Jobs are
deleted, oldest first, beyond ``successfulJobsHistoryLimit`` and
``failedJobsHistoryLimit`` (with their pods: background propagation); the
template's ``ttlSecondsAfterFinished`` (default 600 s) has the TTL
controller delete the rest.  A Job pod is protected like a Deployment's
(protection.py): marked against voluntary disruption while its task runs,
and flagged draining, so it claims nothing, while its node is leaving.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from taskscale.controller.disruption import PodMarks, mark_pods, pods_gone
from taskscale.controller.job_demand import FAILED, SUCCEEDED, JobCensus, JobState, census_of
from taskscale.controller.job_spec import SCALER_LABEL, JobTarget, job_body, scaler_label
from taskscale.controller.kube_client import FIELD_MANAGER, REQUEST_TIMEOUT_S, api_call
from taskscale.controller.metrics import ControllerMetrics
from taskscale.controller.types import Rollout
from taskscale.retrying import RetrySettings

log = logging.getLogger("taskscale.controller.kube")
T = TypeVar("T")

#: A Job condition that says it has ended, and how.
_ENDED = {"Complete": SUCCEEDED, "SuccessCriteriaMet": SUCCEEDED}
_FAILED = {"Failed", "FailureTarget"}


@dataclass
class JobActuator:
    """The Jobs of one Job-mode TaskScaler (the Actuator protocol, plus :meth:`census`)."""

    batch: client.BatchV1Api
    core: client.CoreV1Api
    namespace: str
    scaler_name: str
    target: JobTarget
    metrics: ControllerMetrics
    retry: RetrySettings = field(default_factory=RetrySettings)
    scaler: str | None = None  #: ``namespace/name`` of the TaskScaler, for metrics
    owner_uid: str = ""  #: the TaskScaler's uid: its Jobs' owner reference
    _jobs: list[JobState] = field(default_factory=list)

    @property
    def selector(self) -> str:
        return f"{SCALER_LABEL}={scaler_label(self.scaler_name)}"

    def current_replicas(self) -> int:
        """List the scaler's Jobs and their pods, delete finished Jobs beyond
        the history limits; the active Jobs."""
        jobs: Any = self._call(
            "list_jobs",
            lambda: self.batch.list_namespaced_job(
                self.namespace, label_selector=self.selector, _request_timeout=REQUEST_TIMEOUT_S
            ),
        )
        pods: Any = self._call(
            "list_pods",
            lambda: self.core.list_namespaced_pod(
                self.namespace, label_selector=self.selector, _request_timeout=REQUEST_TIMEOUT_S
            ),
        )
        pods_of: dict[str, list[str]] = {}
        for pod in pods.items:
            labels = pod.metadata.labels or {}
            owner = labels.get("batch.kubernetes.io/job-name") or labels.get("job-name")
            if owner and pod.metadata.deletion_timestamp is None:
                pods_of.setdefault(str(owner), []).append(str(pod.metadata.name))
        live = [j for j in jobs.items if j.metadata.deletion_timestamp is None]
        states = [
            JobState(str(j.metadata.name), _finished(j), tuple(pods_of.get(j.metadata.name, ())))
            for j in live
        ]
        deleted = self._clean(live, states)
        self._jobs = [s for s in states if s.name not in deleted]
        return sum(1 for s in self._jobs if s.finished is None)

    def rollout(self) -> Rollout | None:
        """Jobs have no rollout: nothing holds a Job-mode scale-down."""
        return None

    def mark_pods(self, busy_by_pod: Mapping[str, int]) -> PodMarks:
        """Every pass: the Job pods running a task marked against voluntary
        disruption (a consolidation would cut an hours-long task), idle ones
        unmarked, pods on leaving nodes named (controller/disruption.py)."""
        return mark_pods(self.core, self.namespace, self.selector, busy_by_pod, call=self._call)

    def pods_gone(self, names: Collection[str]) -> set[str]:
        """Which of ``names`` are no pod of the namespace any more."""
        return pods_gone(self.core, self.namespace, names, call=self._call)

    def census(self, busy_by_pod: Mapping[str, int]) -> JobCensus:
        """The Jobs :meth:`current_replicas` listed, by phase (``busy_by_pod``:
        the registry's tasks in flight per pod)."""
        return census_of(self._jobs, busy_by_pod)

    def scale(self, replicas: int, *, busy_by_pod: Mapping[str, int]) -> None:
        """Create Jobs until ``replicas`` are active (none are deleted)."""
        active = sum(1 for s in self._jobs if s.finished is None)
        created = 0
        try:
            for _ in range(max(0, replicas - active)):
                job: Any = self._call("create_job", self._create)
                self._jobs.append(JobState(str(job.metadata.name)))
                created += 1
        finally:
            if created:
                self.metrics.count_jobs_created(self.scaler or self.scaler_name, created)

    def _create(self) -> Any:
        body: Any = job_body(
            self.target, scaler=self.scaler_name, namespace=self.namespace, owner_uid=self.owner_uid
        )
        return self.batch.create_namespaced_job(
            self.namespace, body, field_manager=FIELD_MANAGER, _request_timeout=REQUEST_TIMEOUT_S
        )

    def _delete(self, name: str) -> Any:
        return self.batch.delete_namespaced_job(
            name,
            self.namespace,
            propagation_policy="Background",
            _request_timeout=REQUEST_TIMEOUT_S,
        )

    def _clean(self, jobs: list[Any], states: list[JobState]) -> set[str]:
        """Delete the oldest finished Jobs beyond the history limits; their names."""
        limits = {SUCCEEDED: self.target.successful_history, FAILED: self.target.failed_history}
        doomed: set[str] = set()
        for phase, keep in limits.items():
            ended = [
                (_ended_at(j), s.name)
                for j, s in zip(jobs, states, strict=True)
                if s.finished == phase
            ]
            ended.sort(reverse=True)  # newest first
            doomed.update(name for _, name in ended[keep:])
        for name in sorted(doomed):
            try:
                self._call("delete_job", functools.partial(self._delete, name))
            except ApiException as exc:
                if exc.status != 404:  # gone already: the TTL controller was first
                    raise
        if doomed:
            log.info(
                "%s: deleted %d finished Job(s) beyond the history limits", self.scaler, len(doomed)
            )
        return doomed

    def _call(self, operation: str, fn: Callable[[], T]) -> T:
        return api_call(
            fn, operation=operation, metrics=self.metrics, retry=self.retry, scaler=self.scaler
        )


def _finished(job: Any) -> str | None:
    """SUCCEEDED or FAILED by the Job's conditions; None while it is active."""
    for cond in (job.status.conditions if job.status is not None else None) or []:
        if cond.status != "True":
            continue
        if cond.type in _ENDED:
            return _ENDED[cond.type]
        if cond.type in _FAILED:
            return FAILED
    return None


def _ended_at(job: Any) -> str:
    """When the Job ended (RFC 3339 text sorts as time), else when it was made."""
    status = job.status
    when = (status.completion_time if status is not None else None) or None
    if when is None:
        for cond in (status.conditions if status is not None else None) or []:
            if cond.status == "True" and cond.last_transition_time is not None:
                when = cond.last_transition_time
    when = when or job.metadata.creation_timestamp
    return when.isoformat() if hasattr(when, "isoformat") else str(when or "")
