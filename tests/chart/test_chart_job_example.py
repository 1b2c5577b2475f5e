"""The chart's Job-mode example (examples.jobMode): off by default; when on, a
TaskScaler with a jobTemplate the controller accepts, whose pods run
``taskscale worker --once`` of the example worker's image, restricted like it."""

from __future__ import annotations

from support.chart import CHART, by_kind, one, render
from taskscale.controller.config import config_from_object

EXAMPLES = CHART / "ci/examples-values.yaml"


def test_the_job_mode_example_is_off_by_default() -> None:
    scalers = by_kind(render(values_files=[EXAMPLES]), "TaskScaler")
    assert all("jobTemplate" not in s["spec"] for s in scalers)


def test_the_job_mode_example_is_a_valid_job_scaler_of_once_workers() -> None:
    objects = render(
        values_files=[EXAMPLES],
        set_values={"examples.jobMode.enabled": "true", "examples.jobMode.maxReplicas": "7"},
    )
    scaler = one(objects, "TaskScaler", "ts-taskscale-example-worker-jobs")
    config = config_from_object(scaler)
    assert config.jobs is not None and config.policy.max_replicas == 7
    assert [t.name for t in config.policy.types] == ["echo"]
    pod = scaler["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    worker = pod["containers"][0]
    assert worker["args"][:2] == ["--once", "--once-wait=60"]
    assert "--types=echo" in worker["args"]
    deployment = one(objects, "Deployment", "ts-taskscale-example-worker")
    assert worker["image"] == deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert worker["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True
