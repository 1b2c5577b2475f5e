"""No replica flap (a scale-down undone inside the scale-down window, the load
unchanged) on the demo's load and on the benchmark traces (bench/sim_flaps.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bench.sim_flaps import Flap, demo_trace, flaps, load_changes
from bench.sim_scalers import TaskscaleScaler
from bench.sim_trace import Arrival, Segment, Trace, TraceSettings, make_trace
from bench.sim_world import TASK_TYPE, WorldSettings
from bench.simulate import TASKSCALE_POLICY, THREADS, run
from taskscale.controller.types import TypePolicy
from taskscale.demo.load import DemoSettings

SEEDS = range(9)  # bench.simulate's default seeds


def test_a_scale_down_undone_within_the_window_is_a_flap_unless_the_load_rose() -> None:
    changes = [
        (10.0, 4, 2),
        (12.0, 2, 3),
        (100.0, 3, 1),
        (200.0, 1, 2),
        (300.0, 2, 0),
        (301.0, 0, 1),
    ]
    found = flaps(changes, window_s=60.0, load_changes=[], lead_s=5.0)
    assert found == [Flap(10.0, (4, 2), 12.0, (2, 3))]  # 200 is past the window; 0 is idle
    assert flaps(changes, window_s=60.0, load_changes=[15.0], lead_s=5.0) == []  # a rise
    assert flaps(changes, window_s=1.0, load_changes=[], lead_s=5.0) == []


def test_only_a_rise_of_the_load_is_a_load_change() -> None:
    segments = (
        Segment(0, 10, "burst", 9.0),
        Segment(10, 20, "lull", 0.0),
        Segment(20, 30, "x", 1.0),
    )
    trace = Trace(0, (Arrival(0.0, 25.0, 1.0),), segments, TraceSettings(duration_s=30.0))
    assert load_changes(trace) == [20.0, 25.0]


def test_the_demo_trace_is_the_demos_load() -> None:
    settings = DemoSettings()
    trace = demo_trace(settings)
    spike = [a for a in trace.arrivals if a.delayed]
    assert len(spike) == 2 * settings.max_replicas * settings.threads
    assert len(trace.arrivals) > len(spike) + 100  # two bursts of clumps
    assert all(settings.task_min_s <= a.service_s <= settings.task_max_s for a in trace.arrivals)
    assert [s.kind for s in trace.segments] == ["gap", "burst", "gap", "burst", "gap"]


def test_no_flap_on_the_demos_load() -> None:
    settings = DemoSettings()
    policy = replace(
        settings.policy(),
        types=(TypePolicy(TASK_TYPE, idle_threshold_s=settings.idle_threshold_s),),
    )
    trace = demo_trace(settings)
    world = WorldSettings(threads_per_pod=settings.threads, startup_s=(2.0, 5.0), tail_s=0.0)
    scaler = TaskscaleScaler(policy, poll_s=settings.poll_interval_s)
    result, _ = run(trace, scaler, world)
    assert result.pod_starts >= 6 and len(scaler.changes) >= 6  # it did scale
    window = policy.scale_down_stabilization_s
    assert (
        flaps(
            scaler.changes,
            window_s=window,
            load_changes=load_changes(trace),
            lead_s=policy.warmup_lead_s,
        )
        == []
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_no_flap_on_the_benchmark_traces(seed: int) -> None:
    trace = make_trace(seed)
    scaler = TaskscaleScaler(TASKSCALE_POLICY)
    run(trace, scaler, WorldSettings(threads_per_pod=THREADS))
    policy = TASKSCALE_POLICY
    found = flaps(
        scaler.changes,
        window_s=policy.scale_down_stabilization_s,
        load_changes=load_changes(trace),
        lead_s=policy.warmup_lead_s,
    )
    assert found == []
