"""A TaskScaler object (as the API server returns it) -> a :class:`ScalerConfig`.

The CRD schema already rejects most bad specs and fills in defaults, but the
controller must not trust that alone: a CRD installed from an older chart, a
hand-written object in the demo, or a test may skip it.  So this module is the
one place that reads the camelCase spec, applies the same defaults as the
schema and calls :func:`validate_policy`, raising :class:`InvalidSpec` with a
message fit for a status condition.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from taskscale.controller.rules.base import Fallback, Pause
from taskscale.controller.rules.pause import InvalidPause, pause_from_annotations
from taskscale.controller.source_spec import TASKSCALE, TypeSource, check_kind, type_source
from taskscale.controller.types import ScalingPolicy, TypePolicy, validate_policy
from taskscale.keys import DEFAULT_NAMESPACE, check_name
from taskscale.redis_urls import check_url
from taskscale.shards import ShardMap

__all__ = [
    "DEFAULT_POLL_INTERVAL_S",
    "InvalidSpec",
    "RedisRef",
    "ScalerConfig",
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
    #: From the pause annotations (None = not paused); see rules/pause.py.
    pause: Pause | None = None
    #: spec.fallback: replicas to set after Redis failed this many passes (None = fail-static).
    fallback: Fallback | None = None
    #: scaleTargetRef's apiVersion and kind (default apps/v1 Deployment).
    target_ref: TargetRef = TargetRef()
    #: The types read from Celery, RQ or plain lists (spec.source and each
    #: type's source; source_spec.py); every other type is taskscale's.
    sources: tuple[TypeSource, ...] = ()

    @property
    def key(self) -> str:
        """``namespace/name``: the scaler's identity in logs, metrics and maps."""
        return f"{self.namespace}/{self.name}"


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
    return dataclasses.replace(config, pause=pause)


def config_from_spec(
    spec: Mapping[str, Any], *, name: str, namespace: str, generation: int = 0
) -> ScalerConfig:
    """Read a TaskScaler spec (camelCase, as in the CRD); raise InvalidSpec."""
    try:
        policy = _policy(spec)
        validate_policy(policy)
        poll = _number(spec, "pollIntervalSeconds", DEFAULT_POLL_INTERVAL_S)
        if poll < MIN_POLL_INTERVAL_S:
            raise InvalidSpec(f"pollIntervalSeconds must be at least {MIN_POLL_INTERVAL_S}")
        redis = _redis(spec)
        return ScalerConfig(
            name=name,
            namespace=namespace,
            target=_target(spec),
            redis=redis,
            policy=policy,
            poll_interval_s=poll,
            generation=generation,
            fallback=_fallback(spec),
            target_ref=_target_ref(spec),
            sources=_sources(spec, redis),
        )
    except InvalidSpec:
        raise
    except (ValueError, TypeError) as exc:
        raise InvalidSpec(str(exc)) from None


def _target(spec: Mapping[str, Any]) -> str:
    ref = spec.get("scaleTargetRef")
    if not isinstance(ref, Mapping) or not isinstance(ref.get("name"), str) or not ref["name"]:
        raise InvalidSpec("scaleTargetRef.name is required")
    return str(ref["name"])


def _target_ref(spec: Mapping[str, Any]) -> TargetRef:
    ref = spec.get("scaleTargetRef") or {}
    api_version = ref.get("apiVersion", "apps/v1")
    kind = ref.get("kind", "Deployment")
    if not isinstance(api_version, str) or not api_version.strip("/") or " " in api_version:
        raise InvalidSpec(f"scaleTargetRef.apiVersion {api_version!r} is not group/version")
    if not isinstance(kind, str) or not kind:
        raise InvalidSpec("scaleTargetRef.kind must be a non-empty string")
    return TargetRef(api_version=api_version, kind=kind)


def _redis(spec: Mapping[str, Any]) -> RedisRef:
    redis = spec.get("redis")
    if not isinstance(redis, Mapping):
        raise InvalidSpec("redis is required (url or urlSecretRef)")
    url = redis.get("url")
    secret = redis.get("urlSecretRef")
    if (url is None) == (secret is None):
        raise InvalidSpec("set exactly one of redis.url and redis.urlSecretRef")
    # one namespace, or several (a,b,c) the scaler's types are spread over
    shards = ShardMap.parse(str(redis.get("namespace") or DEFAULT_NAMESPACE))
    key_namespace = ",".join(shards.namespaces)
    if url is not None:
        if not isinstance(url, str):
            raise InvalidSpec(f"redis.url {url!r} is not a URL")
        try:
            check_url(url)
        except ValueError as exc:
            raise InvalidSpec(f"redis.url: {exc}") from None
        return RedisRef(url=url, key_namespace=key_namespace)
    if not isinstance(secret, Mapping) or not secret.get("name") or not secret.get("key"):
        raise InvalidSpec("redis.urlSecretRef needs name and key")
    return RedisRef(
        secret_name=str(secret["name"]),
        secret_key=str(secret["key"]),
        key_namespace=key_namespace,
    )


def _sources(spec: Mapping[str, Any], redis: RedisRef) -> tuple[TypeSource, ...]:
    default = check_kind(spec.get("source", TASKSCALE))
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
        types=tuple(_type_policy(t) for t in types),
        tasks_per_replica=_integer(spec, "tasksPerReplica", 4),
        min_replicas=_integer(spec, "minReplicas", 0),
        max_replicas=_integer(spec, "maxReplicas", 10),
        scale_up_stabilization_s=_number(spec, "scaleUpStabilizationSeconds", 0.0),
        scale_down_stabilization_s=_number(spec, "scaleDownStabilizationSeconds", 60.0),
        max_scale_up_step=_integer(spec, "maxScaleUpStep", 0),
        max_scale_down_step=_integer(spec, "maxScaleDownStep", 0),
        warmup_lead_s=_number(spec, "warmupLeadSeconds", 30.0),
        rate_window_s=_number(spec, "rateWindowSeconds", 60.0),
    )


def _type_policy(entry: object) -> TypePolicy:
    if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
        raise InvalidSpec("each taskTypes entry needs a name")
    name = check_name("task type", entry["name"])
    wait = entry.get("maxQueueWaitSeconds")
    return TypePolicy(
        name=name,
        idle_threshold_s=_number(entry, "idleThresholdSeconds", 300.0),
        max_queue_wait_s=None if wait is None else _number(entry, "maxQueueWaitSeconds", 0.0),
    )


def _fallback(spec: Mapping[str, Any]) -> Fallback | None:
    entry = spec.get("fallback")
    if entry is None:
        return None
    if not isinstance(entry, Mapping) or "replicas" not in entry:
        raise InvalidSpec("fallback needs replicas (and optionally afterFailures)")
    fallback = Fallback(
        replicas=_integer(entry, "replicas", 0), after_failures=_integer(entry, "afterFailures", 3)
    )
    if fallback.replicas < 0 or fallback.after_failures < 1:
        raise InvalidSpec("fallback.replicas must be 0 or more, fallback.afterFailures 1 or more")
    return fallback


def _integer(spec: Mapping[str, Any], field: str, default: int) -> int:
    value = spec.get(field, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSpec(f"{field} must be an integer, not {value!r}")
    return value


def _number(spec: Mapping[str, Any], field: str, default: float) -> float:
    value = spec.get(field, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidSpec(f"{field} must be a number, not {value!r}")
    return float(value)
