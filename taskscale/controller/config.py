"""A TaskScaler object (as the API server returns it) -> a :class:`ScalerConfig`.

The CRD schema already rejects most bad specs and fills in defaults, but the
controller must not trust that alone: a CRD installed from an older chart, a
hand-written object in the demo, or a test may skip it.  So this module is the
one place that reads the camelCase spec, applies the same defaults as the
schema and calls :func:`validate_policy`, raising :class:`InvalidSpec` with a
message fit for a status condition.

Every field of the spec is a row of :data:`SPEC_FIELDS`: where it is in the
spec, the attribute it becomes, the check that reads it, and what an unset
one means.  That default is the attribute's dataclass default (``types.py``,
``rules/base.py``, the dataclasses below), so each number is stated once in
Python; tests/controller/test_spec_fields.py holds the CRD schema's fields
and defaults equal to the table's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from taskscale.controller.job_spec import JobTarget, read_history, read_job_spec, read_metadata
from taskscale.controller.rules.base import Fallback, Pause
from taskscale.controller.rules.pause import InvalidPause, pause_from_annotations
from taskscale.controller.source_spec import TASKSCALE, TypeSource, check_kind, type_source
from taskscale.controller.types import ScalingPolicy, TypePolicy, validate_policy
from taskscale.dataclass_defaults import REQUIRED, default_of
from taskscale.keys import DEFAULT_NAMESPACE, check_name
from taskscale.redis_urls import check_url
from taskscale.shards import ShardMap

__all__ = [
    "DEFAULT_POLL_INTERVAL_S",
    "SPEC_FIELDS",
    "InvalidSpec",
    "RedisRef",
    "ScalerConfig",
    "SpecField",
    "TargetRef",
    "config_from_object",
    "config_from_spec",
    "validate_policy",
]

DEFAULT_POLL_INTERVAL_S = 5.0
MIN_POLL_INTERVAL_S = 0.1


class InvalidSpec(ValueError):
    """The spec can't be applied; the message says which field and why."""


@dataclass(frozen=True)
class RedisRef:
    """Where a scaler's queues live: a URL, or a Secret key holding one."""

    url: str | None = None
    secret_name: str | None = None
    secret_key: str | None = None
    #: The Redis key namespace (keys start with ``{namespace}:``), or several
    #: comma-separated ones the types are spread over (taskscale.shards).
    key_namespace: str = DEFAULT_NAMESPACE


@dataclass(frozen=True)
class TargetRef:
    """What kind of object ``scaleTargetRef`` names (anything with a ``scale``
    subresource); the name is :attr:`ScalerConfig.target`."""

    api_version: str = "apps/v1"
    kind: str = "Deployment"

    @property
    def group(self) -> str:
        """The API group ("" for the core group)."""
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]


@dataclass(frozen=True)
class ScalerConfig:
    """Everything the reconciler needs to know about one TaskScaler."""

    name: str
    namespace: str  #: the Kubernetes namespace (or "local" outside Kubernetes)
    target: str  #: the Deployment (or local pool) being scaled
    redis: RedisRef
    policy: ScalingPolicy
    poll_interval_s: float = DEFAULT_POLL_INTERVAL_S
    generation: int = 0  #: metadata.generation the config was read from
    uid: str = ""  #: metadata.uid (Job mode: the owner of its Jobs)
    #: From the pause annotations (None = not paused); see rules/pause.py.
    pause: Pause | None = None
    #: spec.fallback: replicas to set after Redis failed this many passes (None = fail-static).
    fallback: Fallback | None = None
    #: scaleTargetRef's apiVersion and kind (default apps/v1 Deployment).
    target_ref: TargetRef = TargetRef()
    #: The types read from Celery, RQ or plain lists (spec.source and each
    #: type's source; source_spec.py); every other type is taskscale's.
    sources: tuple[TypeSource, ...] = ()
    #: spec.jobTemplate and the history limits: Job mode (job_spec.py); None =
    #: a scaleTargetRef is scaled.
    jobs: JobTarget | None = None

    @property
    def key(self) -> str:
        """``namespace/name``: the scaler's identity in logs, metrics and maps."""
        return f"{self.namespace}/{self.name}"


# --- the spec's fields ------------------------------------------------------------

_OWN_DEFAULT: Any = object()  # SpecField.unset: the attribute's dataclass default


@dataclass(frozen=True)
class SpecField:
    """One field of a TaskScaler spec and how it is read."""

    #: Where it is in the spec; ``[]`` stands for each entry of an array.
    path: str
    #: The dataclass, and its attribute, the field becomes.
    owner: type
    attr: str
    #: Checks and converts a set value (InvalidSpec or ValueError: one sentence);
    #: None: its section's own code reads it (say which in the table).
    read: Callable[[Any, SpecField], Any] | None
    #: What an unset field means when the attribute's own default does not say
    #: it (REQUIRED: it must be set; None: no fixed default).
    unset: Any = _OWN_DEFAULT
    #: The error for a required field that is unset (default: "PATH is required").
    missing: str = ""

    @property
    def key(self) -> str:
        """The field's name in its section."""
        return self.path.rpartition(".")[2]

    @property
    def section(self) -> str:
        """The path of the object holding it ("" for the spec itself)."""
        return self.path.rpartition(".")[0]

    @property
    def default(self) -> Any:
        """What an unset field means (REQUIRED: it must be set)."""
        if self.unset is not _OWN_DEFAULT:
            return self.unset
        return default_of(self.owner, self.attr)

    def value(self, section: Mapping[str, Any]) -> Any:
        """The field's value in ``section``, checked, or its default when unset
        (null counts as unset, as the API server prunes nulls before defaulting)."""
        raw = section.get(self.key)
        if raw is None:
            if self.default is REQUIRED:
                raise InvalidSpec(self.missing or f"{self.path} is required")
            return self.default
        if self.read is None:
            raise LookupError(f"{self.path} is read by its section's own code")
        return self.read(raw, self)


def _integer(value: object, field: SpecField) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSpec(f"{field.key} must be an integer, not {value!r}")
    return value


def _number(value: object, field: SpecField) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidSpec(f"{field.key} must be a number, not {value!r}")
    return float(value)


def _poll_interval(value: object, field: SpecField) -> float:
    seconds = _number(value, field)
    if seconds < MIN_POLL_INTERVAL_S:
        raise InvalidSpec(f"{field.key} must be at least {MIN_POLL_INTERVAL_S}")
    return seconds


def _name(value: object, field: SpecField) -> str:
    """A non-empty string, else the field's ``missing`` sentence."""
    if not isinstance(value, str) or not value:
        raise InvalidSpec(field.missing or f"{field.path} is required")
    return value


def _secret_part(value: object, field: SpecField) -> str:
    if not value:
        raise InvalidSpec(field.missing)
    return str(value)


def _task_type(value: object, field: SpecField) -> str:
    return check_name("task type", _name(value, field))


def _api_version(value: object, field: SpecField) -> str:
    if not isinstance(value, str) or not value.strip("/") or " " in value:
        raise InvalidSpec(f"{field.path} {value!r} is not group/version")
    return value


def _target_kind(value: object, field: SpecField) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidSpec(f"{field.path} must be a non-empty string")
    return value


def _url(value: object, field: SpecField) -> str:
    if not isinstance(value, str):
        raise InvalidSpec(f"{field.path} {value!r} is not a URL")
    try:
        check_url(value)
    except ValueError as exc:
        raise InvalidSpec(f"{field.path}: {exc}") from None
    return value


def _namespaces(value: object, field: SpecField) -> str:
    """One namespace, or several (a,b,c) the scaler's types are spread over."""
    return ",".join(ShardMap.parse(str(value or field.default)).namespaces)


def _source_kind(value: object, field: SpecField) -> str:
    return check_kind(value)


_SECRET_NEEDS = "redis.urlSecretRef needs name and key"
_FALLBACK_NEEDS = "fallback needs replicas (and optionally afterFailures)"

#: Every field of a TaskScaler spec, in the CRD's order.
SPEC_FIELDS: tuple[SpecField, ...] = (
    SpecField("scaleTargetRef.apiVersion", TargetRef, "api_version", _api_version),
    SpecField("scaleTargetRef.kind", TargetRef, "kind", _target_kind),
    SpecField("scaleTargetRef.name", ScalerConfig, "target", _name),
    # Job mode (job_spec.py): exclusive with scaleTargetRef; unset limits are JobTarget's
    SpecField("jobTemplate.metadata", JobTarget, "metadata", read_metadata, unset=None),
    SpecField(
        "jobTemplate.spec",
        JobTarget,
        "spec",
        read_job_spec,
        missing="jobTemplate.spec is required (a batch/v1 JobSpec)",
    ),
    SpecField(
        "successfulJobsHistoryLimit", JobTarget, "successful_history", read_history, unset=None
    ),
    SpecField("failedJobsHistoryLimit", JobTarget, "failed_history", read_history, unset=None),
    SpecField("redis.url", RedisRef, "url", _url),
    # RedisRef's None means "no secret"; inside urlSecretRef both are required
    SpecField(
        "redis.urlSecretRef.name",
        RedisRef,
        "secret_name",
        _secret_part,
        unset=REQUIRED,
        missing=_SECRET_NEEDS,
    ),
    SpecField(
        "redis.urlSecretRef.key",
        RedisRef,
        "secret_key",
        _secret_part,
        unset=REQUIRED,
        missing=_SECRET_NEEDS,
    ),
    SpecField("redis.namespace", RedisRef, "key_namespace", _namespaces),
    SpecField("source", TypeSource, "kind", _source_kind, unset=TASKSCALE),
    SpecField(
        "taskTypes[].name",
        TypePolicy,
        "name",
        _task_type,
        missing="each taskTypes entry needs a name",
    ),
    SpecField("taskTypes[].idleThresholdSeconds", TypePolicy, "idle_threshold_s", _number),
    SpecField("taskTypes[].maxQueueWaitSeconds", TypePolicy, "max_queue_wait_s", _number),
    # Read together by source_spec.type_source: an unset source is the
    # scaler's, unset queues and tasks are the type's name.
    SpecField("taskTypes[].source", TypeSource, "kind", None, unset=None),
    SpecField("taskTypes[].queues", TypeSource, "queues", None, unset=None),
    SpecField("taskTypes[].tasks", TypeSource, "tasks", None, unset=None),
    SpecField("tasksPerReplica", ScalingPolicy, "tasks_per_replica", _integer),
    SpecField("minReplicas", ScalingPolicy, "min_replicas", _integer),
    SpecField("maxReplicas", ScalingPolicy, "max_replicas", _integer),
    SpecField("scaleUpStabilizationSeconds", ScalingPolicy, "scale_up_stabilization_s", _number),
    SpecField(
        "scaleDownStabilizationSeconds", ScalingPolicy, "scale_down_stabilization_s", _number
    ),
    SpecField("maxScaleUpStep", ScalingPolicy, "max_scale_up_step", _integer),
    SpecField("maxScaleDownStep", ScalingPolicy, "max_scale_down_step", _integer),
    SpecField("warmupLeadSeconds", ScalingPolicy, "warmup_lead_s", _number),
    SpecField("provisioningLeadSeconds", ScalingPolicy, "provisioning_lead_s", _number),
    SpecField("rateWindowSeconds", ScalingPolicy, "rate_window_s", _number),
    SpecField("fallback.replicas", Fallback, "replicas", _integer, missing=_FALLBACK_NEEDS),
    SpecField("fallback.afterFailures", Fallback, "after_failures", _integer),
    SpecField("pollIntervalSeconds", ScalerConfig, "poll_interval_s", _poll_interval),
)


def _read(section: Mapping[str, Any], path: str, owner: type) -> dict[str, Any]:
    """The attributes of ``owner`` the fields of the spec's object at ``path`` set."""
    return {
        f.attr: f.value(section)
        for f in SPEC_FIELDS
        if f.section == path and f.owner is owner and f.read is not None
    }


# --- reading a spec -----------------------------------------------------------------


def config_from_object(obj: Mapping[str, Any]) -> ScalerConfig:
    """Read a whole TaskScaler object (metadata + spec)."""
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    namespace = meta.get("namespace") or "default"
    if not isinstance(name, str) or not name:
        raise InvalidSpec("metadata.name is missing")
    config = config_from_spec(
        obj.get("spec") or {},
        name=name,
        namespace=str(namespace),
        generation=int(meta.get("generation") or 0),
    )
    try:
        pause = pause_from_annotations(meta.get("annotations"))
    except InvalidPause as exc:
        raise InvalidSpec(str(exc)) from None
    return dataclasses.replace(config, pause=pause, uid=str(meta.get("uid") or ""))


def config_from_spec(
    spec: Mapping[str, Any], *, name: str, namespace: str, generation: int = 0
) -> ScalerConfig:
    """Read a TaskScaler spec (camelCase, as in the CRD); raise InvalidSpec."""
    try:
        policy = _policy(spec)
        validate_policy(policy)
        own = _read(spec, "", ScalerConfig)  # pollIntervalSeconds
        redis = _redis(spec)
        jobs = _jobs(spec, policy)
        ref = spec.get("scaleTargetRef") if jobs is None else {"name": name}
        if not isinstance(ref, Mapping):
            raise InvalidSpec("scaleTargetRef.name (or a jobTemplate) is required")
        return ScalerConfig(
            name=name,
            namespace=namespace,
            redis=redis,
            policy=policy,
            generation=generation,
            fallback=_fallback(spec),
            target_ref=TargetRef(**_read(ref, "scaleTargetRef", TargetRef)),
            sources=_sources(spec, redis),
            jobs=jobs,
            **own,
            **_read(ref, "scaleTargetRef", ScalerConfig),  # its name: the target
        )
    except InvalidSpec:
        raise
    except (ValueError, TypeError) as exc:
        raise InvalidSpec(str(exc)) from None


def _redis(spec: Mapping[str, Any]) -> RedisRef:
    redis = spec.get("redis")
    if not isinstance(redis, Mapping):
        raise InvalidSpec("redis is required (url or urlSecretRef)")
    secret = redis.get("urlSecretRef")
    if (redis.get("url") is None) == (secret is None):
        raise InvalidSpec("set exactly one of redis.url and redis.urlSecretRef")
    found = _read(redis, "redis", RedisRef)
    if secret is not None:
        if not isinstance(secret, Mapping):
            raise InvalidSpec(_SECRET_NEEDS)
        found.update(_read(secret, "redis.urlSecretRef", RedisRef))
    return RedisRef(**found)


def _jobs(spec: Mapping[str, Any], policy: ScalingPolicy) -> JobTarget | None:
    """Job mode's target, or None when the spec names a scaleTargetRef."""
    template = spec.get("jobTemplate")
    if template is None:
        return None
    if spec.get("scaleTargetRef") is not None:
        raise InvalidSpec("set exactly one of scaleTargetRef and jobTemplate")
    if not isinstance(template, Mapping):
        raise InvalidSpec("jobTemplate must be an object: {metadata, spec}")
    if policy.min_replicas:
        raise InvalidSpec("minReplicas must be 0 with a jobTemplate: a Job runs one task")
    found = {**_read(template, "jobTemplate", JobTarget), **_read(spec, "", JobTarget)}
    return JobTarget(**{k: v for k, v in found.items() if v is not None})


def _sources(spec: Mapping[str, Any], redis: RedisRef) -> tuple[TypeSource, ...]:
    default = _read(spec, "", TypeSource)["kind"]
    found = tuple(s for t in spec["taskTypes"] if (s := type_source(t, default_kind=default)))
    if found and "," in redis.key_namespace:
        raise InvalidSpec("celery, rq and list sources need one redis.namespace, not several")
    if found and redis.url is not None and "+cluster://" in redis.url:
        raise InvalidSpec("celery, rq and list sources need a single Redis, not a Redis Cluster")
    return found


def _policy(spec: Mapping[str, Any]) -> ScalingPolicy:
    types = spec.get("taskTypes")
    if not isinstance(types, list) or not types:
        raise InvalidSpec("taskTypes needs at least one entry")
    return ScalingPolicy(
        types=tuple(_type_policy(t) for t in types), **_read(spec, "", ScalingPolicy)
    )


def _type_policy(entry: object) -> TypePolicy:
    if not isinstance(entry, Mapping):
        raise InvalidSpec("each taskTypes entry needs a name")
    return TypePolicy(**_read(entry, "taskTypes[]", TypePolicy))


def _fallback(spec: Mapping[str, Any]) -> Fallback | None:
    entry = spec.get("fallback")
    if entry is None:
        return None
    if not isinstance(entry, Mapping):
        raise InvalidSpec(_FALLBACK_NEEDS)
    fallback = Fallback(**_read(entry, "fallback", Fallback))
    if fallback.replicas < 0 or fallback.after_failures < 1:
        raise InvalidSpec("fallback.replicas must be 0 or more, fallback.afterFailures 1 or more")
    return fallback
