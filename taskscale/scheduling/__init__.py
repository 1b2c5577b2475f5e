"""The scheduling wing: the scheduler process (promotion of due delayed
tasks, the reaper, periodic schedules) and the schedules API it serves.

``taskscale.schedule`` and ``Schedules`` are re-exported by :mod:`taskscale`;
the scheduler itself is started by ``taskscale scheduler``.
"""
