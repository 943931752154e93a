"""Feature declarations and design parameters: an agent is checked only on what it declares,
follows the designs it declares, and the report says what was skipped and why (D90-D93)."""

from __future__ import annotations

import inspect
import os
import pathlib
import subprocess
import sys
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager

import pytest
from hypothesis import HealthCheck, Phase, settings

from agent_conformance import PROPERTIES, AgentMachine, AgentReference, ContractViolation, Features
from agent_conformance._agent_machine import (
    agent_machine_for,
    agent_settings,
    builtin_agent_factory,
)
from agent_conformance._conformance import (
    MachineReport,
    _run,  # pyright: ignore[reportPrivateUsage]
    describe_coverage,
    describe_failure,
    run_conformance,
)
from agent_conformance._features import DESIGNS, FEATURES, GATES, features_of
from trio_agents import Agent, AgentOptions, Approval, EventBus, Model, Tool
from trio_agents._cli._main import main

from .support import variants

ROOT = pathlib.Path(__file__).resolve().parent.parent

# The same examples every run, and no shrinking: the first failing example names the property.
FOUND_IS_CAUGHT = settings(
    derandomize=True,
    max_examples=150,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow],
)


def _agent_run(factory: object, seed: int, examples: int = 60) -> MachineReport:
    (report,) = run_conformance(factory, seed=seed, max_examples=examples)  # type: ignore[arg-type]
    assert report.machine == "agent"
    return report


# -- the declaration ------------------------------------------------------------------------


def test_every_feature_is_on_by_default_and_the_designs_are_the_builtins() -> None:
    features = Features()
    assert all(getattr(features, name) is True for name in FEATURES)
    assert features.missing == ()
    assert features.designs == {}
    assert set(DESIGNS) == {"steering_at_step_limit", "cancel_after_final_answer"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"steer": "no"}, "Features(steer='no'): steer must be True or False"),
        ({"pending": 1}, "Features(pending=1): pending must be True or False"),
        (
            {"steering_at_step_limit": "drop"},
            "Features(steering_at_step_limit='drop'): steering_at_step_limit must be one of "
            "'requeue', 'answer'",
        ),
        (
            {"cancel_after_final_answer": None},
            "Features(cancel_after_final_answer=None): cancel_after_final_answer must be one "
            "of 'aborted', 'completed'",
        ),
    ],
)
def test_a_bad_value_is_one_line_naming_it(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=r"^Features") as info:
        Features(**kwargs)  # type: ignore[arg-type]
    assert str(info.value) == message


def test_a_factory_declares_its_features_in_an_attribute() -> None:
    assert features_of(variants.no_steer) == Features(steer=False)
    assert features_of(builtin_agent_factory) == Features()
    with pytest.raises(TypeError, match=r"^bad_declaration\.conformance_features is a dict"):
        features_of(variants.bad_declaration)


# -- the one table ----------------------------------------------------------------------


def test_every_feature_gates_rules_and_names_only_agent_properties() -> None:
    assert set(GATES) == set(FEATURES)
    agent = {p for p in PROPERTIES if p.machine == "agent"}
    rules = {
        name
        for name, member in inspect.getmembers(AgentMachine)
        if callable(member) and hasattr(member, "hypothesis_stateful_rule")
    }
    for feature, gate in GATES.items():
        assert gate.rules, feature
        for prop in (*gate.skips, *gate.narrows):
            assert prop in agent, (feature, prop)
        assert not set(gate.skips) & set(gate.narrows), feature
        for name in gate.rules:
            # A plain name is a rule of the machine; anything else describes a check.
            if name.isidentifier():
                assert name in rules, (feature, name)


# -- the machine honours them -----------------------------------------------------------


def test_an_agent_without_steer_that_declares_it_passes_and_the_report_says_what_was_skipped() -> (
    None
):
    report = _agent_run(variants.no_steer, seed=3)
    assert report.passed, describe_failure(report.failure)
    skipped = {p.name: why for p, why in report.skipped}
    assert skipped == {
        "steering-delivered": "the target declares no steer",
        "steering-never-lost": "the target declares no steer",
    }
    assert {p.name for p in report.checked}.isdisjoint(skipped)
    lines = describe_coverage(report)
    assert lines[0] == "declared: no steer"
    assert "steering-delivered (A3): skipped, the target declares no steer" in lines
    assert "closed-refuses (A10): checked in part, the target declares no steer" in lines


def test_the_same_agent_undeclared_fails() -> None:
    report = _agent_run(variants.no_steer_undeclared, seed=3)
    assert not report.passed
    assert "this agent cannot steer" in describe_failure(report.failure)


def test_an_agent_declaring_no_max_steps_never_gets_the_option() -> None:
    seen: list[int | None] = []

    def recording(declared: Features | None) -> object:
        def factory(
            model: Model,
            tools: Sequence[Tool],
            events: EventBus,
            options: AgentOptions,
            approval: Approval | None = None,
        ) -> AbstractAsyncContextManager[Agent]:
            seen.append(options.max_steps)
            return builtin_agent_factory(model, tools, events, options, approval)

        if declared is not None:
            factory.conformance_features = declared  # type: ignore[attr-defined]
        return factory

    assert _agent_run(recording(None), seed=5, examples=30).passed
    assert any(limit is not None for limit in seen)  # the option is drawn...
    seen.clear()
    report = _agent_run(recording(Features(max_steps=False)), seed=5, examples=30)
    assert report.passed, describe_failure(report.failure)
    assert seen
    assert all(limit is None for limit in seen)  # ...and never set without it
    assert not report.skipped
    narrowed = {p.name: why for p, why in report.narrowed}
    assert narrowed["turn-end-reason"] == "the target declares no max_steps"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_builtin_agent_passes_on_every_property(seed: int) -> None:
    report = _agent_run(builtin_agent_factory, seed=seed, examples=40)
    assert report.passed, describe_failure(report.failure)
    assert report.features == Features()
    assert len(report.checked) == len([p for p in PROPERTIES if p.machine == "agent"])
    assert describe_coverage(report) == [f"checked: all {len(report.checked)} properties"]


def test_an_agent_without_pending_is_reported_as_such() -> None:
    from examples.third_party_agent import factory

    report = _agent_run(factory, seed=1, examples=10)
    assert report.passed, describe_failure(report.failure)
    narrowed = dict((p.name, why) for p, why in report.narrowed)
    assert narrowed["cancel-order"] == "the agent has no `pending`"


# -- the design parameters --------------------------------------------------------------


def test_steering_at_the_step_limit_can_be_answered_by_one_more_step() -> None:
    ref = AgentReference(max_steps=1, steering_at_step_limit="answer")
    ref.send("p1")
    ref.steer("s1")
    ref.release_model("text")  # the last step the limit allows; steering waits
    turn = ref.turn
    assert turn is not None
    assert [s.claimed for s in turn.steps] == [[], ["s1"]]
    ref.steer("s2")
    ref.release_model("tool")
    ref.finish_tool()  # one step beyond the limit, and no more: s2 is the next prompt
    assert ref.turns[0].end == {"kind": "max_steps"}
    assert ref.turns[1].prompt == "s2"
    requeued = AgentReference(max_steps=1)
    requeued.send("p1")
    requeued.steer("s1")
    requeued.release_model("text")
    assert requeued.turns[0].end == {"kind": "max_steps"}
    assert requeued.turns[1].prompt == "s1"


def test_a_cancel_after_the_final_answer_can_let_it_stand() -> None:
    for design, end in (("aborted", "aborted"), ("completed", "completed")):
        ref = AgentReference(cancel_after_final_answer=design)  # type: ignore[arg-type]
        ref.send("p1")
        ref.send("p2")
        ref.armed.add("StepEnded")
        ref.release_model("text")
        assert (ref.turns[0].end or {}).get("kind") == end
        assert ref.fate["p2"] == "discarded"  # either way the cancel drops the queue
        assert ref.cancels == [("user", "armed")]


def test_an_agent_of_the_other_designs_passes_when_it_declares_them() -> None:
    report = _agent_run(variants.other_designs, seed=11, examples=150)
    assert report.passed, describe_failure(report.failure)
    assert describe_coverage(report)[0] == (
        "declared: every feature, steering_at_step_limit='answer', "
        "cancel_after_final_answer='completed'"
    )


# Requeued steering is a turn the "answer" design has not got (A2), or a step it has (A3).
_STEERING = {"one-send-one-turn", "steering-delivered", "steering-never-lost"}


@pytest.mark.parametrize(
    ("factory", "features", "caught_by"),
    [
        (variants.other_designs_undeclared, None, {*_STEERING, "turn-end-reason"}),
        (builtin_agent_factory, Features(steering_at_step_limit="answer"), _STEERING),
        (
            builtin_agent_factory,
            # Not asking: the approval window's examples do not reach this design's window,
            # and its rules' share of the budget would shift with every change to them.
            Features(cancel_after_final_answer="completed", approval=False),
            {"turn-end-reason"},
        ),
    ],
)
def test_a_design_other_than_the_declared_one_fails(
    factory: object, features: Features | None, caught_by: set[str]
) -> None:
    # Fixed seeds rather than derandomised: the derandomised sample of this budget misses
    # the window of a cancel after the final answer since the approval window joined the
    # machine (D185). A seed's programs also shift with the rules the machine has and with
    # what the process imported (D385), so the first of a few seeds that finds a violation
    # is judged: 4 to 8 of 8 seeds find each of these.
    budget = agent_settings(settings(FOUND_IS_CAUGHT, derandomize=False))
    for seed in (1, 2, 3, 4, 5):
        machine = agent_machine_for(factory, features)  # type: ignore[arg-type]
        report = _run("agent", machine, budget, seed, None, features)
        if report.failure is not None:
            break
    assert isinstance(report.failure, ContractViolation), describe_failure(report.failure)
    assert report.failure.property.name in caught_by, report.failure


# -- the command ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            "tests.support.variants:bad_declaration",
            "trio-agents conformance: --target tests.support.variants:bad_declaration: "
            "bad_declaration.conformance_features is a dict; it must be an "
            "agent_conformance.Features",
        ),
        (
            "tests.support.bad_features:factory",
            "trio-agents conformance: --target tests.support.bad_features:factory: "
            "Features(steer='no'): steer must be True or False",
        ),
    ],
)
def test_the_command_rejects_a_bad_declaration_in_one_line(
    target: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["conformance", "--target", target]) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [message]
    assert "Traceback" not in captured.out + captured.err


def test_the_command_reports_what_it_skipped(capsys: pytest.CaptureFixture[str]) -> None:
    target = "tests.support.variants:no_steer"
    assert main(["conformance", "--target", target, "--max-examples", "20", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "agent machine: passed" in out
    assert "    declared: no steer\n" in out
    assert "    steering-never-lost (A3): skipped, the target declares no steer\n" in out


@pytest.mark.subprocess
def test_a_reproduction_carries_the_features_given_to_the_run(tmp_path: pathlib.Path) -> None:
    (report,) = run_conformance(
        builtin_agent_factory,
        seed=1,
        max_examples=150,
        features=Features(cancel_after_final_answer="completed", approval=False),
    )
    assert report.program is not None, describe_failure(report.failure)
    assert "    features = Features(" in report.program
    script = tmp_path / "repro.py"
    script.write_text(report.program)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    replay = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert replay.returncode == 1
    assert "A8 (turn-end-reason)" in replay.stderr, replay.stderr
