"""Failures read as findings (issue 34): the first line names what broke, and a violation
Hypothesis could not replay is reported as that violation, with the program that showed it,
never as a crash of the implementation."""

from __future__ import annotations

import concurrent.futures
import itertools
import tempfile
from collections.abc import Hashable

import hypothesis.errors
import trio
from hypothesis import settings

from agent_conformance import ContractViolation, Property
from agent_conformance._conformance import (  # the report's own pieces
    NOT_REPLAYED,
    _run,  # pyright: ignore[reportPrivateUsage]
    describe_failure,
    found_in,
)
from agent_conformance._machine import ConformanceMachine, machine_for, rule
from agent_conformance._properties import violation as make_violation
from agent_conformance._threads import watching_threads
from trio_agents import SqliteStore
from trio_agents.testing import TrioHost

CANCEL_ORDER = Property("A6", "cancel-order", "agent", "one CancelRequested per cancel")
BUDGET = settings(max_examples=20, database=None, deadline=None, stateful_step_count=5)


class _Pool(ConformanceMachine):
    """A target that hands work to a thread pool, as some frameworks do, and whose result
    then depends on the pool's timing."""

    def __init__(self) -> None:
        super().__init__(TrioHost())

    @rule()
    def work(self) -> None:
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            pool.submit(lambda: None).result()
        CANCEL_ORDER.fail("the pool's answer came after the turn ended")

    def _verify(self) -> None:
        pass

    def _history(self) -> Hashable | None:
        return None

    def _check_closing(self) -> None:
        pass


class _Probe(ConformanceMachine):
    """A machine whose one step fails on a condition outside the program: the fourth call in
    the process, whatever the program (so Hypothesis's replay of it passes)."""

    calls = itertools.count()
    crash = False

    def __init__(self) -> None:
        super().__init__(TrioHost())

    @rule()
    def poke(self) -> None:
        n = next(type(self).calls)
        if type(self).crash and n == 3:
            raise KeyError("a key the implementation lost")
        CANCEL_ORDER.check(n != 3, f"call {n} emitted CancelRequested twice")

    def _verify(self) -> None:
        pass

    def _history(self) -> Hashable | None:
        return None

    def _check_closing(self) -> None:
        pass


def test_a_violation_that_does_not_replay_is_reported_as_that_violation() -> None:
    machine = machine_for(_Probe, None)
    machine.calls = itertools.count()
    report = _run("agent", machine, BUDGET, 1, None)
    assert isinstance(report.failure, ContractViolation)
    assert report.failure.property is CANCEL_ORDER
    text = describe_failure(report.failure)
    first, *rest = text.splitlines()
    assert first == "A6 (cancel-order): call 3 emitted CancelRequested twice"
    assert NOT_REPLAYED in rest
    program = rest[rest.index(NOT_REPLAYED) + 1 :]
    assert program[0] == "the program that showed it, step by step:"
    assert program[1:]
    assert all(line == "  state.poke()" for line in program[1:])
    assert "crashed" not in text


def test_a_crash_names_its_exception_on_the_first_line() -> None:
    machine = machine_for(_Probe, None)
    machine.calls = itertools.count()
    machine.crash = True
    report = _run("agent", machine, BUDGET, 1, None)
    assert isinstance(report.failure, KeyError)
    first = describe_failure(report.failure).splitlines()[0]
    assert first == (
        "the implementation crashed (not a violation of a rule): "
        "KeyError: 'a key the implementation lost'"
    )


def test_a_target_that_runs_work_in_threads_is_told_so_with_where_they_came_from() -> None:
    report = _run("agent", machine_for(_Pool, None), BUDGET, 1, None)
    assert isinstance(report.failure, ContractViolation)
    text = describe_failure(report.failure)
    assert text.splitlines()[0].startswith("A6 (cancel-order): the pool's answer came")
    assert "the target ran work in threads of its own" in text
    assert f"{__file__}:" in text  # the line that started the pool
    assert "in work" in text
    assert any("threads of its own" in note for note in report.notes)


def test_the_runtimes_own_threads_are_not_reported() -> None:
    """The built-in runtime's SQLite store runs a thread of its own: expected, not told."""

    async def main(path: str) -> None:
        async with SqliteStore(path).running():
            await trio.to_thread.run_sync(lambda: None)

    with watching_threads() as started, tempfile.TemporaryDirectory() as directory:
        trio.run(main, f"{directory}/s.sqlite3")
    assert started == []


def test_a_replay_that_drew_more_than_the_failing_run_reports_the_runs_violation() -> None:
    # The failing run stopped at its violation; Hypothesis's replay passed that step and drew
    # more, which it reports as inconsistent data generation. The finding is the violation.
    violation = make_violation(CANCEL_ORDER, "a second CancelRequested")
    flaky = hypothesis.errors.FlakyStrategyDefinition("the second run drew more data")
    found = found_in(flaky, [violation])
    assert found is violation
    assert NOT_REPLAYED in getattr(found, "__notes__", [])
    assert found_in(flaky, []) is flaky  # nothing seen: Hypothesis's own error, as it is
