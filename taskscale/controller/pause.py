"""Pausing a scaler by annotation, as during an incident.

Two annotations on a TaskScaler stop the policy from acting on its target:

* ``taskscale.io/paused: "true"`` -- hold the target at whatever replicas it
  has now (a person may still scale it by hand; the controller leaves it);
* ``taskscale.io/paused-replicas: "N"`` -- set the target to N once and hold
  it there (this one wins when both are set).

Removing them (or ``paused: "false"``) resumes scaling at the next pass.
While paused, Redis is still observed (metrics and status stay current) but
the decision is this module's, never the policy's.  Annotations are metadata,
not spec, so they do not move ``metadata.generation``; the config compares
equal or not on them, which is what makes the reconciler pick a change up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from taskscale.controller.types import Decision, ReasonCode

PAUSED_ANNOTATION = "taskscale.io/paused"
PAUSED_REPLICAS_ANNOTATION = "taskscale.io/paused-replicas"
_TRUE = frozenset({"true", "yes", "1"})
_FALSE = frozenset({"false", "no", "0", ""})
MAX_PAUSED_REPLICAS = 100000


class InvalidPause(ValueError):
    """A pause annotation whose value can't be read (the message says which)."""


@dataclass(frozen=True)
class Pause:
    """A paused scaler: hold as is (``replicas`` None) or set and hold N."""

    replicas: int | None = None

    def describe(self) -> str:
        if self.replicas is None:
            return f"paused by {PAUSED_ANNOTATION}: holding the current replicas"
        return f"paused by {PAUSED_REPLICAS_ANNOTATION}: holding {self.replicas} replicas"


def pause_from_annotations(annotations: Mapping[str, str] | None) -> Pause | None:
    """The pause the annotations ask for, or None; raise InvalidPause on a bad value."""
    annotations = annotations or {}
    fixed = annotations.get(PAUSED_REPLICAS_ANNOTATION)
    if fixed is not None:
        text = str(fixed).strip()
        if not text.isdigit() or int(text) > MAX_PAUSED_REPLICAS:
            raise InvalidPause(
                f"annotation {PAUSED_REPLICAS_ANNOTATION} must be a whole number "
                f"0-{MAX_PAUSED_REPLICAS}, not {fixed!r}"
            )
        return Pause(replicas=int(text))
    flag = annotations.get(PAUSED_ANNOTATION)
    if flag is None:
        return None
    value = str(flag).strip().lower()
    if value in _TRUE:
        return Pause()
    if value in _FALSE:
        return None
    raise InvalidPause(f'annotation {PAUSED_ANNOTATION} must be "true" or "false", not {flag!r}')


def paused_decision(pause: Pause, *, current: int) -> Decision:
    """What a paused scaler does: hold ``current``, or go to the fixed count."""
    desired = current if pause.replicas is None else pause.replicas
    return Decision(
        desired=desired,
        reason_code=ReasonCode.PAUSED,
        reason=f"{current} -> {desired}: {pause.describe()}",
    )
