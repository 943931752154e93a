"""The past-timeout probe's verdicts on each outcome a shell can report (D371), with a shell
double that reports a chosen outcome and runs nothing: no `armed` pid file is then written,
which is the case of a SIGTERM that came before the command wrote it."""

from __future__ import annotations

import pathlib
import re

import pytest
import trio

from agent_conformance import ContractViolation
from agent_conformance._shell_kill_probes import PAST_TIMEOUT_TRIES, probe_past_timeout
from trio_agents import ShellExecutor
from trio_agents._shell._output import StreamOutput
from trio_agents._shell._types import RunResult, ShellSpec

NOTHING = StreamOutput("", False, None, 0)


class Reporting(ShellExecutor):
    """Reports `outcome` (exit_code, signal) as a timed-out run, at once."""

    def __init__(self, outcome: tuple[int | None, str | None]) -> None:
        super().__init__(sandbox=None)
        self.outcome = outcome

    async def run(self, spec: ShellSpec) -> RunResult:
        await trio.lowlevel.checkpoint()
        code, signal = self.outcome
        return RunResult(code, signal, True, False, spec.timeout, NOTHING, NOTHING)


@pytest.mark.parametrize("outcome", [(None, "SIGTERM"), (None, "SIGKILL")])
async def test_a_deaf_command_without_its_pid_may_die_of_term_or_of_the_kill(
    tmp_path: pathlib.Path, outcome: tuple[int | None, str | None]
) -> None:
    # TERM before the trap (bash dies of it), or after the trap but before the pid file
    # (the deaf command is SIGKILLed after the grace): both are right.
    await probe_past_timeout(Reporting(outcome), str(tmp_path), deaf=True)


@pytest.mark.parametrize("outcome", [(None, "SIGTERM"), (3, None)])
async def test_a_trapping_command_without_its_pid_may_die_of_term_or_exit_by_its_trap(
    tmp_path: pathlib.Path, outcome: tuple[int | None, str | None]
) -> None:
    await probe_past_timeout(Reporting(outcome), str(tmp_path), deaf=False, exit_code=3)


@pytest.mark.parametrize(
    ("deaf", "outcome"),
    [(True, (0, None)), (True, (3, None)), (False, (0, None))],
)
async def test_any_other_outcome_is_a_violation(
    tmp_path: pathlib.Path, deaf: bool, outcome: tuple[int | None, str | None]
) -> None:
    with pytest.raises(ContractViolation, match="past its timeout, reported"):
        await probe_past_timeout(Reporting(outcome), str(tmp_path), deaf=deaf, exit_code=3)


async def test_a_sigkill_after_the_grace_of_a_command_that_never_started_is_no_finding(
    tmp_path: pathlib.Path,
) -> None:
    # A SIGKILL after the grace, before bash wrote its pid, with no mark of its trap either:
    # on a loaded machine the sandbox had not started the command by then, and the kill
    # was right; four such tries show nothing to judge (D506).
    shell = Starved(lasted=0.2, marked=frozenset(), pid=False)
    await probe_past_timeout(shell, str(tmp_path), deaf=False)
    assert shell.tries == PAST_TIMEOUT_TRIES


async def test_a_try_in_which_the_command_never_started_spares_the_others_verdict(
    tmp_path: pathlib.Path,
) -> None:
    # Three tries with the pid written and no sign of SIGTERM, one that never started: a
    # violation needs every try to show it (D393, D506).
    shell = Starved(lasted=0.2, marked=frozenset(), pid_on=frozenset({1, 2, 4}))
    await probe_past_timeout(shell, str(tmp_path), deaf=False)
    assert shell.tries == PAST_TIMEOUT_TRIES


class Starved(ShellExecutor):
    """Runs nothing; writes what the command would have written before its SIGKILL: its pid
    (the trap was set; not with `pid=False`, or only on the tries in `pid_on`) and, on the
    tries listed in `marked`, its trap's mark (it got SIGTERM). Each run lasts `lasted`
    seconds on the clock and reports a SIGKILL."""

    def __init__(
        self,
        lasted: float,
        marked: frozenset[int],
        *,
        pid: bool = True,
        pid_on: frozenset[int] | None = None,
    ) -> None:
        super().__init__(sandbox=None, grace=0.1)
        self.lasted = lasted
        self.marked = marked
        self.pid = pid
        self.pid_on = pid_on  # the tries that write the pid, when not all or none
        self.tries = 0

    async def run(self, spec: ShellSpec) -> RunResult:
        self.tries += 1
        pid_file = re.search(r"echo \$\$ > (\S+);", spec.command)
        mark = re.search(r"echo > (\S+);", spec.command)
        assert pid_file is not None, spec.command
        assert mark is not None, spec.command
        # Written synchronously: a worker thread would let the autojump clock leap past
        # the probe's bound.
        if self.pid if self.pid_on is None else self.tries in self.pid_on:
            _write(pid_file[1], "4242\n")
        if self.tries in self.marked:
            _write(mark[1], "\n")
        await trio.sleep(self.lasted)
        return RunResult(None, "SIGKILL", True, False, spec.timeout, NOTHING, NOTHING)


def _write(path: str, text: str) -> None:
    pathlib.Path(path).write_text(text)


async def test_a_sigkill_after_the_trap_began_and_the_grace_passed_is_right(
    tmp_path: pathlib.Path,
) -> None:
    # The command got SIGTERM (its trap left the mark) and was still running at the
    # grace's end: a loaded machine's outcome, and S1's (D393).
    shell = Starved(lasted=0.2, marked=frozenset({1}))
    await probe_past_timeout(shell, str(tmp_path), deaf=False, exit_code=3)
    assert shell.tries == 1


async def test_a_sigkill_with_no_sign_of_sigterm_is_tried_again(tmp_path: pathlib.Path) -> None:
    # Starved on the first two tries, its trap ran on the third: no violation.
    shell = Starved(lasted=0.2, marked=frozenset({3}))
    await probe_past_timeout(shell, str(tmp_path), deaf=False, exit_code=3)
    assert shell.tries == 3


async def test_a_sigkill_with_no_sign_of_sigterm_in_every_try_is_a_violation(
    tmp_path: pathlib.Path,
) -> None:
    shell = Starved(lasted=0.2, marked=frozenset())
    with pytest.raises(ContractViolation, match=r"never ran its SIGTERM trap \(in 4 of 4 tries\)"):
        await probe_past_timeout(shell, str(tmp_path), deaf=False, exit_code=3)
    assert shell.tries == PAST_TIMEOUT_TRIES


async def test_a_sigkill_before_the_grace_passed_is_a_violation_at_once(
    tmp_path: pathlib.Path,
) -> None:
    # Marked, so SIGTERM came; but the kill came before timeout + grace: no grace was given.
    shell = Starved(lasted=0.0, marked=frozenset({1}))
    with pytest.raises(ContractViolation, match="before its timeout"):
        await probe_past_timeout(shell, str(tmp_path), deaf=False, exit_code=3)
    assert shell.tries == 1
