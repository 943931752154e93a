"""The past-timeout probe's verdicts on each outcome a shell can report (D371), with a shell
double that reports a chosen outcome and runs nothing: no `armed` pid file is then written,
which is the case of a SIGTERM that came before the command wrote it."""

from __future__ import annotations

import pathlib

import pytest
import trio

from agent_conformance import ContractViolation
from agent_conformance._shell_probes import probe_past_timeout
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
    [(True, (0, None)), (True, (3, None)), (False, (None, "SIGKILL")), (False, (0, None))],
)
async def test_any_other_outcome_is_a_violation(
    tmp_path: pathlib.Path, deaf: bool, outcome: tuple[int | None, str | None]
) -> None:
    with pytest.raises(ContractViolation, match="past its timeout, reported"):
        await probe_past_timeout(Reporting(outcome), str(tmp_path), deaf=deaf, exit_code=3)
