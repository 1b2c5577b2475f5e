"""Stop signals are acted on by a thread, so a handler never deadlocks the main thread."""

from __future__ import annotations

import os
import signal
import threading
import time

from taskscale.signals import on_stop_signals


def test_callback_runs_on_a_thread_while_the_main_thread_holds_its_lock() -> None:
    lock = threading.Lock()  # non-reentrant, like the one inside threading.Event
    seen: list[tuple[int, str, bool]] = []
    done = threading.Event()

    def callback(signum: int) -> None:
        # run inside the handler (main thread), this acquire could never succeed
        acquired = lock.acquire(timeout=3)
        seen.append((signum, threading.current_thread().name, acquired))
        if acquired:
            lock.release()
        done.set()

    previous = signal.getsignal(signal.SIGUSR1)
    try:
        on_stop_signals(callback, signals=(signal.SIGUSR1,))
        with lock:
            os.kill(os.getpid(), signal.SIGUSR1)
            for _ in range(50):  # bytecodes run here: a Python handler runs now
                time.sleep(0.01)
            assert not done.is_set()  # the callback waits for the lock we hold
        assert done.wait(5)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert seen == [(signal.SIGUSR1, "signals", True)]


def test_each_signal_reaches_the_callback_in_order() -> None:
    got: list[int] = []
    two = threading.Event()

    def callback(signum: int) -> None:
        got.append(signum)
        if len(got) == 2:
            two.set()

    previous = {s: signal.getsignal(s) for s in (signal.SIGUSR1, signal.SIGUSR2)}
    try:
        on_stop_signals(callback, signals=(signal.SIGUSR1, signal.SIGUSR2))
        os.kill(os.getpid(), signal.SIGUSR2)
        time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGUSR1)
        assert two.wait(5)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    assert got == [signal.SIGUSR2, signal.SIGUSR1]
