"""The scaling rules' registry (taskscale/controller/rules/__init__.py): every
rule module is listed once, in the order docs/architecture.md documents, has
a test, does no I/O; and the list is the one place decisions are made."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from rulefacts import facts, observation, policy

from taskscale.controller import policy as policy_module
from taskscale.controller import reconcile_pass, rules
from taskscale.controller.rules.base import Pause
from taskscale.controller.types import ReasonCode, WorkerObservation

REPO = Path(__file__).resolve().parents[2]
RULES_DIR = REPO / "taskscale" / "controller" / "rules"
NOT_RULES = {"__init__", "base"}  # the registry, and the types the rules share
#: All a rule may import: it is pure (no network, clock, randomness, files),
#: so the simulator and the tests run the very rules the controller does.
PURE = {"__future__", "math", "re", "dataclasses", "collections", "typing", "itertools"}
OURS = ("taskscale.controller.types", "taskscale.controller.history", "taskscale.controller.rules")


def rule_modules() -> list[str]:
    return sorted(p.stem for p in RULES_DIR.glob("*.py") if p.stem not in NOT_RULES)


def listed() -> list[str]:
    return [rule.__module__.rpartition(".")[2] for rule in rules.RULES]


def documented_order() -> list[str]:
    """The rule column of the table under "### The scaling rules"."""
    text = (REPO / "docs" / "architecture.md").read_text()
    section = text.split("### The scaling rules\n", 1)[1].split("\n#", 1)[0]
    names = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].isdigit():
            assert cells[0] == str(len(names) + 1), f"rows out of sequence at {line!r}"
            names.append(cells[1].strip("`"))
    return names


def test_every_rule_module_is_listed_once_by_its_apply() -> None:
    assert sorted(listed()) == rule_modules()  # a module not in RULES fails here
    assert len(set(listed())) == len(listed())
    for rule in rules.RULES:
        assert rule is importlib.import_module(rule.__module__).apply


def test_the_order_is_the_documented_one() -> None:
    assert listed() == documented_order()
    # the overrides first, the sizing before what adjusts it, the StatefulSet hold last
    assert listed()[:4] == ["pause", "fallback", "fail_static", "sizing"]
    assert listed()[-1] == "ordinal_hold"


def test_every_rule_module_has_a_test() -> None:
    tests = [p for p in (REPO / "tests").rglob("*.py") if p.name != Path(__file__).name]
    imported: set[str] = set()
    for path in tests:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "taskscale.controller.rules":
                imported.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module.removeprefix("taskscale.controller.rules."))
    assert [m for m in rule_modules() if m not in imported] == []


def test_a_rule_does_no_io() -> None:
    offenders = {}
    for name in rule_modules():
        tree = ast.parse((RULES_DIR / f"{name}.py").read_text())
        modules = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules.add(node.module)
        impure = {m for m in modules if m.partition(".")[0] not in PURE and not m.startswith(OURS)}
        if impure:
            offenders[name] = sorted(impure)
    assert offenders == {}


def test_an_override_ends_the_list() -> None:
    # paused at 1 with 40 tasks queued and a busy StatefulSet pod: neither the
    # sizing nor the ordinal hold, which come after, may move it
    busy = (WorkerObservation("w", "workers-7", ("a",), threads=4, busy=4),)
    paused = facts(
        observation(busy, a={"queued": 40}),
        current=8,
        pause=Pause(replicas=1),
        statefulset="workers",
    )
    decision = rules.apply(paused)
    assert (decision.desired, decision.reason_code) == (1, ReasonCode.PAUSED)


def test_decide_and_the_reconcile_pass_apply_the_same_list() -> None:
    # neither keeps a rule of its own: both go through rules.apply
    for module in (policy_module, reconcile_pass):
        source = Path(module.__file__ or "").read_text()
        assert "apply" in source
        for name in rule_modules():
            assert f"rules.{name} import" not in source, (module.__name__, name)
            assert f"rules import {name}" not in source, (module.__name__, name)
    obs = observation(a={"queued": 9})
    pol = policy()
    assert policy_module.decide(obs, pol, facts().history, now=0.0, current=3) == rules.apply(
        facts(obs, pol, current=3)._replace(now=0.0)
    )
