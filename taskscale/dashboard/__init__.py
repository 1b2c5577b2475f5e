"""The operator console: ``taskscale dashboard`` (extra ``taskscale[dashboard]``).

A web console over the same Redis readers as ``taskscale status`` and the
admin commands: live overview, workers, a page per task type with its
catalog entry and a generated form, dead letters, delayed tasks, fan-outs,
and the scaling timeline the controller records.  Worker images never need
it: nothing in the runtime imports this package, and only
:mod:`taskscale.dashboard.server`'s ``run`` imports Starlette and uvicorn.
"""
