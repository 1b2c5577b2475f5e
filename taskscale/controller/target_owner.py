"""One scaler per target: which TaskScaler owns a target two of them name.

Two TaskScalers naming the same Deployment (or other scalable target) would
fight: one scales up what the other scales down, and the busy marks and
deletion costs they write flip on every pass. KEDA refuses the second
ScaledObject in its admission webhook; taskscale has no webhook, so the
reconciler decides on every pass, from the configs alone (no state, so a
restarted or failed-over controller decides the same): the scaler whose
``namespace/name`` sorts first owns the target; each other one changes
nothing and reports ``TargetConflict`` (status, a Warning Event) until the
owner is deleted or points elsewhere. Job-mode scalers own their Jobs by
their own label and never conflict.
"""

from __future__ import annotations

from collections.abc import Iterable

from taskscale.controller.config import ScalerConfig

#: (namespace, API group, kind, name) of a scaled target.
Target = tuple[str, str, str, str]


def target_of(config: ScalerConfig) -> Target | None:
    """What ``config`` scales; None for a Job-mode scaler (no shared target)."""
    if config.jobs is not None:
        return None
    ref = config.target_ref
    return (config.namespace, ref.group, ref.kind, config.target)


def shadowed(configs: Iterable[ScalerConfig]) -> dict[str, str]:
    """The key of every scaler that does not own its target -> its owner's key."""
    by_target: dict[Target, list[str]] = {}
    for config in configs:
        target = target_of(config)
        if target is not None:
            by_target.setdefault(target, []).append(config.key)
    others: dict[str, str] = {}
    for keys in by_target.values():
        owner, *rest = sorted(keys)
        for key in rest:
            others[key] = owner
    return others


def conflict_message(config: ScalerConfig, owner_key: str) -> str:
    """The condition's and Event's message of a scaler that does not own its target."""
    kind = config.target_ref.kind
    owner = owner_key.partition("/")[2]
    return (
        f"{kind} {config.target} is scaled by TaskScaler {owner}: this one changes nothing "
        "while both name it (delete one, or point it at another target)"
    )
