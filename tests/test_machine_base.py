"""The skeleton the conformance machines share (`agent_conformance._machine`): a failing
step is never masked by teardown's checks, and `machine_for` makes a fresh machine per run."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Hashable
from contextlib import asynccontextmanager
from typing import ClassVar

import pytest
import trio
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, run_state_machine_as_test

from agent_conformance._machine import ConformanceMachine, machine_for, rule
from trio_agents.testing._host import TrioHost


@asynccontextmanager
async def counter_service() -> AsyncGenerator[list[str], None]:
    log: list[str] = []
    try:
        yield log
    finally:
        log.append("closed")
        await trio.lowlevel.checkpoint()


class CounterMachine(ConformanceMachine):
    factory = staticmethod(counter_service)
    stats: ClassVar[dict[str, int]] = {"examples": 0, "checks": 0}
    histories: ClassVar[set[int]] = set()
    closings: ClassVar[list[list[str]]] = []

    def __init__(self) -> None:
        super().__init__(TrioHost())
        self.log: list[str] = []

    @initialize()
    def start(self) -> None:
        self.log = self._start_service(type(self).factory)

    @rule(fail=st.just(False))  # a direct call fails it
    def step(self, fail: bool) -> None:
        self.log.append("step")
        assert not fail, "the step failed"

    def _verify(self) -> None:
        assert "closed" not in self.log

    def _history(self) -> Hashable:
        return tuple(self.log)

    def _check_closing(self) -> None:
        self._stop_service()
        type(self).closings.append(list(self.log))


def fresh() -> type[CounterMachine]:
    machine = machine_for(CounterMachine, None)
    machine.closings = []
    return machine


def test_teardown_checks_the_closing_when_the_last_check_passed() -> None:
    machine = fresh()
    state = machine()
    state.start()
    state.check()
    state.step(fail=False)
    state.check()
    state.teardown()
    assert machine.closings == [["step", "closed"]]
    assert machine.stats == {"examples": 1, "checks": 2}
    # The fingerprint is of the history before closing.
    assert machine.histories == {hash(("step",))}


def test_a_failing_step_is_not_masked_by_the_closing_checks() -> None:
    machine = fresh()
    state = machine()
    state.start()
    state.check()
    with pytest.raises(AssertionError, match="the step failed"):
        state.step(fail=True)
    state.teardown()
    assert machine.closings == []
    assert state.host.closed


def test_a_step_counts_as_unchecked_until_the_next_check() -> None:
    machine = fresh()
    state = machine()
    state.start()
    state.check()
    state.step(fail=False)
    state.teardown()
    assert machine.closings == []


def test_a_step_keeps_its_name_and_signature_for_the_printed_program() -> None:
    assert CounterMachine.step.__name__ == "step"
    assert list(CounterMachine.step.__signature__.parameters) == ["self", "fail"]  # type: ignore[attr-defined]


def test_machine_for_makes_a_fresh_machine_with_the_target_as_its_factory() -> None:
    @asynccontextmanager
    async def other_service() -> AsyncGenerator[list[str], None]:
        log = ["other"]
        yield log
        log.append("closed")

    before = dict(CounterMachine.stats)
    machine = machine_for(CounterMachine, other_service)
    assert issubclass(machine, CounterMachine)
    assert machine.__name__ == "CounterMachine[other_service]"
    assert machine.factory is other_service
    assert machine.stats == {"examples": 0, "checks": 0}
    assert machine.stats is not CounterMachine.stats
    assert machine.histories is not CounterMachine.histories
    machine.closings = []
    run_state_machine_as_test(
        machine, settings=settings(max_examples=5, database=None, deadline=None)
    )
    assert machine.stats["examples"] >= 5
    assert CounterMachine.stats == before
    assert machine.closings
    assert all(log[0] == "other" and log[-1] == "closed" for log in machine.closings)
