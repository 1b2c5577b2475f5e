"""observe.lua's arguments for a set of scalers' requests, laid out once.

Why apart from the observer: the layout (types deduplicated across scalers,
key templates derived from taskscale.keys, look-ahead windows, which types'
oldest ready task is read on every pass) is computed once per set of
requests and cached; the observer only appends the per-pass part and reads
the reply.  Per-type key names are built inside the script from (before,
after) templates: passing ~12 names per type as KEYS cost more than the
reads.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from taskscale.controller.source_spec import TypeSource
from taskscale.keys import DEFAULT_PRIORITY, PRIORITY_LEVELS, Keys, check_name

#: Stats counters read per type, in the order of TypeObservation's *_total fields.
STAT_FIELDS: tuple[str, ...] = (
    "enqueued",
    "claimed",
    "completed",
    "failed",
    "service_ms",
    "wait_ms",
    "dead",
    "cancelled",
    "unique_hits",
    "dead_dropped",
)

#: The counters the policy reads on every pass (the sizing rule's arrival rate
#: and service time: claimed, completed, failed, service_ms), a slice of
#: STAT_FIELDS; the others (metrics only) are read with the sampled
#: oldest-ready ages, every ``Observer.ages_every_s``.
EVERY_PASS_STATS = slice(1, 5)


@dataclass(frozen=True)
class ObserveRequest:
    """What one scaler wants read: its task types and its warm-up lead."""

    types: tuple[str, ...]
    #: Delayed tasks due within this many seconds after now are "upcoming".
    lead_s: float
    #: Types read from another source (Celery, RQ, lists; see sources.py);
    #: only :class:`SourcedObserver` reads them, :class:`Observer` ignores them.
    sources: tuple[TypeSource, ...] = ()
    #: Types whose oldest ready task is read on every pass (decoding the head
    #: of each of their ready lists): those with a queue-wait target.  None:
    #: all of ``types``.  The others' is read every ``Observer.ages_every_s``.
    ages: tuple[str, ...] | None = None

    def narrowed(self, types: tuple[str, ...]) -> ObserveRequest:
        """This request for ``types`` only (a subset), without sources: what the
        native observer of one namespace is asked."""
        ages = None if self.ages is None else tuple(t for t in self.ages if t in types)
        return ObserveRequest(types=types, lead_s=self.lead_s, ages=ages)


@dataclass(frozen=True)
class Plan:
    """The script's arguments for one set of requests (cached between polls)."""

    types: tuple[str, ...]
    keys: tuple[str, ...]
    args: tuple[str | int, ...]
    #: (type, lead ms) of each look-ahead window, in the script's order.
    windows: tuple[tuple[str, int], ...]
    #: 0-based index in ``types`` of each window's type.
    window_types: tuple[int, ...]
    #: 1-based indexes of the types whose oldest ready task every pass reads,
    #: as the script takes them (one argument, separated by spaces).
    every_pass_ages: str
    #: The same for every type (a full pass).
    all_ages: str
    #: Request name -> the index in ``windows`` of each of its types (in the
    #: request's order): a scaler's observation is picked, not looked up.
    request_windows: Mapping[str, tuple[int, ...]]
    #: Type -> the names of the requests that name it (each once): which
    #: scalers a worker serves, from its types alone.
    type_requests: Mapping[str, tuple[str, ...]]


def build_plan(keys: Keys, requests: Mapping[str, ObserveRequest]) -> Plan:
    """Deduplicate types across requests and lay out observe.lua's KEYS and ARGV
    (all but the per-pass tail: the types whose oldest ready task is read and
    the stats fields read)."""
    types = tuple(dict.fromkeys(t for r in requests.values() for t in r.types))
    for t in types:
        check_name("task type", t)  # it becomes part of key names inside the script
    index = {t: i + 1 for i, t in enumerate(types)}
    windows = tuple(dict.fromkeys((t, lead_ms(r)) for r in requests.values() for t in r.types))
    lists = [_template(functools.partial(keys.queue, priority=p)) for p in _levels_common_first()]
    args: list[str | int] = [
        keys.worker(""),
        *_template(keys.delayed),
        *_template(keys.stats),
        len(lists),
        *(part for pair in lists for part in pair),
        " ".join(types),
        " ".join(f"{index[t]} {ms}" for t, ms in windows),
    ]
    aged = dict.fromkeys(
        t for r in requests.values() for t in (r.types if r.ages is None else r.ages)
    )
    every_pass = " ".join(str(index[t]) for t in aged if t in index)
    script_keys = (
        keys.active,
        keys.idle_since,
        keys.workers,
        keys.schedulers,
        keys.limits,
        keys.queued,
        keys.paused,
    )
    window_types = tuple(index[t] - 1 for t, _ in windows)
    all_ages = " ".join(str(i) for i in range(1, len(types) + 1))
    window_index = {w: j for j, w in enumerate(windows)}
    request_windows = {
        name: tuple(window_index[(t, lead_ms(r))] for t in r.types) for name, r in requests.items()
    }
    naming: dict[str, dict[str, None]] = {}
    for name, r in requests.items():
        for t in r.types:
            naming.setdefault(t, {})[name] = None
    type_requests = {t: tuple(names) for t, names in naming.items()}
    return Plan(
        types,
        script_keys,
        tuple(args),
        windows,
        window_types,
        every_pass,
        all_ages,
        request_windows,
        type_requests,
    )


def lead_ms(request: ObserveRequest) -> int:
    """The request's warm-up lead in whole ms (never below 0)."""
    return max(0, round(request.lead_s * 1000))


#: Stands for the type name while a key template is derived from Keys.
_MARK = "\x00"


def _template(key_of_type: Callable[[str], str]) -> tuple[str, str]:
    """(before, after) around the type name in a per-type key, derived from
    taskscale.keys so the script never spells a key name itself."""
    before, after = key_of_type(_MARK).split(_MARK)
    return before, after


def _levels_common_first() -> list[int]:
    """Priority levels, the default first: the oldest-ready read goes through
    the lists in this order, and most tasks use the default."""
    return [DEFAULT_PRIORITY, *(p for p in range(PRIORITY_LEVELS) if p != DEFAULT_PRIORITY)]
