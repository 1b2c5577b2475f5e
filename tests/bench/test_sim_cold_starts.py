"""The simulation's cold-start measure (bench/sim_world.py): from work at zero
pods to the first task running, as docs/from-keda.md and docs/benchmarks.md
report it."""

from __future__ import annotations

import pytest

from bench.sim_trace import Arrival, Trace, TraceSettings
from bench.sim_world import World, WorldSettings

STEPS_PER_S = 10  # WorldSettings.step_s = 0.1


def play(arrivals: tuple[Arrival, ...], scale_at: dict[float, int], until_s: float) -> World:
    """Run a world of pods that start in exactly 5 s, scaled at the given times."""
    trace = Trace(
        seed=0, arrivals=arrivals, segments=(), settings=TraceSettings(duration_s=until_s)
    )
    world = World(trace, WorldSettings(startup_s=(5.0, 5.0)), seed=0)
    for i in range(round(until_s * STEPS_PER_S) + 1):
        t = i / STEPS_PER_S
        world.advance(t)
        if t in scale_at:
            world.scale_to(scale_at[t], t, idle_first=True)
    return world


def test_a_cold_start_lasts_from_the_task_ready_at_zero_pods_to_its_claim() -> None:
    arrivals = (Arrival(10.0, 10.0, 1.0), Arrival(11.0, 11.0, 1.0))
    world = play(arrivals, {20.0: 1}, until_s=60.0)
    # one episode for both tasks: ready at 10, pod asked for at 20, claiming at 25
    assert world.cold_starts == [pytest.approx(15.0)]
    assert world.waits == [pytest.approx(15.0), pytest.approx(14.0)]


def test_no_cold_start_when_a_pod_is_up_and_a_new_one_after_the_last_pod_goes() -> None:
    arrivals = (Arrival(30.0, 30.0, 100.0),)
    world = play(arrivals, {0.0: 1, 40.0: 0, 50.0: 1}, until_s=80.0)
    # claimed at 30 by the running pod (no cold start); interrupted at 40 with
    # the last pod; it counts from then, not from its ready time: 55 - 40
    assert world.interrupted == 1
    assert world.cold_starts == [pytest.approx(15.0)]
