"""The chart's worker rollout settings (rendered with the real helm): ``--grace``
and ``terminationGracePeriodSeconds`` come from one value, the longest task,
and a rollout surges instead of taking capacity away (docs/operating.md,
"Rollouts that do not cut tasks")."""

from __future__ import annotations

from typing import Any

import pytest

from support.chart import CHART, KUBE_VERSION, helm, one, render

WORKER = "ts-taskscale-example-worker"


def worker(**values: str) -> dict[str, Any]:
    settings = {"examples.enabled": "true", "examples.redis.enabled": "true", **values}
    return one(render(set_values=settings), "Deployment", WORKER)


def grace_of(deployment: dict[str, Any]) -> tuple[str, int]:
    pod = deployment["spec"]["template"]["spec"]
    grace = [a for a in pod["containers"][0]["args"] if a.startswith("--grace=")]
    assert len(grace) == 1, grace
    return grace[0], pod["terminationGracePeriodSeconds"]


def test_grace_and_the_pods_grace_period_come_from_the_longest_task() -> None:
    assert grace_of(worker()) == ("--grace=20", 30)  # the defaults: 20 s + a 10 s margin
    hour = worker(**{"examples.worker.longestTaskSeconds": "3600"})
    assert grace_of(hour) == ("--grace=3600", 3610)
    margin = {
        "examples.worker.longestTaskSeconds": "90",
        "examples.worker.terminationMarginSeconds": "5",
    }
    assert grace_of(worker(**margin)) == ("--grace=90", 95)


def test_a_rollout_surges_and_never_takes_a_pod_away_first() -> None:
    strategy = worker()["spec"]["strategy"]
    assert strategy == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    wider = worker(**{"examples.worker.rolloutSurge": "3"})["spec"]["strategy"]
    assert wider["rollingUpdate"] == {"maxSurge": 3, "maxUnavailable": 0}


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("examples.worker.rolloutSurge", "0"),  # a surge of 0 with 0 unavailable: no rollout at all
        ("examples.worker.longestTaskSeconds", "-1"),
        ("examples.worker.longestTaskSeconds", "an hour"),
        ("examples.worker.terminationMarginSeconds", "0"),
        ("examples.worker.graceSeconds", "20"),  # the old key: one value now, not two
    ],
)
def test_the_schema_refuses_a_malformed_value(key: str, value: str) -> None:
    result = helm(
        "template",
        "ts",
        CHART,
        "--kube-version",
        KUBE_VERSION,
        "--set",
        f"{key}={value}",
        check=False,
    )
    assert result.returncode != 0, f"{key}={value} was accepted"
    assert "values don't meet the specifications of the schema" in result.stderr
