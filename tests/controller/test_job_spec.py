"""Job mode's spec: ``jobTemplate`` (exclusive with ``scaleTargetRef``) and the
history limits are read into a JobTarget, a malformed one is refused with a
sentence naming the field, and the Job body built from it carries the
scaler's label, POD_NAME from the Downward API, restartPolicy and TTL."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.controller import scaler_object
from taskscale.controller.config import InvalidSpec, config_from_object
from taskscale.controller.job_spec import (
    DEFAULT_TTL_S,
    SCALER_LABEL,
    JobTarget,
    job_body,
    scaler_label,
)

POD_NAME_ENV = {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}


def job_spec(**extra: Any) -> dict[str, Any]:
    container = {"name": "worker", "image": "w:1", "args": ["worker", "--once"]}
    return {"template": {"spec": {"containers": [container]}}, **extra}


def job_scaler(**spec: Any) -> dict[str, Any]:
    obj = scaler_object(jobTemplate={"spec": job_spec()}, **spec)
    del obj["spec"]["scaleTargetRef"]
    return obj


def test_a_job_template_makes_a_job_mode_config_with_default_limits() -> None:
    config = config_from_object(job_scaler(maxReplicas=3))
    assert config.jobs == JobTarget(spec=job_spec())
    assert (config.jobs.successful_history, config.jobs.failed_history) == (10, 10)
    assert config.target == "emails"  # the scaler's own name: its Jobs are named after it
    assert config.policy.max_replicas == 3


def test_the_history_limits_and_job_metadata_are_read() -> None:
    obj = job_scaler(successfulJobsHistoryLimit=0, failedJobsHistoryLimit=3)
    obj["spec"]["jobTemplate"]["metadata"] = {"labels": {"team": "a"}}
    jobs = config_from_object(obj).jobs
    assert jobs is not None
    assert (jobs.successful_history, jobs.failed_history) == (0, 3)
    assert jobs.metadata == {"labels": {"team": "a"}}


def test_a_deployment_scaler_has_no_job_target() -> None:
    assert config_from_object(scaler_object()).jobs is None


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"scaleTargetRef": {"name": "w"}}, "exactly one of scaleTargetRef and jobTemplate"),
        ({"jobTemplate": "worker"}, "jobTemplate must be an object"),
        ({"jobTemplate": {}}, "jobTemplate.spec is required"),
        ({"jobTemplate": {"spec": {"template": {}}}}, "at least one container"),
        ({"jobTemplate": {"spec": job_spec(parallelism=2)}}, "parallelism must be 1"),
        ({"jobTemplate": {"spec": job_spec(completions=5)}}, "completions must be 1"),
        (
            {"jobTemplate": {"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}},
            "needs a name",
        ),
        (
            {
                "jobTemplate": {
                    "spec": {
                        "template": {
                            "spec": {"restartPolicy": "Always", "containers": [{"name": "w"}]}
                        }
                    }
                }
            },
            "Never or OnFailure",
        ),
        (
            {"jobTemplate": {"spec": job_spec(), "metadata": {"name": "x"}}},
            "labels and annotations",
        ),
        ({"jobTemplate": {"spec": job_spec(), "metadata": {"labels": {"a": 1}}}}, "strings"),
        ({"successfulJobsHistoryLimit": -1}, "successfulJobsHistoryLimit must be a whole number"),
        ({"failedJobsHistoryLimit": "3"}, "failedJobsHistoryLimit must be a whole number"),
        ({"minReplicas": 1}, "minReplicas must be 0 with a jobTemplate"),
    ],
)
def test_a_malformed_job_spec_is_refused_naming_the_field(
    change: dict[str, Any], said: str
) -> None:
    obj = job_scaler()
    obj["spec"].update(change)
    with pytest.raises(InvalidSpec, match=said):
        config_from_object(obj)


def test_neither_target_is_refused() -> None:
    obj = scaler_object()
    del obj["spec"]["scaleTargetRef"]
    with pytest.raises(
        InvalidSpec, match=re.escape("scaleTargetRef.name (or a jobTemplate) is required")
    ):
        config_from_object(obj)


def test_the_job_body_labels_job_and_pod_and_injects_pod_name() -> None:
    target = JobTarget(spec=job_spec(), metadata={"labels": {"team": "a"}})
    body = job_body(target, scaler="emails", namespace="jobs")
    assert body["metadata"]["generateName"] == "emails-"
    assert body["metadata"]["namespace"] == "jobs"
    assert body["metadata"]["labels"] == {"team": "a", SCALER_LABEL: "emails"}
    pod = body["spec"]["template"]
    assert pod["metadata"]["labels"] == {SCALER_LABEL: "emails"}
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["spec"]["containers"][0]["env"] == [POD_NAME_ENV]
    assert body["spec"]["ttlSecondsAfterFinished"] == DEFAULT_TTL_S
    assert target.spec == job_spec()  # the template itself is left as it was
    assert "ownerReferences" not in body["metadata"]  # no uid known: none


def test_the_job_body_is_owned_by_its_task_scaler() -> None:
    body = job_body(JobTarget(spec=job_spec()), scaler="emails", namespace="jobs", owner_uid="u-1")
    assert body["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "taskscale.io/v1alpha1",
            "kind": "TaskScaler",
            "name": "emails",
            "uid": "u-1",
            "controller": True,
        }
    ]


def test_the_config_carries_the_task_scalers_uid() -> None:
    obj = job_scaler()
    obj["metadata"]["uid"] = "u-2"
    assert config_from_object(obj).uid == "u-2"


def test_the_job_body_keeps_what_the_template_sets() -> None:
    own = {"name": "POD_NAME", "value": "fixed"}
    spec = job_spec(ttlSecondsAfterFinished=30)
    spec["template"]["spec"]["restartPolicy"] = "OnFailure"
    spec["template"]["spec"]["containers"][0]["env"] = [own]
    spec["template"]["spec"]["containers"].append({"name": "sidecar", "image": "s:1"})
    body = job_body(JobTarget(spec=spec), scaler="emails", namespace="jobs")
    pod = body["spec"]["template"]["spec"]
    assert body["spec"]["ttlSecondsAfterFinished"] == 30
    assert pod["restartPolicy"] == "OnFailure"
    assert pod["containers"][0]["env"] == [own]
    assert pod["containers"][1]["env"] == [POD_NAME_ENV]


def test_a_long_scaler_name_becomes_a_valid_distinct_label() -> None:
    a, b = scaler_label("x" * 100 + "a"), scaler_label("x" * 100 + "b")
    assert len(a) <= 63 and len(b) <= 63 and a != b
    assert scaler_label("short") == "short"


def test_the_job_mode_example_of_docs_operating_md_is_a_valid_spec() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "operating.md").read_text()
    section = text[text.index("### Job mode") :]
    block = section[section.index("```yaml\n") + len("```yaml\n") :]
    obj = yaml.safe_load(block[: block.index("```")])
    config = config_from_object({**obj, "metadata": {**obj["metadata"], "namespace": "media"}})
    assert config.jobs is not None and config.policy.max_replicas == 20
    args = config.jobs.spec["template"]["spec"]["containers"][0]["args"]
    assert "--once" in args
