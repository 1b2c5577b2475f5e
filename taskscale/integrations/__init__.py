"""Keep taskscale's two hashes from workers that are not ours.

``ACTIVE_TASKS`` (tasks running now, per type) and ``IDLE_SINCE`` (when the
last one finished, Redis clock) are a protocol any worker can keep; the
controller scales on them.  These modules keep them from other task queues'
own hooks, through :mod:`taskscale.tracking` (its scripts, its lease):

- :mod:`taskscale.integrations.celery` -- ``install(app, redis_url=...)``
  connects to Celery's task signals;
- :mod:`taskscale.integrations.rq` -- ``rq worker -w
  taskscale.integrations.rq.TrackingWorker``.

Neither Celery nor RQ is a dependency of taskscale: each module imports its
queue only when called (extras ``taskscale[celery]``, ``taskscale[rq]``).
docs/integrations.md is the user's guide.
"""
