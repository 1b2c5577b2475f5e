"""Stop signals acted on by a thread, never inside the signal handler.

A Python signal handler runs in the main thread between two bytecodes --
possibly while that thread holds a ``threading`` lock, e.g. inside
``Event.wait`` or ``Event.clear``.  A handler that then takes the same
(non-reentrant) lock, as ``Event.set`` does, deadlocks the process: a rare
hang on SIGTERM that only a kill ends.

So the handler here only writes the signal's number to a pipe (a system
call, no lock), and a daemon thread reads the pipe and calls the callback,
where taking locks, logging and talking to Redis are all safe.

Once the process is exiting (its stop is done), a stop signal has nothing
left to stop: it is ignored from then on.  Python's own teardown would
otherwise restore the default action, and a second SIGTERM arriving in the
~0.1 s the interpreter takes to unload would kill a worker that had finished
its stop cleanly with 143 instead of 0 (docs/operating.md: "a second SIGTERM
skips the wait").
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterable
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def on_stop_signals(
    callback: Callable[[int], None], *, signals: Iterable[int] = STOP_SIGNALS
) -> None:
    """Call ``callback(signum)`` on a thread for each of ``signals`` received.

    Must be called from the main thread (as ``signal.signal`` must).  A later
    call replaces the handlers; its thread serves only its own signals.
    """
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)

    def handler(signum: int, frame: FrameType | None) -> None:
        # a full pipe (64 KiB of unread signals) drops this one: the callback
        # has a backlog of the same stop requests to work through anyway
        with contextlib.suppress(BlockingIOError):
            os.write(write_fd, bytes([signum]))

    def dispatch() -> None:
        while True:
            data = os.read(read_fd, 64)
            if not data:
                return
            for signum in data:
                callback(signum)

    wanted = tuple(signals)
    threading.Thread(target=dispatch, name="signals", daemon=True).start()
    for signum in wanted:
        signal.signal(signum, handler)
    atexit.register(ignore_signals, wanted)


def ignore_signals(signals: Iterable[int] = STOP_SIGNALS) -> None:
    """Ignore ``signals`` from now on (the process is exiting: its stop is
    done).  Run at exit, before the interpreter restores their default
    action, which is death by the signal."""
    for signum in signals:
        signal.signal(signum, signal.SIG_IGN)
