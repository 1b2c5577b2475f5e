"""install() guards: once per app (twice would count every run twice), and
bad settings fail at install time, not in the first task."""

from __future__ import annotations

import pytest
from celery import Celery

from taskscale.integrations.celery import install


def test_install_is_once_per_app_until_uninstalled() -> None:
    app = Celery("guard", broker="memory://")
    tracking = install(app, redis_url="redis://127.0.0.1:1/0")
    with pytest.raises(RuntimeError, match="already installed"):
        install(app, redis_url="redis://127.0.0.1:1/0")
    install(Celery("other", broker="memory://"), redis_url="redis://127.0.0.1:1/0").uninstall()
    tracking.uninstall()  # no worker ever started: nothing to count down, no Redis touched
    install(app, redis_url="redis://127.0.0.1:1/0").uninstall()


@pytest.mark.parametrize(
    ("settings", "message"),
    [({"namespace": "a:b"}, "invalid namespace"), ({"lease_s": 0}, "lease_s")],
)
def test_bad_settings_fail_at_install(settings: dict[str, object], message: str) -> None:
    app = Celery("bad", broker="memory://")
    with pytest.raises(ValueError, match=message):
        install(app, **settings)  # type: ignore[arg-type]
