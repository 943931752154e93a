"""`PeerAgent` is correct (issue 34, item 6): a minimal correct asyncio agent driven through
it (tests/support/minimal_asyncio_agent.py, a plain asyncio loop with no framework) passes
every property its features allow, so whatever the suite finds in an adapter built on it is
the framework's. The programs below are the ones the driver used to fail, each pinned."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

from agent_conformance import check_agent_conformance
from agent_conformance._features import GATES
from tests.support.minimal_asyncio_agent import factory, run_program

pytest.importorskip("trio_asyncio")

# The ci profile's budget, with a fixed seed: about 10 s of CPU.
CI = settings(
    max_examples=300,
    stateful_step_count=30,
    deadline=None,
    database=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_a_minimal_correct_asyncio_agent_passes_every_property() -> None:
    report = check_agent_conformance(factory, settings=CI, seed=34)
    assert report.passed
    # Only what approval and streams gate goes unchecked: the loop has no approver (nor a
    # step timeout, which skips nothing approval does not) and no `stream`.
    assert {prop for prop, _ in report.skipped} == {
        *GATES["approval"].skips,
        *GATES["stream"].skips,
    }


def test_A12_a_turn_cancelled_as_it_starts_keeps_its_prompt() -> None:
    """A TurnStarted listener's cancel lands before the turn's task first runs, so nothing
    of `run_turn` runs: the adapter learns of the prompt from `message_taken`."""
    assert run_program(factory, "arm(event='TurnStarted')", "send()", "send()") is None


def test_A12_a_step_cancelled_as_it_starts_keeps_its_claimed_context() -> None:
    """A StepStarted listener's cancel lands at `next_step`'s checkpoint, before it returns
    the claims: the adapter learnt of them from `message_taken`."""
    program = ("inject(role='str')", "arm(event='StepStarted')", "send()", "send()")
    assert run_program(factory, *program) is None


def test_A6_a_cancel_of_a_turn_still_unwinding_is_not_effective() -> None:
    """A StepEnded listener's cancel while a cancelled turn closes its step finds nothing
    left to cancel: one CancelRequested, for the first cancel only."""
    program = ("send()", "arm(event='StepEnded')", "cancel(cause='user', reason='stop')")
    assert run_program(factory, *program) is None
    queued = ("arm(event='StepEnded')", "send_several(count=2)")
    assert run_program(factory, *queued, "race_cancel_and_send(cancel_spawned_first=False)") is None


def test_A9_wait_idle_waits_for_the_turn_an_idle_listener_starts() -> None:
    """A StatusChanged(IDLE) listener sends: a parked waiter wakes, sees RUNNING and waits
    for the replacement turn."""
    program = ("arm(event='Idle')", "send()", "start_waiter()", "cancel_at_the_final_answer()")
    assert run_program(factory, *program) is None
