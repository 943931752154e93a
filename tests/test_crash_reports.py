"""A crash inside the implementation under test (a bug, not a broken rule) is reported as
itself, with its own traceback: never as `ExceptionGroup: Exceptions from Trio nursery`."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from agent_conformance._conformance import describe_failure, run_conformance
from trio_agents._cli import main
from trio_agents.testing import TrioHost

from .support.crashing import agent_whose_loop_crashes

CRASHING = "tests.support.crashing:agent_whose_loop_crashes"


def test_a_crash_in_a_service_is_raised_as_itself_by_the_rule_that_saw_it() -> None:
    host = TrioHost()

    async def service() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep_forever)
            await trio.sleep(1)
            raise LookupError("the bug")

    host.start(service)
    with pytest.raises(LookupError, match="the bug") as info:
        host.call(trio.sleep, 5)
    assert info.value.__traceback__ is not None
    assert info.tb.tb_frame is not None
    # The rule saw it; closing the host afterwards does not raise it a second time.
    host.close()


def test_a_crash_the_rules_did_not_see_is_raised_by_close() -> None:
    host = TrioHost()

    async def service() -> None:
        raise LookupError("the bug")

    host.start(service)
    with pytest.raises(LookupError, match="the bug"):
        host.close()


def test_the_report_of_a_crash_is_its_own_traceback() -> None:
    [report] = run_conformance(
        agent_whose_loop_crashes, factory_spec=CRASHING, seed=3, max_examples=50
    )
    assert isinstance(report.failure, KeyError), report.failure
    text = describe_failure(report.failure)
    assert text.startswith("the implementation crashed (not a violation of a rule):")
    assert "Traceback (most recent call last):" in text
    assert "registry[self.id] += 1  # the bug" in text
    assert "ExceptionGroup" not in text
    # The program is printed once, as the reproduction, not inside the traceback too.
    assert "state.teardown()" not in text
    assert report.program is not None


def test_the_command_prints_the_crash(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["conformance", "--target", CRASHING, "--seed", "3", "--max-examples", "50"])
    out = capsys.readouterr().out
    assert code == 1
    assert "agent machine: FAILED" in out
    assert "the implementation crashed" in out
    assert "KeyError" in out
    assert "Exceptions from Trio nursery" not in out


def test_a_call_stuck_in_a_shielded_wait_fails_instead_of_hanging() -> None:
    host = TrioHost(call_timeout=10)

    async def never_returns() -> None:
        with trio.CancelScope(shield=True):
            await trio.sleep_forever()

    with pytest.raises(TimeoutError, match="shielded from cancellation never ends"):
        host.call(never_returns)
    # The stuck task cannot be cancelled: closing abandons the run and says why.
    host.close_timeout = 0.2
    with pytest.raises(TimeoutError, match="could not finish"):
        host.close()
    assert host.closed


def _host_with_a_task_that_never_ends(clock: trio.abc.Clock | None) -> TrioHost:
    # close_timeout of an hour: only seeing that the run is dead can end the close soon.
    host = TrioHost(clock, close_timeout=3600.0)

    async def never_ends() -> None:
        with trio.CancelScope(shield=True):
            await trio.sleep_forever()

    host.start(never_ends)
    host.settle()
    return host


@pytest.mark.parametrize(
    "clock",
    [
        pytest.param(None, id="autojump"),
        pytest.param(trio.testing.MockClock(), id="moved-by-hand"),
    ],
)
def test_a_close_that_can_never_finish_is_given_up_at_once_on_a_mock_clock(
    clock: trio.abc.Clock | None,
) -> None:
    host = _host_with_a_task_that_never_ends(clock)
    with pytest.raises(TimeoutError, match="could not finish"):
        host.close()
    assert host.closed


def test_a_close_waiting_for_a_deadline_is_not_given_up() -> None:
    # Shielded, but with a deadline the autojump clock reaches: the run does finish.
    host = TrioHost(close_timeout=3600.0)
    finished: list[bool] = []

    async def bounded() -> None:
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await trio.sleep(30)
            finished.append(True)

    host.start(bounded)
    host.settle()
    host.close()
    assert finished == [True]
