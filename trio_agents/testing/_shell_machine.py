"""The shell state machine: random programs of background jobs started, read, killed and
finished by two agents through the `bash` tools, with plugin reloads and owners closing and
coming back, on real processes.

Checked after every rule, against the process table and a model of who owns what:

- the access rule (S3): a job's output and its kill belong to its owner alone, also after a
  reload of the plugin, and a refused kill leaves the job running;
- no process outlives its owner (S4): once a job has ended, or its owner has closed, no
  member of its process group is alive (read from /proc, not from the executor);
- every job ends in exactly one terminal outcome: killed when (and only when) someone killed
  it before it could finish, completed with its own exit code otherwise, and never changes;
- notices: at most one per job, only for a job that completed by itself, only to its owner;
  and one is certainly recorded in the owner's next step when nothing (a reload, the owner
  closing) could have dropped it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import AsyncGenerator, Hashable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import trio
from hypothesis import settings as Settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, run_state_machine_as_test

from .._errors import SessionNotFoundError
from .._registry import AgentHandle
from .._runtime import Runtime, open_runtime
from .._shell import RunResult, ShellExecutor
from .._shell_group import live_group_members
from .._shell_tools import BashTools
from .._store import MemoryStore
from .._tool import ToolContext, ToolResult
from ._host import TrioHost, WallClock
from ._machine import ConformanceMachine, machine_for, rule
from ._properties import Property
from ._scripted import ScriptedModel
from ._targets import ShellFactory

__all__ = [
    "PROPERTIES",
    "ShellFactory",
    "ShellMachine",
    "check_shell_conformance",
    "shell_settings",
]

PROPERTIES: tuple[Property, ...] = ()
"""The properties this machine checks, each of one rule of the contract."""

AGENTS = ("A", "B")
Kind = Literal["quick", "gated", "stubborn"]
KINDS: tuple[Kind, ...] = ("quick", "gated", "stubborn")
NOTICE = re.compile(r"background job (\S+) finished")


def builtin_shell_factory(cwd: str) -> ShellExecutor:
    # A short grace keeps the SIGKILL escalation of TERM-ignoring jobs cheap.
    return ShellExecutor(cwd=cwd, grace=0.1)


def shell_settings(base: Settings) -> Settings:
    """Real processes cost real time: a third of the examples of `base`, shorter programs."""
    return Settings(
        base,
        max_examples=max(10, base.max_examples // 3),
        stateful_step_count=min(base.stateful_step_count, 20),
    )


@dataclass
class _Job:
    owner: str
    kind: Kind
    code: int
    incarnation: int  # of the owner, when it started the job
    lines: set[str]  # every line the job prints if it runs to the end
    gate: str  # the FIFO a gated or stubborn job reads; writing to it lets the job end
    killed: bool = False  # a kill (tool or owner close) was issued while it could run
    reloaded: bool = False  # the plugin was reloaded while it ran: a notice may be lost
    seen: set[str] = field(default_factory=set[str])
    result: RunResult | None = None


class ShellMachine(ConformanceMachine):
    """Subclass and set `factory` to check another executor.

    What a subclass's rules and checks can use:

    host: the TrioHost the runtime runs in, on a WallClock (the jobs are real processes).
    dir: the example's temporary directory: the executor's cwd, the jobs' FIFOs.
    bash: the BashTools plugin, loaded in the runtime; the agents use its tools.
    rt: the runtime (None until `start`).
    handles: the handles of the agents `A` and `B` while they are open.
    incarnation: how many times each agent was opened.
    jobs: the model of every job started, by job id.
    done_calls: how many job-done notices the executor sent, per job id.
    trace: what the rules did, for the history fingerprint.

    stats: counts examples and checked steps; give a subclass its own dict to count one run.
    histories: fingerprints of the distinct rule traces produced.
    """

    factory: ClassVar[ShellFactory] = staticmethod(builtin_shell_factory)
    stats: ClassVar[dict[str, int]] = {"examples": 0, "checks": 0}
    histories: ClassVar[set[int]] = set()

    def __init__(self) -> None:
        super().__init__(TrioHost(WallClock(), call_timeout=60.0, stall_timeout=60.0))
        self.dir = tempfile.mkdtemp(prefix="trio-agents-shell-machine-")
        self.bash = BashTools()
        self.rt: Runtime | None = None
        self.handles: dict[str, AgentHandle] = {}
        self.incarnation: dict[str, int] = dict.fromkeys(AGENTS, 0)
        self.jobs: dict[str, _Job] = {}
        self.done_calls: dict[str, int] = {}
        self.trace: list[str] = []

    # -- runtime ----------------------------------------------------------------------------

    @initialize()
    def start(self) -> None:
        """Open the runtime with the executor under test, and the agents `A` and `B`."""
        self.rt = self._start_service(self._runtime)
        for name in AGENTS:
            self._open(name)

    @asynccontextmanager
    async def _runtime(self) -> AsyncGenerator[Runtime, None]:
        async with open_runtime(MemoryStore(), shell=type(self).factory(self.dir)) as rt:
            rt.shell.on_job_done(self._count_done)
            await rt.load(self.bash)
            yield rt

    def _count_done(self, job_id: str, owner: str | None, result: RunResult) -> None:
        self.done_calls[job_id] = self.done_calls.get(job_id, 0) + 1

    def _open(self, name: str) -> None:
        self.handles[name] = self.host.call(self._open_agent, name)
        self.incarnation[name] += 1

    async def _open_agent(self, name: str) -> AgentHandle:
        """Resume the agent's session (stored once it ran a turn), or create it."""
        assert self.rt is not None
        registry = self.rt.agents
        try:
            return await registry.resume(name, model=ScriptedModel(), tools=self.bash.tools)
        except SessionNotFoundError:
            return await registry.create(
                model=ScriptedModel(), tools=self.bash.tools, session_id=name
            )

    def _history(self) -> Hashable:
        return tuple(self.trace)

    def _check_closing(self) -> None:
        assert self._stop is not None
        self.host.run_sync(self._stop.set)
        # Real processes take real time to die: wait for the runtime's close itself.
        self.host.call(self._stopped.wait)
        self.handles.clear()
        self._check_processes(everything_closed=True)

    def _after_close(self) -> None:
        # A failing implementation may have left processes behind; this suite must not.
        for job_id in self.jobs:
            with contextlib.suppress(Exception):
                os.killpg(self.shell.pgid(job_id), signal.SIGKILL)
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- helpers ------------------------------------------------------------------------------

    @property
    def shell(self) -> ShellExecutor:
        """The executor under test (`rt.shell`)."""
        assert self.rt is not None
        return self.rt.shell

    def _call_tool(self, name: str, caller: str, **arguments: object) -> ToolResult:
        tool = next(t for t in self.bash.tools if t.name == name)
        context = ToolContext(caller, f"call-{len(self.trace)}", 1, 1)
        result = self.host.call(lambda: tool(arguments, context))
        assert isinstance(result, ToolResult)
        return result

    def _command(self, number: int, kind: Kind, code: int, gate: str) -> tuple[str, set[str]]:
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
        armed = os.path.join(self.dir, f"armed-{number}")
        stubborn = f"bash -c 'trap \"\" TERM; echo > {armed}; {wait}' &"
        until_armed = f"until [ -s {armed} ]; do sleep 0.01; done"
        return f"{stubborn} {until_armed}; echo out-{number}; wait; exit {code}", {f"out-{number}"}

    def _owned_running(self, caller: str) -> list[str]:
        return [j for j, job in self.jobs.items() if job.owner == caller and job.result is None]

    # -- rules --------------------------------------------------------------------------------

    @rule(caller=st.sampled_from(AGENTS), kind=st.sampled_from(KINDS), code=st.integers(0, 3))
    def start_job(self, caller: str, kind: Kind, code: int) -> None:
        """`caller` starts a background job with `bash`: quick (it ends within the rule),
        gated (it waits for its FIFO) or stubborn (also a grandchild that ignores SIGTERM)."""
        if caller not in self.handles:
            return
        number = len(self.jobs) + 1
        gate = os.path.join(self.dir, f"gate-{number}")
        os.mkfifo(gate)
        command, lines = self._command(number, kind, code, gate)
        started = self._call_tool(
            "bash", caller, command=command, description="a job", run_in_background=True
        )
        assert not started.is_error, started.content
        job_id = started.content.rsplit(" ", 1)[-1]
        assert job_id not in self.jobs, f"job id {job_id!r} was handed out twice"
        assert self.shell.owner_of(job_id) == caller
        self.jobs[job_id] = _Job(caller, kind, code, self.incarnation[caller], lines, gate)
        # What a later rule does to a job must not depend on how fast the machine is (or
        # Hypothesis could not replay and shrink a failure): a quick job has ended before
        # the next rule, a waiting one has started everything it will start.
        if kind == "quick":
            self.host.call(self.shell.wait, job_id)
            self._observe_end(job_id)
        else:
            self.host.call(self._started, job_id, f"out-{number}")
        self.trace.append(f"start {caller} {kind}")

    async def _started(self, job_id: str, marker: str) -> None:
        with trio.move_on_after(30) as scope:
            while marker not in self.shell.read_output(job_id, (0, 0)).text:  # noqa: ASYNC110
                await trio.sleep(0.002)
        assert not scope.cancelled_caught, f"{job_id} never printed {marker!r}"

    @precondition(lambda self: bool(self.jobs))
    @rule(caller=st.sampled_from(AGENTS), data=st.data())
    def read(self, caller: str, data: st.DataObject) -> None:
        """`caller` reads a job with `bash_output`: refused unless it owns the job; reads
        never repeat a line, and a job that completed has shown all of its output."""
        job_id = data.draw(st.sampled_from(sorted(self.jobs)), label="job")
        job = self.jobs[job_id]
        answer = self._call_tool("bash_output", caller, job_id=job_id)
        if job.owner != caller:
            assert answer.is_error, f"{caller} read {job.owner}'s job {job_id}: {answer}"
            assert answer.content == f"job {job_id} belongs to another session"
            self.trace.append("read refused")
            return
        assert not answer.is_error, answer.content
        *body, status = answer.content.split("\n")
        assert status.startswith("[status: "), answer.content
        lines = {line for line in body if line not in ("", "[stderr]", "(no new output)")}
        repeated = lines & job.seen
        assert not repeated, f"consuming reads of {job_id} repeated {sorted(repeated)}"
        assert lines <= job.lines, f"{job_id} printed {sorted(lines - job.lines)}"
        job.seen |= lines
        if status != "[status: running]":
            self._observe_end(job_id)
            if not job.killed and job.result is not None and not job.result.cancelled:
                assert job.seen == job.lines, (
                    f"{job_id} completed but its reads gave {sorted(job.seen)}, "
                    f"not {sorted(job.lines)}"
                )
        self.trace.append(f"read {status}")

    @precondition(lambda self: bool(self.jobs))
    @rule(caller=st.sampled_from(AGENTS), data=st.data())
    def kill(self, caller: str, data: st.DataObject) -> None:
        """`caller` kills a job with `bash_kill`: refused unless it owns the job (and the job
        keeps running then); otherwise killed, or reported as already finished."""
        job_id = data.draw(st.sampled_from(sorted(self.jobs)), label="job")
        job = self.jobs[job_id]
        was_running = self.shell.result(job_id) is None
        answer = self._call_tool("bash_kill", caller, job_id=job_id)
        if job.owner != caller:
            assert answer.is_error, f"{caller} killed {job.owner}'s job {job_id}: {answer}"
            if was_running and job.kind != "quick":
                assert self.shell.result(job_id) is None, f"a refused kill ended {job_id}"
            self.trace.append("kill refused")
            return
        assert not answer.is_error, answer.content
        if answer.content.startswith("killed background job"):
            assert was_running, f"{job_id} had ended, yet bash_kill says it killed it"
            job.killed = True
        else:
            assert answer.content.startswith(f"job {job_id} had already finished"), answer
        self._observe_end(job_id)
        self.trace.append("kill")

    def _gated_running(self) -> list[str]:
        return sorted(
            j for j, job in self.jobs.items() if job.kind != "quick" and job.result is None
        )

    @precondition(lambda self: bool(self._gated_running()))
    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        """Open a waiting job's gate and wait for it to end by itself."""
        waiting = self._gated_running()
        job_id = data.draw(st.sampled_from(waiting), label="job")
        _open_gate(self.jobs[job_id].gate)
        self.host.call(self.shell.wait, job_id)
        self._observe_end(job_id)
        self.trace.append("finish")

    @rule()
    def reload_plugin(self) -> None:
        """Reload the bash tools; a notice of a job running meanwhile may be lost."""
        assert self.rt is not None
        for job_id, job in self.jobs.items():
            if self.shell.result(job_id) is None:
                job.reloaded = True
        self.host.call(self.rt.reload, self.bash)
        self.trace.append("reload")

    @rule(name=st.sampled_from(AGENTS))
    def close_owner(self, name: str) -> None:
        """Close the agent `name`: its running jobs are killed and reaped."""
        handle = self.handles.pop(name, None)
        if handle is None:
            return
        running = self._owned_running(name)
        for job_id in running:
            if self.shell.result(job_id) is None:
                self.jobs[job_id].killed = True
        self.host.call(handle.aclose)
        for job_id in running:
            self._observe_end(job_id)
        self.trace.append(f"close {name}")

    @rule(name=st.sampled_from(AGENTS))
    def reopen_owner(self, name: str) -> None:
        """Open the closed agent `name` again: resume its session, or create it if it was
        never stored."""
        if name in self.handles:
            return
        self._open(name)
        self.trace.append(f"reopen {name}")

    @rule(name=st.sampled_from(AGENTS))
    def owner_step(self, name: str) -> None:
        """The owner runs a turn: every notice it could not have missed is in its records."""
        handle = self.handles.get(name)
        if handle is None:
            return
        expected = {
            j
            for j, job in self.jobs.items()
            if job.owner == name
            and job.incarnation == self.incarnation[name]
            and not job.reloaded
            and (result := self.shell.result(j)) is not None
            and not result.cancelled
        }
        agent = handle.agent
        self.host.run_sync(agent.send, "any news?")
        self.host.call(agent.wait_idle)
        noticed = self._notices(name)
        missing = expected - set(noticed)
        assert not missing, f"{name} never got the notice of {sorted(missing)}"
        self.trace.append(f"step {name} {len(noticed)}")

    def _notices(self, name: str) -> list[str]:
        handle = self.handles[name]
        found: list[str] = []
        for record in handle.agent.session.records:
            if record.type == "context/message":
                match = NOTICE.match(str(record.data["content"]))
                if match:
                    found.append(match.group(1))
        return found

    def _observe_end(self, job_id: str) -> None:
        """Record the job's terminal outcome the first time; it may never change after."""
        result = self.shell.result(job_id)
        assert result is not None, f"{job_id} reported an end but has no result"
        job = self.jobs[job_id]
        if job.result is None:
            job.result = result
        assert result == job.result, f"{job_id} changed outcome: {job.result} -> {result}"

    # -- invariants ---------------------------------------------------------------------------

    def _verify(self) -> None:
        """No process of an ended job, or of a closed owner's job, is alive; every outcome
        is the one expected and never changes; notices are at most one per job, only for a
        job that completed by itself, and only to its owner."""
        self._check_processes(everything_closed=False)
        self._check_outcomes()
        self._check_notices()

    def _check_processes(self, *, everything_closed: bool) -> None:
        for job_id, job in self.jobs.items():
            result = job.result or (None if everything_closed else self.shell.result(job_id))
            owner_gone = (
                job.owner not in self.handles or job.incarnation != self.incarnation[job.owner]
            )
            if everything_closed or owner_gone or result is not None:
                pgid = self.shell.pgid(job_id)
                survivors = live_group_members(pgid)
                assert not survivors, (
                    f"{job_id} (owner {job.owner}, ended={result is not None}, "
                    f"owner closed={owner_gone}) left processes {survivors} in group {pgid}"
                )
            if owner_gone:
                assert self.shell.result(job_id) is not None, (
                    f"{job_id} still runs after its owner {job.owner} closed"
                )

    def _check_outcomes(self) -> None:
        for job_id, job in self.jobs.items():
            result = self.shell.result(job_id)
            if result is None:
                assert job.result is None, f"{job_id} ended, then ran again"
                continue
            if job.result is not None:
                assert result == job.result, f"{job_id} changed outcome"
            if result.cancelled:
                assert job.killed, f"{job_id} reports killed, but nobody killed it: {result}"
            else:
                # A killed job was still running (quick jobs end within their start rule;
                # the others cannot end before their gate opens): it must report killed.
                assert not job.killed, f"{job_id} was killed but reports {result}"
                assert (result.exit_code, result.signal) == (job.code, None), (
                    f"{job_id} completed with {result.exit_code}/{result.signal}, "
                    f"expected exit code {job.code}"
                )

    def _check_notices(self) -> None:
        for job_id, calls in self.done_calls.items():
            assert calls <= 1, f"{job_id}: {calls} job-done notices"
            result = self.shell.result(job_id)
            assert result is not None, f"{job_id}: a job-done notice while it runs"
            assert not result.cancelled, f"{job_id}: a job-done notice, but it was killed"
        for name in self.handles:
            noticed = self._notices(name)
            duplicates = {j for j in noticed if noticed.count(j) > 1}
            assert not duplicates, f"{name} got the notice of {sorted(duplicates)} twice"
            for job_id in noticed:
                job = self.jobs.get(job_id)
                assert job is not None, f"{name} got a notice of an unknown job {job_id}"
                assert job.owner == name, f"{name} got the notice of {job.owner}'s {job_id}"


def _open_gate(fifo: str, timeout: float = 30.0) -> None:
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


def check_shell_conformance(
    factory: ShellFactory | None = None, *, settings: Settings | None = None
) -> None:
    """Run the shell machine against executors made by `factory` (default: ShellExecutor).

    The jobs are real processes, run in temporary directories. Raises the shrunk failing
    program's error on the first violation. Plain function, no pytest needed.
    """
    run_state_machine_as_test(machine_for(ShellMachine, factory), settings=settings)
