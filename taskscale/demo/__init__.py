"""``taskscale demo``: a local Redis, the controller's reconcile loop and
local worker processes under a bursty load, with a console table and a plot.

Behind the ``demo`` extra (matplotlib); it uses the controller's reconcile
loop and local pool, never the Kubernetes client.
"""
