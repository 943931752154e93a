"""What the shell machine knows of its jobs: the model of each, the commands they run, and
the checks after every step that compare the executor, its notices and the process table
with that model (rules S1, S2, S4)."""

from __future__ import annotations

import errno
import os
import re
import time
from dataclasses import dataclass, field
from typing import Literal

from trio_agents import AgentHandle, RunResult, ShellExecutor

from ._procfs import live_groups
from ._shell_properties import (
    GROUP_KILLED,
    JOB_OUTCOME,
    NOTICE_ONLY_TO_OWNER,
    OWNER_CLOSE_REAPS,
    OWNER_TOKEN_KEPT,
)

__all__ = [
    "AGENTS",
    "CALLERS",
    "KINDS",
    "PROBES",
    "TOKENS",
    "Job",
    "JobChecks",
    "Kind",
    "Probe",
    "job_command",
    "open_gate",
]

AGENTS = ("A", "B")
# The empty string is an owner like any other (S3): a caller of the tools with no agent.
CALLERS = (*AGENTS, "")
# Owners of jobs started on the executor directly: nobody, the empty string, and a token
# no caller has, which must come back exactly as given (S2).
TOKENS: tuple[str | None, ...] = (None, "", "Tok en/Ü")
Probe = Literal[
    "environment", "output", "output-at-cap", "past-timeout", "exit-0-on-term", "deaf",
    "bash-results", "cancelled",
]  # fmt: skip
PROBES: tuple[Probe, ...] = (
    "environment",
    "bash-results",
    "output",
    "output-at-cap",
    "cancelled",
    "past-timeout",
    "exit-0-on-term",
    "deaf",
)
PAST_TIMEOUT_PROBES: frozenset[Probe] = frozenset(
    {"past-timeout", "exit-0-on-term", "deaf", "cancelled"}
)
"""The probes that outlive their timeout or their caller's cancel: each costs the grace
(and the timeout), so an example runs one of them at most."""
Kind = Literal["quick", "gated", "stubborn"]
KINDS: tuple[Kind, ...] = ("quick", "gated", "stubborn")
NOTICE = re.compile(r"background job (\S+) finished")


@dataclass
class Job:
    """The machine's model of one background job."""

    owner: str | None
    kind: Kind
    code: int
    incarnation: int  # of the owner, when it started the job
    lines: set[str]  # every line the job prints if it runs to the end
    gate: str  # the FIFO a gated or stubborn job reads; writing to it lets the job end
    killed: bool = False  # a kill (tool or owner close) was issued while it could run
    reloaded: bool = False  # the plugin was reloaded while it ran: a notice may be lost
    reaped: bool = False  # its group was seen empty once it was over: it stays empty
    seen: set[str] = field(default_factory=set[str])
    result: RunResult | None = None


def job_command(
    workdir: str, number: int, kind: Kind, code: int, gate: str
) -> tuple[str, set[str]]:
    """The command of job `number` and every line it prints if it runs to the end: quick (it
    ends at once), gated (it waits for a line on the FIFO `gate`), or stubborn (gated, and a
    grandchild that ignores SIGTERM; armed once `out-N` is printed)."""
    # A builtin read of a FIFO: the job waits without spawning anything.
    wait = f"read -r _ < {gate}"
    if kind == "quick":
        return f"echo out-{number}; echo err-{number} >&2; exit {code}", {
            f"out-{number}",
            f"err-{number}",
        }
    if kind == "gated":
        return f"echo out-{number}; {wait}; echo end-{number}; exit {code}", {
            f"out-{number}",
            f"end-{number}",
        }
    # The grandchild ignores SIGTERM: only SIGKILL ends it early. It says when it is
    # armed, and the leader prints `out-N` only after that.
    armed = os.path.join(workdir, f"armed-{number}")
    stubborn = f"bash -c 'trap \"\" TERM; echo > {armed}; {wait}' &"
    until_armed = f"until [ -s {armed} ]; do sleep 0.01; done"
    return f"{stubborn} {until_armed}; echo out-{number}; wait; exit {code}", {f"out-{number}"}


class JobChecks:
    """The machine's checks of its jobs, after every step and at the close (a mixin of
    `ShellMachine`, which sets these attributes)."""

    jobs: dict[str, Job]
    handles: dict[str, AgentHandle]
    incarnation: dict[str, int]
    done_calls: dict[str, int]
    done_owners: dict[str, str | None]

    @property
    def shell(self) -> ShellExecutor:
        """The executor under test."""
        raise NotImplementedError

    def _owner_is_live(self, job: Job) -> bool:
        """Whether the agent that started the job is open still (the same incarnation)."""
        return (
            job.owner in self.handles
            and job.owner in self.incarnation
            and job.incarnation == self.incarnation[job.owner]
        )

    def _notices(self, name: str) -> list[str]:
        handle = self.handles[name]
        found: list[str] = []
        for record in handle.agent.session.records:
            if record.type == "context/message":
                match = NOTICE.match(str(record.data["content"]))
                if match:
                    found.append(match.group(1))
        return found

    def _check_owners(self) -> None:
        for job_id, job in self.jobs.items():
            token = self.shell.owner_of(job_id)
            if token != job.owner:
                OWNER_TOKEN_KEPT.fail(
                    f"{job_id} was started with the owner token {job.owner!r}; "
                    f"now owner_of gives {token!r}"
                )
        unknown = f"bash-{len(self.jobs) + 1000}"
        token = self.shell.owner_of(unknown)
        OWNER_TOKEN_KEPT.check(
            token is None, f"owner_of({unknown!r}), a job never started, is {token!r}"
        )

    def _check_processes(self, *, everything_closed: bool) -> None:
        """Once a job has ended, its owner has closed, or the executor has, no process of
        its group is alive: whoever killed it (the job's own end, a kill, a close) killed
        the whole group (S1); and a job whose owner closed has ended (S4)."""
        groups: dict[int, list[int]] | None = None
        for job_id, job in self.jobs.items():
            result = job.result or (None if everything_closed else self.shell.result(job_id))
            owner_gone = job.owner in AGENTS and not self._owner_is_live(job)
            # An empty group cannot fill again (a process can only join a group that has a
            # member), so each over job's group is read from /proc until it is seen empty.
            if (everything_closed or owner_gone or result is not None) and not job.reaped:
                if groups is None:
                    groups = live_groups()
                pgid = self.shell.pgid(job_id)
                survivors = groups.get(pgid, [])
                if survivors:
                    # SIGKILLed processes die once the kernel runs them, which a loaded
                    # machine may not do before the executor's bounded wait ends (D399).
                    survivors = _still_alive(pgid)
                    groups = None
                job.reaped = not survivors
                if survivors:
                    cause = (
                        "the executor closed"
                        if everything_closed
                        else f"its owner {job.owner} closed"
                        if owner_gone
                        else "it was killed"
                        if job.killed
                        else "it ended"
                    )
                    GROUP_KILLED.fail(
                        f"{job_id} (owner {job.owner!r}) was over, {cause}, yet processes "
                        f"{survivors} of its group {pgid} are alive"
                    )
            if owner_gone and self.shell.result(job_id) is None:
                OWNER_CLOSE_REAPS.fail(f"{job_id} still runs after its owner {job.owner} closed")

    def _check_outcomes(self) -> None:
        for job_id, job in self.jobs.items():
            result = self.shell.result(job_id)
            if result is None:
                JOB_OUTCOME.check(job.result is None, f"{job_id} ended, then ran again")
                continue
            if job.result is not None:
                JOB_OUTCOME.check(result == job.result, f"{job_id} changed outcome")
            if result.cancelled and not job.killed:
                JOB_OUTCOME.fail(f"{job_id} reports killed, but nobody killed it: {result}")
            # A killed job was still running (quick jobs end within their start rule; the
            # others cannot end before their gate opens): it must report killed.
            if not result.cancelled and job.killed:
                JOB_OUTCOME.fail(f"{job_id} was killed while it ran, but reports {result}")
            if not result.cancelled and (result.exit_code, result.signal) != (job.code, None):
                JOB_OUTCOME.fail(
                    f"{job_id} completed with exit_code={result.exit_code} "
                    f"signal={result.signal}, not its own exit code {job.code}"
                )

    def _check_notices(self) -> None:
        for job_id, calls in self.done_calls.items():
            NOTICE_ONLY_TO_OWNER.check(calls <= 1, f"{job_id} got {calls} job-done notices")
            result = self.shell.result(job_id)
            NOTICE_ONLY_TO_OWNER.check(
                result is not None, f"a job-done notice of {job_id} while it runs"
            )
            NOTICE_ONLY_TO_OWNER.check(
                result is None or not result.cancelled,
                f"a job-done notice of {job_id}, which was killed",
            )
            owner = self.done_owners[job_id]
            NOTICE_ONLY_TO_OWNER.check(
                owner == self.jobs[job_id].owner,
                f"the job-done notice of {job_id} names the owner {owner!r}, not "
                f"{self.jobs[job_id].owner!r}",
            )
        for name in self.handles:
            noticed = self._notices(name)
            duplicates = {j for j in noticed if noticed.count(j) > 1}
            NOTICE_ONLY_TO_OWNER.check(
                not duplicates, f"{name} got the notice of {sorted(duplicates)} twice"
            )
            for job_id in noticed:
                job = self.jobs.get(job_id)
                NOTICE_ONLY_TO_OWNER.check(
                    job is not None, f"{name} got a notice of an unknown job {job_id}"
                )
                assert job is not None
                NOTICE_ONLY_TO_OWNER.check(
                    job.owner == name, f"{name} got the notice of {job.owner!r}'s {job_id}"
                )


def open_gate(fifo: str, timeout: float = 30.0) -> None:
    """Write a line to the job's FIFO once the job has it open for reading (a job just
    started may not have got there yet)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO or time.monotonic() > deadline:
                raise AssertionError(f"the job waiting on {fifo} never opened it") from exc
            time.sleep(0.001)
            continue
        try:
            os.write(fd, b"go\n")
        finally:
            os.close(fd)
        return


# Real seconds a killed group's members may take to leave the process table after the check
# first sees them (a SIGKILLed process needs the CPU once more to die).
GONE_WITHIN = 5.0


def _still_alive(pgid: int) -> list[int]:
    """The members of group `pgid` still alive after up to GONE_WITHIN seconds."""
    deadline = time.monotonic() + GONE_WITHIN
    survivors = live_groups().get(pgid, [])
    while survivors and time.monotonic() < deadline:
        time.sleep(0.01)
        survivors = live_groups().get(pgid, [])
    return survivors
