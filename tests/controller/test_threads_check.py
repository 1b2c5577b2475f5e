"""tasksPerReplica against the threads per pod of the target's live workers,
and how the answer lands in the TaskScaler status."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

import yaml

from taskscale.cli.runtime import add_parser
from taskscale.controller.config import RedisRef, ScalerConfig, _policy
from taskscale.controller.kube_status import ConditionType, EventReason, build_status
from taskscale.controller.reconciler import PassOutcome, Problem
from taskscale.controller.threads_check import check_threads, pod_of_deployment
from taskscale.controller.types import (
    Decision,
    Observation,
    ReasonCode,
    ScalingPolicy,
    TypeObservation,
    TypePolicy,
    WorkerObservation,
)
from taskscale.worker.settings import WorkerSettings

REPO = Path(__file__).resolve().parents[2]


def worker(pod: str, threads: int, wid: str = "") -> WorkerObservation:
    return WorkerObservation(wid or f"{pod}-w", pod, ("email",), threads, 0)


def test_pods_of_a_deployment_are_told_from_pods_of_a_longer_named_one() -> None:
    assert pod_of_deployment("email-7d9f8b6c4-x2x4z", "email")
    assert not pod_of_deployment("email-fast-7d9f8b6c4-x2x4z", "email")
    assert not pod_of_deployment("laptop", "email")


def test_pods_of_a_long_named_deployment_are_recognised_despite_the_cut() -> None:
    # The ReplicaSet is "<deployment>-<hash>"; its pods' generateName is cut to 58.
    long = "notifications-email-transactional-worker-eu1-blue"  # 49 characters
    cut = f"{long}-6d4f9c8b7-"[:58]
    assert len(cut) == 58 and cut.endswith("-6d4f9c8b")
    assert pod_of_deployment(cut + "x2x4z", long)
    assert not pod_of_deployment(cut + "x2x4z", long[:-1] + "2")
    longer = "n" * 60
    assert pod_of_deployment("n" * 58 + "x2x4z", longer)


def test_no_live_worker_of_the_deployment_gives_no_verdict() -> None:
    workers = [worker("batch-7d9f8-x2x4z", 8)]
    assert check_threads(deployment="email", tasks_per_replica=4, workers=workers) is None
    assert check_threads(deployment="email", tasks_per_replica=4, workers=[]) is None


def test_tracked_celery_or_rq_processes_whose_threads_are_unknown_give_no_verdict() -> None:
    tracked = [worker("email-7d9f8-x2x4z", 0, "celery-1"), worker("email-7d9f8-b2b4b", 0)]
    assert check_threads(deployment="email", tasks_per_replica=4, workers=tracked) is None
    mixed = [*tracked, worker("email-7d9f8-ccccc", 4)]
    verdict = check_threads(deployment="email", tasks_per_replica=4, workers=mixed)
    assert verdict is not None and verdict.matches


def test_threads_are_summed_per_pod_over_its_worker_processes() -> None:
    workers = [worker("email-7d9f8-aaaaa", 2, "a"), worker("email-7d9f8-aaaaa", 2, "b")]
    check = check_threads(deployment="email", tasks_per_replica=4, workers=workers)
    assert check is not None and check.matches
    assert check.pods_by_threads == {4: ("email-7d9f8-aaaaa",)}


def test_a_mismatch_names_the_counts_the_pods_and_both_fixes() -> None:
    workers = [worker(f"email-7d9f8-aaaa{i}", 4) for i in range(5)] + [
        worker("email-6c5b4-bbbbb", 8)
    ]
    check = check_threads(deployment="email", tasks_per_replica=1, workers=workers)
    assert check is not None and not check.matches
    assert check.pods_by_threads[4] == tuple(f"email-7d9f8-aaaa{i}" for i in range(5))
    assert "tasksPerReplica is 1" in check.message
    assert "4 threads in email-7d9f8-aaaa0, email-7d9f8-aaaa1, email-7d9f8-aaaa2 and 2 more" in (
        check.message
    )
    assert "8 threads in email-6c5b4-bbbbb" in check.message
    assert "(e.g. 4)" in check.message and "--threads 1" in check.message


def test_defaults_agree_crd_policy_and_worker() -> None:
    """An unset tasksPerReplica means what an unset --threads means."""
    crd = yaml.safe_load((REPO / "deploy/crd/taskscaler.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    cli_default = parser.parse_args(["worker", "--types", "x"]).threads
    threads = WorkerSettings(types=("x",)).threads
    assert spec["properties"]["tasksPerReplica"]["default"] == threads == cli_default
    assert ScalingPolicy(types=()).tasks_per_replica == threads
    assert _policy({"taskTypes": [{"name": "x"}]}).tasks_per_replica == threads


CONFIG = ScalerConfig(
    name="emails",
    namespace="jobs",
    target="email",
    redis=RedisRef(url="redis://r"),
    policy=ScalingPolicy(types=(TypePolicy("email"),), tasks_per_replica=2),
    generation=1,
)


def outcome(workers: tuple[WorkerObservation, ...], **changes: Any) -> PassOutcome:
    observation = Observation(
        at=1000.0, types={"email": TypeObservation("email", queued=1)}, workers=workers
    )
    base = PassOutcome(
        CONFIG, 1000.0, observation, 1, Decision(1, ReasonCode.DEMAND, "1 -> 1: 1 queued")
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def threads_condition(status: dict[str, Any]) -> dict[str, Any] | None:
    found = [c for c in status["conditions"] if c["type"] == ConditionType.THREADS_MATCH]
    return found[0] if found else None


def test_the_condition_is_kept_as_last_judged_while_no_worker_is_live() -> None:
    mismatch = build_status(outcome((worker("email-7d9f8-aaaaa", 4),)), {}, now=1000.0)
    c = threads_condition(mismatch)
    assert c is not None and (c["status"], c["reason"]) == ("False", EventReason.THREADS_MISMATCH)
    at_zero = build_status(outcome(()), mismatch, now=1010.0)
    assert threads_condition(at_zero) == c
    fixed = build_status(outcome((worker("email-7d9f8-aaaaa", 2),)), at_zero, now=1020.0)
    assert threads_condition(fixed)["status"] == "True"  # type: ignore[index]


def test_a_failed_pass_puts_its_problem_in_reason_and_reason_code() -> None:
    ok = build_status(outcome(()), {}, now=1000.0)
    assert (ok["reasonCode"], ok["reason"]) == ("Demand", "1 -> 1: 1 queued")
    failed = build_status(
        outcome(
            (),
            current=None,
            decision=None,
            problem=Problem.TARGET_NOT_FOUND,
            message="deployment jobs/email not found",
        ),
        ok,
        now=1010.0,
    )
    assert (failed["reasonCode"], failed["reason"]) == (
        "TargetNotFound",
        "deployment jobs/email not found",
    )
    held = build_status(
        outcome((), problem=Problem.REDIS_UNREACHABLE, message="ConnectionError: refused"),
        ok,
        now=1020.0,
    )
    assert held["reasonCode"] == "RedisUnreachable"
    assert held["reason"] == "1 -> 1: 1 queued (ConnectionError: refused)"
