"""The pause rule: a pause annotation decides alone, as during an incident.

Two annotations on a TaskScaler stop the policy from acting on its target:

* ``taskscale.io/paused: "true"`` -- hold the target at whatever replicas it
  has now (a person may still scale it by hand; the controller leaves it);
* ``taskscale.io/paused-replicas: "N"`` -- set the target to N once and hold
  it there (this one wins when both are set).

Removing them (or ``paused: "false"``) resumes scaling at the next pass.

A paused *task type* (``taskscale types pause T``: the ``{ns}:paused``
hash, read by observe.lua) is the same hold when every type the scaler
serves is paused: no worker claims them, so their backlog asks for nothing,
and the replicas stay as they are (reason ``Paused``; scale them by hand to
free the pods).  With only some types paused, the sizing and queue-wait
rules leave the paused ones' waiting tasks and arrivals out (their running
tasks still count) and the others decide.
While paused, Redis is still observed (metrics and status stay current) but
the decision is this rule's: it is the first of the list and final (reason
code ``Paused``).  Annotations are metadata, not spec, so they do not move
``metadata.generation``; the config compares equal or not on them, which is
what makes the reconciler pick a change up.  The config reads them with
:func:`pause_from_annotations`; the :class:`Pause` it makes is in base.py,
with the facts that carry it.
"""

from __future__ import annotations

from collections.abc import Mapping

from taskscale.controller.rules.base import (
    PAUSED_ANNOTATION,
    PAUSED_REPLICAS_ANNOTATION,
    Facts,
    Pause,
    Step,
)
from taskscale.controller.types import ReasonCode

_TRUE = frozenset({"true", "yes", "1"})
_FALSE = frozenset({"false", "no", "0", ""})
MAX_PAUSED_REPLICAS = 100000


class InvalidPause(ValueError):
    """A pause annotation whose value can't be read (the message says which)."""


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


def all_types_paused(facts: Facts) -> bool:
    """Whether the observation says every type of the scaler is paused."""
    observation = facts.observation
    if observation is None or not facts.policy.types:
        return False
    types = observation.types
    for tp in facts.policy.types:  # runs on every pass: stop at the first unpaused type
        obs = types.get(tp.name)
        if obs is None or not obs.paused:
            return False
    return True


def apply(facts: Facts, step: Step) -> Step:
    """A paused scaler holds ``current``, or goes to the fixed count; so does
    a scaler whose every type is paused (holding ``current``); final."""
    pause = facts.pause
    if pause is None:
        if all_types_paused(facts):
            why = "every task type it serves is paused (taskscale types pause): holding"
            return Step(facts.current, ReasonCode.PAUSED, why, final=True)
        return step
    desired = facts.current if pause.replicas is None else pause.replicas
    return Step(desired, ReasonCode.PAUSED, pause.describe(), final=True)
