"""The dashboard in a real browser (chromium through Selenium), against a
real Redis, real worker processes and the real server: the overview updates
without a reload, the generated form of ``sleep`` runs a task, a dead letter
is retried from its page, and the scaling page draws the recorded timeline."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
import redis
from browser import chromium, text_of, unlock, wait_for
from dashhelpers import EXAMPLES, KEYS, TOKEN, dashboard, make_dead_letters
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from support.waiting import wait_until
from support.workers import processes, start_worker
from taskscale import history
from taskscale.catalog import read_catalog
from taskscale.controller.config import RedisRef, ScalerConfig
from taskscale.controller.decision_log import DecisionLog
from taskscale.controller.job_demand import JobCensus
from taskscale.controller.job_spec import JobTarget
from taskscale.controller.outcome import PassOutcome
from taskscale.controller.types import Decision, Protection, ReasonCode, ScalingPolicy, TypePolicy
from taskscale.producer import Producer
from taskscale.server_clock import server_time

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    with chromium() as driver:
        yield driver


def test_the_overview_shows_an_enqueue_without_reloading(
    browser: WebDriver, redis_url: str, r: redis.Redis
) -> None:
    with dashboard(redis_url) as d:
        browser.get(d.url)
        wait_for(browser, lambda b: "no task types yet" in text_of(b, "#overview tbody"))
        browser.execute_script("window.__sameDocument = 'yes';")
        Producer(r, keys=KEYS).enqueue_many("email", [[i] for i in range(3)])
        cell = 'tr[data-type="email"] td[data-field="queued"] b'
        wait_for(browser, lambda b: text_of(b, cell) == "3")
        Producer(r, keys=KEYS).enqueue("email", 4)
        wait_for(browser, lambda b: text_of(b, cell) == "4")
        assert browser.execute_script("return window.__sameDocument") == "yes"  # no reload
        assert "no live worker serves email" in text_of(browser, "#warnings")


def test_the_generated_form_of_sleep_calls_and_enqueues_a_task_that_completes(
    browser: WebDriver, redis_url: str, r: redis.Redis
) -> None:
    with (
        processes(start_worker(redis_url, types="sleep", imports=EXAMPLES)),
        dashboard(redis_url) as d,
    ):
        wait_until(lambda: "sleep" in read_catalog(r, KEYS)["types"])
        browser.get(d.url + "types/sleep")
        seconds = browser.find_element(By.NAME, "seconds")
        assert seconds.get_attribute("value") == "1.0"  # the default, from the catalog
        unlock(browser, TOKEN)
        seconds.clear()
        seconds.send_keys("0.3")
        browser.find_element(By.CSS_SELECTOR, 'button[data-mode="call"]').click()
        wait_for(browser, lambda b: "completed, result 0.3" in text_of(b, "#form-result"))

        browser.find_element(By.CSS_SELECTOR, 'button[data-mode="enqueue"]').click()
        result = wait_for(
            browser,
            lambda b: (
                b.find_element(By.ID, "form-result").get_attribute("data-state") == "completed"
            ),
        )
        assert result
        assert "completed" in text_of(browser, "#form-result")
    assert int(r.hget(KEYS.stats("sleep"), "completed") or 0) == 2


def test_a_dead_letter_is_retried_from_its_page(
    browser: WebDriver, redis_url: str, r: redis.Redis
) -> None:
    ids = make_dead_letters(redis_url, r, ["first", "second"])
    with dashboard(redis_url) as d:
        browser.get(d.url + "dead/fail")
        unlock(browser, TOKEN)
        rows = browser.find_elements(By.CSS_SELECTOR, "#dead tbody tr[data-id]")
        assert [row.get_attribute("data-id") for row in rows] == ids
        retry = browser.find_element(By.CSS_SELECTOR, f'tr[data-id="{ids[1]}"] button:not(.danger)')
        retry.click()
        browser.switch_to.alert.accept()  # "Retry <id>?"
        wait_for(
            browser,
            lambda b: (
                [
                    row.get_attribute("data-id")
                    for row in b.find_elements(By.CSS_SELECTOR, "#dead tbody tr[data-id]")
                ]
                == ids[:1]
            ),
        )
    assert r.llen(KEYS.dead("fail")) == 1
    queued = [json.loads(e)["id"] for e in r.lrange(KEYS.queue("fail", 5), 0, -1)]
    assert queued == [ids[1]]
    assert int(r.hget(KEYS.stats("fail"), "dead_requeued") or 0) == 1


def test_without_the_token_the_browser_cannot_retry(
    browser: WebDriver, redis_url: str, r: redis.Redis
) -> None:
    make_dead_letters(redis_url, r, ["only"])
    with dashboard(redis_url) as d:
        browser.get(d.url + "dead/fail")
        browser.execute_script("sessionStorage.clear();")
        browser.find_element(By.CSS_SELECTOR, "#dead button:not(.danger)").click()
        browser.switch_to.alert.accept()
        wait_for(browser, lambda b: "refused: forbidden" in text_of(b, "#act-result"))
    assert r.llen(KEYS.dead("fail")) == 1


def test_the_scaling_page_draws_current_desired_and_the_timeline(
    browser: WebDriver, redis_url: str, r: redis.Redis
) -> None:
    log = DecisionLog()
    config = ScalerConfig(
        name="emails",
        namespace="prod",
        target="email-worker",
        redis=RedisRef(url=redis_url),
        policy=ScalingPolicy(types=(TypePolicy("email"),), max_replicas=8),
    )
    log.bind(config, redis_url)
    steps = [
        (0, 3, "Demand", "0 -> 3: 9 queued, 3 tasks per replica", True),
        (3, 0, "Idle", "3 -> 0: all types idle for 300 s", True),
    ]
    # the last pass saw one busy pod (marked) and one on a draining node (issue 23)
    protection = Protection(protected=("email-worker-a",), draining={"email-worker-b": "node-2"})
    for current, desired, code, sentence, scaled in steps:
        decision = Decision(desired=desired, reason_code=code, reason=sentence)
        log.report(
            PassOutcome(
                config, time.time(), None, current, decision, scaled=scaled, protection=protection
            )
        )
    log.close()
    with dashboard(redis_url) as d:
        browser.get(d.url + "scaling")
        card = '[data-scaler="prod/emails"]'
        wait_for(browser, lambda b: text_of(b, card + ' [data-field="desired"]') == "0")
        assert text_of(browser, card + ' [data-field="current"]') == "3"
        sentences = [
            "3 -> 0: all types idle for 300 s",
            "0 -> 3: 9 queued, 3 tasks per replica",
        ]
        script = "return [...document.querySelectorAll(arguments[0])].map((e) => e.innerText);"
        # read in one step, and again if a poll redrew the list in between
        wait_for(browser, lambda b: b.execute_script(script, card + " li .sentence") == sentences)
        assert text_of(browser, card + ' [data-field="rollout-hold"]') == ""
        assert text_of(browser, card + ' [data-field="protected"]') == "1"
        assert text_of(browser, card + ' [data-field="draining"]') == "1"
        line = text_of(browser, card + " .protection")
        assert "(email-worker-a)" in line and "email-worker-b on node-2" in line


def test_the_scaling_page_shows_a_scale_down_held_for_a_rollout(
    browser: WebDriver, redis_url: str, r: redis.Redis
) -> None:
    log = DecisionLog()
    config = ScalerConfig(
        name="emails",
        namespace="prod",
        target="email-worker",
        redis=RedisRef(url=redis_url),
        policy=ScalingPolicy(types=(TypePolicy("email"),), max_replicas=8),
    )
    log.bind(config, redis_url)
    why = "4 -> 4: idle; holding 4 until the Deployment's rollout ends (2 of 4 pods updated)"
    held = Decision(desired=4, reason_code=ReasonCode.ROLLOUT_HOLD, reason=why)
    log.report(PassOutcome(config, time.time(), None, 4, held))
    with dashboard(redis_url) as d:
        browser.get(d.url + "scaling")
        card = '[data-scaler="prod/emails"]'
        flag = card + ' [data-field="rollout-hold"]'
        wait_for(browser, lambda b: "scale-down held" in text_of(b, flag))
        assert text_of(browser, card + " li .code") == "RolloutHold"
        # the rollout ends: the next pass scales down and the flag goes away
        done = Decision(desired=1, reason_code="Idle", reason="4 -> 1: all types idle")
        log.report(PassOutcome(config, time.time(), None, 4, done, scaled=True))
        wait_for(browser, lambda b: text_of(b, flag) == "" and "4 -> 1" in text_of(b, card))
    log.close()


def test_the_scaling_page_shows_a_job_mode_scalers_jobs_by_phase(
    browser: WebDriver, redis_url: str, r: redis.Redis
) -> None:
    log = DecisionLog()
    config = ScalerConfig(
        name="renders",
        namespace="prod",
        target="renders",
        redis=RedisRef(url=redis_url),
        policy=ScalingPolicy(types=(TypePolicy("render"),), max_replicas=6),
        jobs=JobTarget(spec={"template": {"spec": {"containers": [{"name": "w"}]}}}),
    )
    log.bind(config, redis_url)
    census = JobCensus(pending=2, running=3, succeeded=7, failed=1)
    sentence = "4 task(s) waiting, 2 Job(s) not started yet: 2 Job(s) created"
    decision = Decision(desired=5, reason_code="Demand", reason=sentence)
    log.report(PassOutcome(config, time.time(), None, 3, decision, scaled=True, jobs=census))
    log.close()
    with dashboard(redis_url) as d:
        browser.get(d.url + "scaling")
        card = '[data-scaler="prod/renders"]'
        wait_for(browser, lambda b: text_of(b, card + ' [data-field="jobs-pending"]') == "2")
        shown = {
            phase: text_of(browser, card + f' [data-field="jobs-{phase}"]')
            for phase in ("pending", "running", "succeeded", "failed")
        }
        assert shown == {"pending": "2", "running": "3", "succeeded": "7", "failed": "1"}
        assert text_of(browser, card + ' [data-field="desired"]') == "5"
        assert "active Jobs (max 6)" in text_of(browser, card + " .replicas")
        assert sentence in text_of(browser, card + " .timeline")


def test_the_overview_shows_the_rate_of_dead_letters(
    browser: WebDriver, redis_url: str, r: redis.Redis
) -> None:
    # the rate comes from the history kept in Redis (issue 24: it was the
    # difference of the stats counter between two refreshes)
    Producer(r, keys=KEYS).enqueue("email", 1)
    with dashboard(redis_url) as d:
        browser.get(d.url)
        cell = 'tr[data-type="email"] td[data-field="dead-rate"]'
        wait_for(browser, lambda b: text_of(b, cell) == "0.0")
        bucket = history.current_bucket(server_time(r, KEYS).ms) - 1  # the last full bucket
        r.hincrby(KEYS.history("email", bucket), "d", 12)  # what workers write per dead letter
        wait_for(browser, lambda b: text_of(b, cell) == "0.2")  # 12 in the last minute
        r.delete(KEYS.dead("email"))  # an operator's purge: the count falls, the rate does not
        time.sleep(2.5)  # one more refresh
        assert text_of(browser, cell) == "0.2"
