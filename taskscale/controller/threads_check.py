"""Does a scaler's ``tasksPerReplica`` match what its worker pods really run?

The policy sizes a Deployment as ``ceil(demand / tasksPerReplica)``: it
trusts ``tasksPerReplica`` to be the number of tasks one pod runs at once,
which is the sum of ``--threads`` over the worker processes in that pod.
When the two disagree the autoscaler is wrong by their ratio, silently:
``tasksPerReplica: 1`` over pods of 4 threads starts four times the pods the
backlog needs; ``tasksPerReplica: 8`` over pods of 2 threads leaves three
quarters of the backlog waiting.  Every worker writes its thread count into
its registry record, and the observer reads those records anyway, so the
comparison costs nothing; this module makes it (pure, no I/O) and the
reporter turns the answer into the ``ThreadsMatch`` condition and Events.

Only pods of the target Deployment count: a type may also be served by
workers of another Deployment or outside Kubernetes, whose threads say
nothing about this target.  A Deployment's pods are named
``<deployment>-<pod-template-hash>-<suffix>``, which is what is matched.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from taskscale.controller.types import WorkerObservation

#: Pods named in a message at most (the rest are counted).
_NAMED_PODS = 3


@dataclass(frozen=True)
class ThreadsCheck:
    """The comparison's outcome: whether they match, and a sentence saying so."""

    matches: bool
    message: str
    #: Tasks one pod runs at once -> the pods that do (sorted).
    pods_by_threads: dict[int, tuple[str, ...]]


#: Kubernetes cuts a generateName to this length before adding 5 random characters.
_MAX_GENERATE_NAME = 58


def pod_of_deployment(pod: str, deployment: str) -> bool:
    """Whether ``pod`` is named like a pod of Deployment ``deployment``: its
    generateName ``<deployment>-<pod-template-hash>-`` (cut to 58 characters
    for long names) and 5 random characters."""
    if len(pod) <= 5:
        return False
    base = pod[:-5]
    whole = re.escape(deployment) + r"-[a-z0-9]{1,10}-"
    if len(base) < _MAX_GENERATE_NAME:
        return re.fullmatch(whole, base) is not None
    if len(deployment) >= len(base):
        return deployment.startswith(base)
    return re.fullmatch(re.escape(deployment) + r"-[a-z0-9]{0,10}-?", base) is not None


def check_threads(
    *, deployment: str, tasks_per_replica: int, workers: Iterable[WorkerObservation]
) -> ThreadsCheck | None:
    """Compare ``tasks_per_replica`` with the threads per pod of ``deployment``'s
    live workers (``workers``: those serving the scaler's types; tracked
    processes, whose threads are not known, are left out).  None when no live
    worker of the Deployment is known: nothing to compare with."""
    per_pod: dict[str, int] = {}
    for worker in workers:
        if worker.threads <= 0:  # a tracked Celery/RQ process: its concurrency is not known
            continue
        if pod_of_deployment(worker.pod, deployment):
            per_pod[worker.pod] = per_pod.get(worker.pod, 0) + worker.threads
    if not per_pod:
        return None
    by_threads: dict[int, list[str]] = {}
    for pod, threads in sorted(per_pod.items()):
        by_threads.setdefault(threads, []).append(pod)
    grouped = {threads: tuple(pods) for threads, pods in sorted(by_threads.items())}
    if set(grouped) == {tasks_per_replica}:
        return ThreadsCheck(
            True,
            f"tasksPerReplica {tasks_per_replica} matches the threads of every worker pod "
            f"({len(per_pod)} live)",
            grouped,
        )
    found = "; ".join(
        f"{threads} thread{'s' if threads != 1 else ''} in {_pods(pods)}"
        for threads, pods in grouped.items()
    )
    wanted = max(grouped, key=lambda threads: len(grouped[threads]))
    return ThreadsCheck(
        False,
        f"tasksPerReplica is {tasks_per_replica} but the worker pods run {found}; "
        f"the controller sizes for {tasks_per_replica} task(s) per pod. Set tasksPerReplica "
        f"to the pods' thread count (e.g. {wanted}) or start the workers with "
        f"--threads {tasks_per_replica}",
        grouped,
    )


def _pods(pods: tuple[str, ...]) -> str:
    named = ", ".join(pods[:_NAMED_PODS])
    more = len(pods) - _NAMED_PODS
    return f"{named} and {more} more" if more > 0 else named
