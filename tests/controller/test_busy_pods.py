"""One definition of a busy pod (types.busy_by_pod): the pods the rules count
busy (rules.base.busy_pods) are those the actuator's deletion costs protect,
and no other module of the controller counts a worker's tasks itself."""

from __future__ import annotations

import ast
from pathlib import Path

from rulefacts import observation

import taskscale.controller
from taskscale.controller.rules.base import busy_pods
from taskscale.controller.types import WorkerObservation, busy_by_pod

WORKERS = (
    WorkerObservation("w1", "pod-a", ("a",), threads=4, busy=2),
    WorkerObservation("w2", "pod-a", ("a",), threads=4, busy=0),  # pod-a busy all the same
    WorkerObservation("w3", "pod-b", ("a",), threads=4, busy=0),
    WorkerObservation("w4", "pod-b", ("a",), threads=4, busy=0),  # pod-b idle
    WorkerObservation("w5", "pod-c", ("a",), threads=4, busy=1),
    WorkerObservation("w6", "pod-c", ("a",), threads=4, busy=3),
)


def test_busy_pods_are_the_pods_with_a_positive_deletion_cost() -> None:
    costs = busy_by_pod(WORKERS)
    assert costs == {"pod-a": 2, "pod-b": 0, "pod-c": 4}
    assert busy_pods(observation(WORKERS)) == {"pod-a", "pod-c"}
    assert busy_pods(observation(WORKERS)) == {pod for pod, n in costs.items() if n > 0}
    assert busy_pods(observation()) == set()


def test_only_busy_by_pod_reads_a_workers_busy_count() -> None:
    readers = []
    for path in sorted(Path(taskscale.controller.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                reads = any(
                    isinstance(n, ast.Attribute) and n.attr == "busy" for n in ast.walk(node)
                )
                if reads:
                    readers.append(f"{path.name}:{node.name}")
    assert readers == ["types.py:busy_by_pod"]
