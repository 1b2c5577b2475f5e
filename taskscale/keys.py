"""Every Redis key name taskscale uses, in one place.

The worker runtime and the controller share one Redis schema; this module is
its only definition in code (docs/schema.md is its definition in prose). All
keys of a deployment start with ``{namespace}:`` -- the braces are a Redis
Cluster hash tag, so every key of a namespace lives in one slot and every Lua
script that touches several of them is legal on a cluster.

Nothing here talks to Redis: it is names only, so producers, workers, the
controller and tests all agree by construction.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from taskscale.history_keys import HistoryKeys
from taskscale.workflow_keys import WorkflowKeys

DEFAULT_NAMESPACE = "taskscale"
NAMESPACE_ENV = "TASKSCALE_NAMESPACE"

#: Priority levels: 0 is the most urgent, 9 the least; a claim takes the
#: lowest-numbered non-empty level first, FIFO within a level.
PRIORITY_LEVELS = 10
HIGHEST_PRIORITY = 0
LOWEST_PRIORITY = PRIORITY_LEVELS - 1
DEFAULT_PRIORITY = 5
PRIORITY_NAMES = {"high": 0, "normal": DEFAULT_PRIORITY, "low": LOWEST_PRIORITY}

#: Wake-up lists are trimmed to this many tokens; more would wake no one extra.
WAKE_TOKENS_CAP = 64
#: Dead letters kept per type by default (oldest dropped beyond; 0 = no cap).
DEFAULT_DEAD_LETTER_CAP = 10_000
#: Default envelope size limit (bytes of JSON), configurable per producer.
DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024

#: The longest namespace, task type or worker id (:func:`check_name`).
MAX_NAME_CHARS = 128
_NAME_RE = re.compile(rf"^[A-Za-z0-9_.\-]{{1,{MAX_NAME_CHARS}}}$")
_UNIQUE_RE = re.compile(r"^[A-Za-z0-9_.:\-]{1,200}$")
#: Schedule names are shorter than other names: an occurrence's task id is
#: ``schedule.<name>.<occurrence unix ms>`` and must stay within 128 characters.
_SCHEDULE_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,100}$")


def check_name(kind: str, value: str) -> str:
    """Return ``value`` if it is a legal namespace / task type / worker id.

    Names become parts of Redis keys and Prometheus label values, so they are
    restricted to a small, unambiguous alphabet (no ``:``, braces or spaces).
    """
    if not isinstance(value, str) or not _NAME_RE.match(value):
        raise ValueError(
            f"invalid {kind} {value!r}: use 1-{MAX_NAME_CHARS} characters from A-Z a-z 0-9 _ . -"
        )
    return value


def check_unique_key(value: str) -> str:
    """Return ``value`` if it is a legal unique key (the name alphabet plus ``:``, 1-200)."""
    if not isinstance(value, str) or not _UNIQUE_RE.match(value):
        raise ValueError(
            f"invalid unique key {value!r}: use 1-200 characters from A-Z a-z 0-9 _ . - :"
        )
    return value


def check_schedule_name(value: str) -> str:
    """Return ``value`` if it is a legal schedule name (the name alphabet, 1-100)."""
    if not isinstance(value, str) or not _SCHEDULE_RE.match(value):
        raise ValueError(
            f"invalid schedule name {value!r}: use 1-100 characters from A-Z a-z 0-9 _ . -"
        )
    return value


def parse_priority(value: int | str) -> int:
    """Accept 0-9 or one of ``high``/``normal``/``low``; raise ValueError otherwise."""
    if isinstance(value, str):
        if value.lower() in PRIORITY_NAMES:
            return PRIORITY_NAMES[value.lower()]
        try:
            value = int(value)
        except ValueError:
            raise ValueError(
                f"invalid priority {value!r}: use 0-9 (0 = most urgent) or high/normal/low"
            ) from None
    if (
        isinstance(value, bool)
        or not isinstance(value, int)  # 1.5 or None: refused here, not by the script
        or not HIGHEST_PRIORITY <= value <= LOWEST_PRIORITY
    ):
        raise ValueError(f"invalid priority {value!r}: use 0-9 (0 = most urgent)")
    return value


#: Every key of a namespace (and its demand channel) after the ``{ns}:``
#: prefix, by the :class:`Keys` member that names it: fixed text, and the
#: ``<parts>`` a caller fills in.  Keys builds every name from this table, and
#: tests/scripts/test_lua_keys.py checks that every Lua script builds only
#: these shapes (docs/schema.md, "Keys", describes each).
KEY_SHAPES: dict[str, str] = {
    # per-deployment hashes, sets and lists
    "active": "ACTIVE_TASKS",
    "idle_since": "IDLE_SINCE",
    "queued": "QUEUED",
    "types": "types",
    "workers": "workers",
    "demand_channel": "demand",
    "scheduler_wake": "wake:scheduler",
    "schedulers": "schedulers",
    "schedules": "schedules",
    "schedule": "schedule:<name>",
    "limits": "limits",
    "paused": "paused",
    "draining": "draining",
    "tracked_processes": "track:processes",
    "tracked_pods": "track:pods",
    # per task type
    "queue": "q:<type>:<priority>",
    "delayed": "delayed:<type>",
    "dead": "dead:<type>",
    "stats": "stats:<type>",
    "wake": "wake:<type>",
    "rate_bucket": "bucket:<type>",
    "unique": "unique:<key>",
    "history": "history:<type>:<bucket>",
    "history_sampled": "history:sampled",
    "recent": "recent:<type>",
    # scaling decisions (written by the controller, read by the dashboard)
    "scalers": "scalers",
    "scaler": "scaler:<scaler>",
    "decisions": "decisions:<scaler>",
    # per worker, task or tracked process
    "worker": "worker:<worker>",
    "catalog": "catalog:<worker>",
    "cancel": "cancel:<id>",
    "inflight": "inflight:<worker>",
    "tracked_inflight": "track:inflight:<process>",
    # RPC and fan-out
    "reply": "reply:<id>",
    "fanout": "fanout:<fanout>",
    "fanout_pending": "fanout:<fanout>:pending",
    "fanout_done": "fanout:<fanout>:done",
    "fanout_results": "fanout:<fanout>:results",
    "fanouts_open": "fanouts:open",
    # workflows (taskscale.workflows; docs/schema.md, "Workflows")
    "workflows": "workflows",
    "workflow_totals": "workflows:totals",
    "workflow": "wf:<workflow>",
    "workflow_steps": "wf:<workflow>:steps",
    "workflow_state": "wf:<workflow>:state",
    "workflow_results": "wf:<workflow>:results",
    "workflow_done": "wf:<workflow>:done",
    "workflow_held": "wf:<workflow>:held:<gate>",
}

#: KEY_SHAPES as %-templates ("q:%s:%s"), their parts in the shape's order:
#: a key is built per type in loops over thousands of types (status, the
#: console), where str.format's keyword parsing cost 2.5x an f-string.
_FORMATS = {
    member: re.sub(r"<\w+>", "%s", shape.replace("%", "%%")) for member, shape in KEY_SHAPES.items()
}


def namespace_from_env() -> str:
    """``TASKSCALE_NAMESPACE`` (one namespace, or a comma-separated list for
    a sharded deployment: docs/redis.md), else :data:`DEFAULT_NAMESPACE`; an
    empty value counts as unset.  The one reader of the variable: the
    library's default namespace and the ``--namespace`` flag's both come
    from here."""
    return os.environ.get(NAMESPACE_ENV) or DEFAULT_NAMESPACE


@dataclass(frozen=True)
class Keys(WorkflowKeys, HistoryKeys):
    """Key names for one namespace.  ``Keys("taskscale").active`` is
    ``{taskscale}:ACTIVE_TASKS``."""

    namespace: str = DEFAULT_NAMESPACE
    #: ``{namespace}:``, the hash tag every key of the namespace starts with.
    prefix: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_name("namespace", self.namespace)
        object.__setattr__(self, "prefix", "{" + self.namespace + "}:")

    @classmethod
    def from_env(cls, namespace: str | None = None) -> Keys:
        return cls(namespace or namespace_from_env())

    @classmethod
    def or_env(cls, keys: Keys | None) -> Keys:
        """``keys``, or the environment's namespace when None (the ``keys=``
        argument of every public function); TypeError for anything else."""
        if keys is None:
            return cls.from_env()
        if not isinstance(keys, Keys):
            hint = f" (Keys({keys!r}) for a namespace)" if isinstance(keys, str) else ""
            raise TypeError(f"keys must be a taskscale.keys.Keys{hint}, not {type(keys).__name__}")
        return keys

    def _key(self, member: str, *parts: object) -> str:
        """The name of KEY_SHAPES[member] in this namespace, its parts filled in
        in the order the shape names them."""
        return self.prefix + _FORMATS[member] % parts

    # --- per-deployment hashes and sets ------------------------------------
    @property
    def active(self) -> str:
        """HASH type -> number of tasks of that type running now."""
        return self._key("active")

    @property
    def idle_since(self) -> str:
        """HASH type -> unix seconds (decimal, ms precision) the last task finished."""
        return self._key("idle_since")

    @property
    def queued(self) -> str:
        """HASH type -> tasks in its ready lists (q:T:0..9), kept by the scripts
        that push or pop them (docs/schema.md, "The ready count")."""
        return self._key("queued")

    @property
    def types(self) -> str:
        """SET of every task type ever enqueued (the scheduler and status read it)."""
        return self._key("types")

    @property
    def workers(self) -> str:
        """ZSET worker id -> lease expiry (unix ms, Redis clock); the reaper takes expired ones."""
        return self._key("workers")

    @property
    def demand_channel(self) -> str:
        """Pub/sub channel: the type name is published when its ready queue
        goes from empty to non-empty (the controller's scale-from-zero wake)."""
        return self._key("demand_channel")

    @property
    def scheduler_wake(self) -> str:
        """LIST of tokens that wake sleeping schedulers when an earlier task is scheduled."""
        return self._key("scheduler_wake")

    @property
    def schedulers(self) -> str:
        """ZSET scheduler id -> lease expiry (unix ms, Redis clock) of live schedulers."""
        return self._key("schedulers")

    @property
    def schedules(self) -> str:
        """ZSET schedule name -> unix ms its next occurrence is due (+inf while
        paused or broken): a scheduler materializes the following one when due."""
        return self._key("schedules")

    def schedule(self, name: str) -> str:
        """HASH definition and state of a periodic schedule (see docs/schema.md)."""
        return self._key("schedule", name)

    @property
    def limits(self) -> str:
        """HASH type -> JSON flow-control limits of that type (rate, concurrency)."""
        return self._key("limits")

    @property
    def paused(self) -> str:
        """HASH type -> unix ms it was paused since: workers claim none of it
        (``taskscale types pause``); the controller does not scale up for it."""
        return self._key("paused")

    @property
    def draining(self) -> str:
        """HASH pod -> unix ms (Redis clock) its drain was seen since: the
        controller sets a field while the pod's node is cordoned or tainted for
        removal; the pod's workers claim nothing (claim.lua) until it is gone."""
        return self._key("draining")

    @property
    def tracked_processes(self) -> str:
        """ZSET process id -> lease expiry (unix ms, Redis clock) of the processes
        that report tasks through taskscale.tracking (Celery, RQ, any code)."""
        return self._key("tracked_processes")

    @property
    def tracked_pods(self) -> str:
        """HASH process id -> the pod (``POD_NAME``, else host name) a tracked
        process runs in, so the controller can tell which pods are busy."""
        return self._key("tracked_pods")

    # --- per task type ------------------------------------------------------
    def queue(self, task_type: str, priority: int = DEFAULT_PRIORITY) -> str:
        """LIST of envelopes ready to run: RPUSH to enqueue, LPOP to claim."""
        return self._key("queue", task_type, priority)

    def queues(self, task_type: str) -> list[str]:
        """The ready lists of a type, most urgent first."""
        return [self.queue(task_type, p) for p in range(PRIORITY_LEVELS)]

    def delayed(self, task_type: str) -> str:
        """ZSET envelope -> due time (unix ms)."""
        return self._key("delayed", task_type)

    def dead(self, task_type: str) -> str:
        """LIST of dead-letter records (JSON: envelope, error, failed_ms)."""
        return self._key("dead", task_type)

    def stats(self, task_type: str) -> str:
        """HASH of monotonically increasing counters of a type."""
        return self._key("stats", task_type)

    def wake(self, task_type: str) -> str:
        """LIST of wake-up tokens idle workers BLPOP on (capped length)."""
        return self._key("wake", task_type)

    def rate_bucket(self, task_type: str) -> str:
        """HASH token-bucket state of a rate-limited type (tokens, ms); expires when full."""
        return self._key("rate_bucket", task_type)

    def unique(self, unique_key: str) -> str:
        """STRING task id holding a unique key (no TTL while the task is live)."""
        return self._key("unique", unique_key)

    # --- scaling decisions (written by the controller, read by the dashboard) ---
    @property
    def scalers(self) -> str:
        """ZSET scaler key ("namespace/name") -> unix ms of its last reported pass."""
        return self._key("scalers")

    def scaler(self, scaler_key: str) -> str:
        """STRING JSON: the last pass of a scaler (current, desired, sentence...)."""
        return self._key("scaler", scaler_key)

    def decisions(self, scaler_key: str) -> str:
        """LIST of JSON decisions of a scaler, newest first, capped."""
        return self._key("decisions", scaler_key)

    # --- per worker ---------------------------------------------------------
    def worker(self, worker_id: str) -> str:
        """HASH registry record of a worker, with a TTL refreshed by its heartbeat."""
        return self._key("worker", worker_id)

    def catalog(self, worker_id: str) -> str:
        """HASH ``digest``, ``doc`` (JSON): the task catalog worker W serves, TTL = lease."""
        return self._key("catalog", worker_id)

    def cancel(self, task_id: str) -> str:
        """STRING set (with a TTL) by taskscale.cancel: "1" while a running task is
        asked to stop, "removed:T" for a queued or delayed one it removed (read by
        task lookups, which then answer "cancelled")."""
        return self._key("cancel", task_id)

    def inflight(self, worker_id: str) -> str:
        """HASH task id -> envelope of the tasks a worker has claimed and not finished."""
        return self._key("inflight", worker_id)

    def tracked_inflight(self, process_id: str) -> str:
        """HASH task id -> type of the tasks a tracked process runs now (its lease)."""
        return self._key("tracked_inflight", process_id)

    # --- RPC and fan-out ----------------------------------------------------
    def reply(self, task_id: str) -> str:
        """LIST the worker pushes an RPC task's JSON result or error to (with a TTL)."""
        return self._key("reply", task_id)

    def fanout(self, fanout_id: str) -> str:
        """HASH state of a fan-out request (total, limit, running, succeeded, failed)."""
        return self._key("fanout", fanout_id)

    def fanout_pending(self, fanout_id: str) -> str:
        """LIST of a fan-out request's sub-task envelopes not yet released to the queue."""
        return self._key("fanout_pending", fanout_id)

    def fanout_done(self, fanout_id: str) -> str:
        """LIST the completion notice of a fan-out request is pushed to (with a TTL)."""
        return self._key("fanout_done", fanout_id)

    def fanout_results(self, fanout_id: str) -> str:
        """HASH sub-task position -> its JSON result or error (fan-outs that collect)."""
        return self._key("fanout_results", fanout_id)

    @property
    def fanouts_open(self) -> str:
        """ZSET streamed fan-out id -> unix ms its open state expires, while open
        (not yet closed): what ``taskscale status`` counts."""
        return self._key("fanouts_open")


# --- keys of other task queues, read (never written) by the controller's sources ---
# Celery and RQ name their keys themselves; these functions are the only place
# taskscale spells them (docs/schema.md, "Keys of other queues").

#: kombu's Redis transport: a message of priority step s > 0 goes to the list
#: ``<queue>`` + this separator + ``s`` (step 0 to the list ``<queue>`` itself).
CELERY_PRIORITY_SEPARATOR = "\x06\x16"
#: Every step a kombu priority list can have: kombu clamps a message's priority
#: to 0-9 and maps it to one of ``priority_steps`` (default 0, 3, 6, 9).
CELERY_PRIORITY_STEPS = tuple(range(1, 10))
#: kombu's hash of delivered, not yet acknowledged messages (delivery tag ->
#: JSON ``[message, exchange, routing key]``); its ``unacked_key`` option.
CELERY_UNACKED = "unacked"
#: RQ's key prefix (its ``RQ_KEY_PREFIX``).
RQ_PREFIX = "rq"


def celery_queue_lists(queue: str) -> list[str]:
    """The lists kombu's Redis transport keeps one Celery queue in, step 0 first."""
    return [queue, *(f"{queue}{CELERY_PRIORITY_SEPARATOR}{s}" for s in CELERY_PRIORITY_STEPS)]


def rq_queue(name: str) -> str:
    """LIST of the job ids waiting in RQ queue ``name``."""
    return f"{RQ_PREFIX}:queue:{name}"


def rq_started(name: str) -> str:
    """ZSET of RQ queue ``name``'s running jobs (StartedJobRegistry), score = expiry (unix s)."""
    return f"{RQ_PREFIX}:wip:{name}"


def rq_scheduled(name: str) -> str:
    """ZSET of RQ queue ``name``'s scheduled jobs (ScheduledJobRegistry), score = due (unix s)."""
    return f"{RQ_PREFIX}:scheduled:{name}"


#: Counter fields of ``Keys.stats(type)``; all integers, never reset.
STAT_FIELDS = (
    "enqueued",  # tasks made ready or delayed by an enqueue
    "claimed",  # tasks handed to a worker
    "completed",  # tasks that returned normally
    "failed",  # task runs that raised (each attempt counts)
    "retried",  # failed runs re-scheduled through the delayed set
    "dead",  # tasks moved to the dead-letter list
    "requeued",  # in-flight tasks returned to their queue (shutdown or reaper)
    "service_ms",  # total run time of completed and failed runs, ms
    "wait_ms",  # total queue wait (enqueue or due time -> claim), Redis clock, ms
    "active_underflow",  # decrements of ACTIVE_TASKS that would have gone below 0 (should stay 0)
    "dead_dropped",  # oldest dead letters dropped by the dead-letter cap
    "queued_repaired",  # recounts that found QUEUED[T] off its lists' length and fixed it
    "dead_requeued",  # dead letters an operator requeued (admin)
    "dead_purged",  # dead letters an operator deleted (admin)
    "purged",  # ready or delayed tasks an operator deleted (admin)
    "cancelled",  # queued or delayed tasks removed by taskscale.cancel
    "withdrawn",  # a schedule's pending occurrence withdrawn by pause, remove or a new definition
    "unique_hits",  # enqueues skipped because their unique key was held (the holder's id returned)
)
