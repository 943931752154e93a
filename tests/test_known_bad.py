"""Every seeded defect of tests/support/known_bad but the shell machine's
(tests/test_known_bad_shell.py) is caught, on every run (derandomised), by
the property docs/conformance.md names for it: a ContractViolation, not a crash."""

from __future__ import annotations

import pytest
from hypothesis.stateful import run_state_machine_as_test

from agent_conformance import AgentMachine, check_agent_conformance

from .support.known_bad import Seeded
from .support.known_bad._agent import send_dropped_right_after_cancel
from .support.known_bad.catching import (
    BUDGET,
    check_caught,
    no_local_constants,
    params,
    the_violation,
)

__all__ = ["no_local_constants"]  # the autouse fixture, found here by pytest


# The shell and MCP machines' are tests/test_known_bad_shell.py's (D524).
@pytest.mark.parametrize("seeded", params(lambda machine: machine not in ("shell", "mcp")))
def test_the_suite_catches_a_seeded_defect(seeded: Seeded) -> None:
    check_caught(seeded)


def test_schedule_exploration_finds_a_same_batch_race_the_fixed_schedule_misses() -> None:
    # Each operation alone in its own rule, under the default schedule: the defect stays
    # hidden, however long we look.
    class FixedSchedule(AgentMachine):
        explore_schedules = False
        factory = staticmethod(send_dropped_right_after_cancel)

    run_state_machine_as_test(FixedSchedule, settings=BUDGET)
    # With cancel and send racing in one batch, in an order the drawn scheduler seed picks,
    # it is found.
    with pytest.raises(Exception) as info:  # noqa: PT011 - checked below
        check_agent_conformance(send_dropped_right_after_cancel, settings=BUDGET)
    the_violation(info.value)
    program = "\n".join(getattr(info.value, "__notes__", []))
    assert "race_cancel_and_send" in program
