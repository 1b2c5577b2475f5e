"""``taskscale demo``: a local Redis, the controller's reconcile loop and
local worker processes under a bursty load, with a console table and a plot.

Its plot needs no extra (an SVG written by hand; the console it serves is
the ``dashboard`` extra's); it uses the controller's reconcile loop and
local pool, never the Kubernetes client.
"""
