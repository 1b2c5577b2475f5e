"""Job mode's spec and the Job it creates, pure: ``spec.jobTemplate`` and
the history limits read and checked, and the batch/v1 Job body built from them.

Why it exists: a TaskScaler may target Jobs instead of a scalable object
(issue 23: hours-long tasks, one pod each; docs/operating.md "Job mode").
Its ``jobTemplate: {metadata, spec}`` holds a batch/v1 JobSpec whose pods run
``taskscale worker --once``; ``successfulJobsHistoryLimit`` and
``failedJobsHistoryLimit`` say how many finished Jobs are kept (as in KEDA's
ScaledJob).  config.py reads the fields through its table with the readers
here; job_target.py creates the Jobs :func:`job_body` describes.  Nothing
here does I/O.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: The label on every Job (and its pods) a TaskScaler creates: the scaler's name.
SCALER_LABEL = "taskscale.io/scaler"
#: ``ttlSecondsAfterFinished`` of a template that sets none: the TTL
#: controller deletes a finished Job (and its pod) this long after it ended.
DEFAULT_TTL_S = 600
#: The environment variable a worker reads its pod's name from (the registry
#: record's ``pod``), filled by the Downward API.
POD_NAME = "POD_NAME"
#: The TaskScaler's apiVersion, in its Jobs' owner reference.
OWNER_API_VERSION = "taskscale.io/v1alpha1"
#: The longest label value Kubernetes accepts.
MAX_LABEL = 63


@dataclass(frozen=True)
class JobTarget:
    """What a Job-mode TaskScaler creates, and how many finished Jobs it keeps."""

    #: batch/v1 JobSpec (its ``template`` is the pod's).
    spec: Mapping[str, Any]
    #: Labels and annotations of each Job.
    metadata: Mapping[str, Any] = field(default_factory=dict)
    #: Finished Jobs kept, newest first; older ones are deleted.
    successful_history: int = 10
    failed_history: int = 10


def read_metadata(value: object, _field: object) -> Mapping[str, Any]:
    """``jobTemplate.metadata``: labels and annotations only (strings)."""
    if not isinstance(value, Mapping):
        raise ValueError("jobTemplate.metadata must be an object")
    extra = sorted(set(value) - {"labels", "annotations"})
    if extra:
        raise ValueError(f"jobTemplate.metadata may set labels and annotations only, not {extra}")
    for part in ("labels", "annotations"):
        entries = value.get(part) or {}
        if not isinstance(entries, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in entries.items()
        ):
            raise ValueError(f"jobTemplate.metadata.{part} must map strings to strings")
    return dict(value)


def read_job_spec(value: object, _field: object) -> Mapping[str, Any]:
    """``jobTemplate.spec``: a JobSpec with a pod template of containers."""
    if not isinstance(value, Mapping):
        raise ValueError("jobTemplate.spec must be an object (a batch/v1 JobSpec)")
    template = value.get("template")
    pod_spec = template.get("spec") if isinstance(template, Mapping) else None
    containers = pod_spec.get("containers") if isinstance(pod_spec, Mapping) else None
    if not isinstance(containers, list) or not containers:
        raise ValueError("jobTemplate.spec.template.spec.containers needs at least one container")
    if not all(isinstance(c, Mapping) and c.get("name") for c in containers):
        raise ValueError("each container of jobTemplate.spec.template needs a name")
    restart = pod_spec.get("restartPolicy") if isinstance(pod_spec, Mapping) else None
    if restart not in (None, "Never", "OnFailure"):
        raise ValueError("jobTemplate's restartPolicy must be Never or OnFailure")
    for key in ("parallelism", "completions"):
        if value.get(key) not in (None, 1):
            raise ValueError(f"jobTemplate.spec.{key} must be 1: each Job runs one task")
    return dict(value)


def read_history(value: object, field_: object) -> int:
    """A history limit: a whole number >= 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        name = getattr(field_, "key", "history limit")
        raise ValueError(f"{name} must be a whole number >= 0, not {value!r}")
    return value


def scaler_label(name: str) -> str:
    """The :data:`SCALER_LABEL` value for a TaskScaler named ``name`` (a
    name longer than a label value may be is cut, and told apart by a hash)."""
    if len(name) <= MAX_LABEL:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    return f"{name[: MAX_LABEL - 11].rstrip('.-_')}-{digest}"


def job_body(
    target: JobTarget, *, scaler: str, namespace: str, owner_uid: str = ""
) -> dict[str, Any]:
    """The batch/v1 Job to create for one task of the scaler named ``scaler``:
    the template with the scaler's label on the Job and its pod, a
    ``generateName``, ``POD_NAME`` from the Downward API in every container
    that does not set it, ``restartPolicy: Never`` and :data:`DEFAULT_TTL_S`
    unless the template says otherwise; with ``owner_uid`` (the TaskScaler's
    uid) an owner reference, so deleting the TaskScaler deletes its Jobs
    (the garbage collector; ``kubectl delete --cascade=orphan`` keeps them)."""
    label = {SCALER_LABEL: scaler_label(scaler)}
    meta = copy.deepcopy(dict(target.metadata))
    meta["labels"] = {**(meta.get("labels") or {}), **label}
    spec = copy.deepcopy(dict(target.spec))
    spec.setdefault("ttlSecondsAfterFinished", DEFAULT_TTL_S)
    template = spec["template"]
    pod_meta = template.setdefault("metadata", {})
    pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **label}
    pod_spec = template["spec"]
    pod_spec.setdefault("restartPolicy", "Never")
    for container in pod_spec["containers"]:
        env = container.setdefault("env", [])
        if not any(e.get("name") == POD_NAME for e in env):
            env.append(
                {"name": POD_NAME, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
            )
    meta.update(generateName=f"{scaler_label(scaler)[:52]}-", namespace=namespace)
    if owner_uid:
        owner = {"apiVersion": OWNER_API_VERSION, "kind": "TaskScaler", "name": scaler}
        meta["ownerReferences"] = [{**owner, "uid": owner_uid, "controller": True}]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}
