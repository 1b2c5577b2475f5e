"""The alert rules: valid for promtool, unit-tested, linked to their runbooks,
tunable from values, and built only on series some taskscale process exports."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client import generate_latest

from support.chart import CHART, REPO, one, render

ALERTS = REPO / "deploy/prometheus/taskscale-alerts.yaml"
RULE_TESTS = Path(__file__).with_name("alerts-test.yaml")
DASHBOARD = REPO / "deploy/grafana/taskscale.json"


#: Why the promtool tests cannot run; under CI (``CI`` set) a failure, not a skip.
NO_PROMTOOL = (
    "promtool is not on PATH: run scripts/setup.sh, which installs Debian's "
    "prometheus package (it provides promtool)"
)


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail(f"{NO_PROMTOOL}; CI must run the alert rule checks")
        pytest.skip(NO_PROMTOOL)
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=120)


def rules() -> list[dict]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_alert_rules_pass_promtool_check() -> None:
    result = promtool("check", "rules", str(ALERTS))
    assert result.returncode == 0, result.stdout + result.stderr


def test_alert_rule_unit_tests_pass() -> None:
    result = promtool("test", "rules", str(RULE_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    tested = set(re.findall(r"alertname: (\w+)", RULE_TESTS.read_text()))
    assert {
        "TaskscaleNoScheduler",
        "TaskscaleDelayedTasksOverdue",
        "TaskscaleDeadLetterGrowth",
        "TaskscaleNoLeader",
        "TaskscaleWorkStuckAtZero",
        "TaskscaleKubernetesApiErrors",
    } <= tested


def test_deploy_alerts_are_the_chart_rule_rendered_with_default_values() -> None:
    rule = one(render(set_values={"metrics.prometheusRule.enabled": "true"}), "PrometheusRule")
    assert rule["spec"] == yaml.safe_load(ALERTS.read_text()), (
        "deploy/prometheus/taskscale-alerts.yaml is stale: run python scripts/chart_alerts.py"
    )


def test_every_alert_links_its_runbook_in_the_operating_guide() -> None:
    guide = (REPO / "docs" / "operating.md").read_text()
    for rule in rules():
        url = rule["annotations"]["runbook_url"]
        anchor = f"runbook-{rule['alert'].lower()}"
        assert url == (
            f"https://github.com/taskscale/taskscale/blob/main/docs/operating.md#{anchor}"
        )
        assert f'id="{anchor}"' in guide, f"docs/operating.md has no runbook for {rule['alert']}"


def test_thresholds_and_runbook_base_come_from_values(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    rule_values = {
        "enabled": True,
        "runbookBaseUrl": "https://wiki.example.com/taskscale",
        "thresholds": {"overdueSeconds": 300, "noSchedulerFor": "7m", "taskFailureRatio": 0.25},
    }
    values.write_text(yaml.safe_dump({"metrics": {"prometheusRule": rule_values}}))
    objects = render(values_files=[values])
    by_name = {
        r["alert"]: r for g in one(objects, "PrometheusRule")["spec"]["groups"] for r in g["rules"]
    }
    assert by_name["TaskscaleDelayedTasksOverdue"]["expr"].endswith("> 300")
    assert by_name["TaskscaleNoScheduler"]["for"] == "7m"
    assert by_name["TaskscaleTaskFailures"]["expr"].rstrip().endswith("> 0.25")
    assert (
        by_name["TaskscaleNoScheduler"]["annotations"]["runbook_url"]
        == "https://wiki.example.com/taskscale#runbook-taskscalenoscheduler"
    )


#: alert -> the values key of its `for:` duration (every alert with a `for:`).
FOR_KEYS = {
    "TaskscaleNoLeader": "noLeaderFor",
    "TaskscaleSeveralLeaders": "severalLeadersFor",
    "TaskscaleRedisUnreadable": "redisErrorsFor",
    "TaskscaleKubernetesApiErrors": "kubeApiErrorsFor",
    "TaskscaleReconcileSlow": "reconcileSlowFor",
    "TaskscaleWorkStuckAtZero": "stuckAtZeroFor",
    "TaskscaleAtMaxReplicasWithBacklog": "atMaxFor",
    "TaskscaleNoScheduler": "noSchedulerFor",
    "TaskscaleDelayedTasksOverdue": "overdueFor",
    "TaskscaleTaskFailures": "taskFailuresFor",
}
#: alert -> (values key, a value no default uses) of the threshold its expr compares with.
THRESHOLD_KEYS = {
    "TaskscaleRedisUnreadable": ("redisErrorsPerSecond", 0.37),
    "TaskscaleKubernetesApiErrors": ("kubeApiErrorsPerSecond", 0.42),
    "TaskscaleReconcileSlow": ("reconcileP99Seconds", 7.5),
    "TaskscaleAtMaxReplicasWithBacklog": ("backlogAtMax", 41),
    "TaskscaleDelayedTasksOverdue": ("overdueSeconds", 301),
    "TaskscaleTaskFailures": ("taskFailureRatio", 0.27),
    "TaskscaleDeadLetterGrowth": ("deadLetters", 43),
}


def test_every_for_duration_threshold_and_window_comes_from_values(tmp_path: Path) -> None:
    """No alert keeps a hard-coded duration or threshold: each one set in
    values (to numbers no default uses) shows up in its own alert."""
    durations = {key: f"{n}m" for n, key in enumerate(FOR_KEYS.values(), start=101)}
    thresholds = {key: value for key, value in THRESHOLD_KEYS.values()}
    windows = {"taskFailuresWindow": "77m", "deadLettersWindow": "88m"}
    values = tmp_path / "values.yaml"
    tuned = {"enabled": True, "thresholds": {**durations, **thresholds, **windows}}
    values.write_text(yaml.safe_dump({"metrics": {"prometheusRule": tuned}}))
    rule = one(render(values_files=[values]), "PrometheusRule")
    by_name = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    assert {name for name, r in by_name.items() if "for" in r} == set(FOR_KEYS)
    for alert, key in FOR_KEYS.items():
        assert by_name[alert]["for"] == durations[key], alert
    for alert, (_, value) in THRESHOLD_KEYS.items():
        assert re.search(rf"> {value}\)?\s*$", by_name[alert]["expr"]), (
            alert,
            by_name[alert]["expr"],
        )
    failures = by_name["TaskscaleTaskFailures"]["expr"]
    assert failures.count("[77m]") == 3 and "[15m]" not in failures
    assert "[88m]" in by_name["TaskscaleDeadLetterGrowth"]["expr"]
    # the descriptions say the tuned durations, not the defaults
    assert "for 101m" in by_name["TaskscaleNoLeader"]["annotations"]["description"]
    assert "in the last 77m" in by_name["TaskscaleTaskFailures"]["annotations"]["description"]


def test_every_threshold_in_values_is_read_by_an_alert() -> None:
    """values.yaml lists no threshold the rule ignores (a renamed key would)."""
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    listed = set(defaults["metrics"]["prometheusRule"]["thresholds"])
    template = (CHART / "templates/prometheusrule.yaml").read_text()
    used = set(re.findall(r"\$t\.(\w+)", template))
    assert listed == used, (listed - used, used - listed)


def exported_names() -> set[str]:
    """Every sample name the controller, scheduler and worker registries serve."""
    from taskscale.controller.metrics import ControllerMetrics
    from taskscale.controller.types import Observation, TypeObservation
    from taskscale.metrics import WorkerMetrics
    from taskscale.scheduling.scheduler_metrics import SchedulerMetrics

    controller = ControllerMetrics()
    controller.add_scaler("ns/a", max_replicas=3)
    controller.record_observation(
        "ns/a", Observation(at=1.0, types={"t": TypeObservation("t")}, schedulers_alive=1)
    )
    controller.record_decision("ns/a", current=1, desired=1, reason="Steady")
    controller.record_scale("ns/a", before=1, after=2, reason="Demand")
    controller.reconcile_duration.observe(0.1)
    names: set[str] = set()
    for registry in (
        controller.registry,
        SchedulerMetrics(lease_s=10).registry,
        WorkerMetrics(types=("t",), threads=2).registry,
    ):
        text = generate_latest(registry).decode()
        names |= {line.split("{")[0].split()[0] for line in text.splitlines() if line[:1].isalpha()}
    return names


def test_alerts_and_dashboard_use_only_series_that_are_exported() -> None:
    exported = exported_names()
    used = set(re.findall(r"\btaskscale_[a-z_]+", ALERTS.read_text()))
    used |= set(re.findall(r"\btaskscale_[a-z_]+", json.dumps(json.loads(DASHBOARD.read_text()))))
    assert used and used - exported == set()
    # the new panels and alerts really read the new series
    for name in (
        "taskscale_observed_schedulers",
        "taskscale_observed_oldest_due_seconds",
        "taskscale_observed_dead_tasks_total",
        "taskscale_max_replicas",
        "taskscale_worker_busy_threads",
        "taskscale_worker_queue_wait_seconds_bucket",
    ):
        assert name in used, name


def test_chart_copy_of_the_dashboard_is_current() -> None:
    copy = CHART / "files/taskscale-dashboard.json"
    assert json.loads(copy.read_text()) == json.loads(DASHBOARD.read_text())
