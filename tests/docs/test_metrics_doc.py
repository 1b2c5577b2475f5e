"""docs/metrics.md names every metric taskscale exports: each family on the
worker's, the scheduler's and the controller's registries, and every
``taskscale_*`` name passed to a metric constructor anywhere in taskscale/
(so a metric defined in a class this test does not build fails it too)."""

from __future__ import annotations

import itertools
import re

from prometheus_client import CollectorRegistry

from support.docs import REPO
from taskscale.controller.metrics import ControllerMetrics
from taskscale.metrics import WorkerMetrics
from taskscale.scheduling.scheduler_metrics import SchedulerMetrics

DOC = REPO / "docs" / "metrics.md"
#: A metric name in the doc, with the doc's shorthand for several names:
#: ``taskscale_observed_{queued,due}_tasks`` (a label list such as
#: ``{version, component}`` or ``{schedule}`` is not part of the name).
_DOC_NAME = re.compile(r"taskscale_[a-z0-9_]*(?:\{[a-z0-9_]+(?:,[a-z0-9_]+)+\}[a-z0-9_]*)*")
_CONSTRUCTED = re.compile(
    r"\b(?:Counter|Gauge|Histogram|Summary|Info|Enum|\w*MetricFamily)\(\s*f?\"(taskscale_[a-z0-9_{}]+)\""
)


def documented() -> set[str]:
    names: set[str] = set()
    for token in _DOC_NAME.findall(DOC.read_text()):
        parts = re.split(r"\{([^}]*)\}", token)
        choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
        names |= {"".join(combo) for combo in itertools.product(*choices)}
    return names


def exported(registry: CollectorRegistry) -> set[str]:
    """Family names as scraped (a counter's with its ``_total``)."""
    names = set()
    for family in registry.collect():
        if family.name.startswith("taskscale_"):
            names.add(family.name + ("_total" if family.type == "counter" else ""))
    return names


def registries() -> list[CollectorRegistry]:
    return [
        WorkerMetrics(types=("t",), threads=1).registry,
        SchedulerMetrics(lease_s=10).registry,
        ControllerMetrics().registry,
    ]


def test_every_exported_metric_is_in_docs_metrics_md() -> None:
    names = set().union(*(exported(r) for r in registries()))
    assert len(names) > 30  # the registries were read
    assert sorted(names - documented()) == []


def test_every_metric_constructed_in_taskscale_is_on_a_registry_checked_here() -> None:
    names = set().union(*(exported(r) for r in registries()))
    bases = {n.removesuffix("_total") for n in names}
    found: dict[str, str] = {}
    for path in (REPO / "taskscale").rglob("*.py"):
        for name in _CONSTRUCTED.findall(path.read_text()):
            found[name] = str(path.relative_to(REPO))
    assert len(found) > 20
    unchecked = {
        name: where
        for name, where in found.items()
        if "{" not in name and name.removesuffix("_total") not in bases
    }
    assert unchecked == {}  # build that registry in registries() above
