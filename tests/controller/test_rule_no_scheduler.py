"""The no-scheduler rule (rules/no_scheduler.py): due tasks need a scheduler."""

from __future__ import annotations

from rulefacts import facts, observation, sizing, step

from taskscale.controller.rules import no_scheduler


def test_only_an_observed_zero_means_no_scheduler() -> None:
    assert no_scheduler.scheduler_alive(observation(schedulers_alive=2))
    assert no_scheduler.scheduler_alive(observation(schedulers_alive=None))  # not observed
    assert not no_scheduler.scheduler_alive(observation(schedulers_alive=0))


def test_the_sentence_says_how_many_due_tasks_were_not_counted() -> None:
    noted = no_scheduler.apply(facts(observation()), step(1, sized=sizing(stranded_due=8)))
    assert noted.replicas == 1
    assert noted.why == (
        "the sizing; 8 due delayed task(s) not counted: no scheduler is alive to make them ready"
    )
    given = step(1)
    assert no_scheduler.apply(facts(observation()), given) is given
