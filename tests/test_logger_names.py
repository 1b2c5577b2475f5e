"""Log records keep the logger names they had before the runtime moved into
packages: they are the ``logger`` field of every JSON log line and the
``%(name)s`` of text logs, which users filter and alert on, not module paths."""

from __future__ import annotations

import importlib

import pytest

#: module -> the logger name its records carry.
NAMES = {
    "taskscale.worker.runtime": "taskscale.worker",
    "taskscale.worker.claimer": "taskscale.worker",
    "taskscale.worker.reporter": "taskscale.worker",
    "taskscale.worker.shutdown": "taskscale.worker",
    "taskscale.worker.execution": "taskscale.worker",
    "taskscale.worker.async_executor": "taskscale.worker",
    "taskscale.worker.supervisor": "taskscale.supervisor",
    "taskscale.scheduling.scheduler": "taskscale.scheduler",
    "taskscale.scheduling.schedules": "taskscale.schedules",
    "taskscale.retrying": "taskscale.connection",
    "taskscale.demo.run": "taskscale.demo",
    "taskscale.demo.load": "taskscale.demo",
}


@pytest.mark.parametrize(("module", "name"), sorted(NAMES.items()))
def test_a_modules_records_keep_their_logger_name(module: str, name: str) -> None:
    assert importlib.import_module(module).log.name == name
