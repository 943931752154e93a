"""The shell state machine: random programs of background jobs started, read, killed and
finished through the `bash` tools by two agents and a caller whose id is the empty string
(and started on the executor directly, with tokens of their own or None), with plugin
reloads and owners closing and coming back, on real processes; and foreground probes of what
a command runs with, what it keeps of its output, and how it ends past its timeout.

Each check is a named property of a rule of the contract (`_shell_properties`):

- S1: a command's environment has no credential-like name, its stdin is closed; a command
  past its timeout (one that ignores SIGTERM too) ends within the grace, its whole group
  with it, and its outcome's fields say what happened; once a job is over (it ended, was
  killed, its owner or the executor closed) no member of its process group is alive (read
  from /proc, not from the executor); every job has one outcome, killed
  when (and only when) someone killed it while it ran, its own exit code otherwise;
- S2: `owner_of` returns the token a job was started with, always, and None for an unknown
  job;
- S3: a job's output and its kill belong to its owner alone (the empty string is an owner,
  None is nobody's), also after a reload of the plugin, and a refused kill leaves the job
  running;
- S4: notices, at most one per job, only for a job that completed by itself, only to its
  owner, and certainly in the owner's next step when nothing (a reload, the owner closing)
  could have dropped it; once its owner has closed, or the executor has, no job runs, and
  the executor's close sends no notice;
- S5: output past the cap keeps its tail and spills all of it to a private file; reads are
  consuming and, for a job that completed, show all it printed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Hashable
from contextlib import asynccontextmanager
from typing import ClassVar, cast

import trio
from hypothesis import settings as Settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition

from trio_agents import (
    AgentHandle,
    BashTools,
    MemoryStore,
    RunResult,
    Runtime,
    SandboxPolicy,
    SessionNotFoundError,
    ShellExecutor,
    ShellRequest,
    ToolContext,
    ToolResult,
    open_runtime,
)
from trio_agents.testing import ScriptedModel, TrioHost, WallClock

from ._machine import ConformanceMachine, rule
from ._shell_jobs import (
    AGENTS,
    CALLERS,
    KINDS,
    PAST_TIMEOUT_PROBES,
    PROBES,
    TOKENS,
    Job,
    JobChecks,
    Kind,
    Probe,
    job_command,
    open_gate,
)
from ._shell_kill_probes import probe_cancelled, probe_past_timeout
from ._shell_probes import (
    PASSED,
    PROBE_SET,
    probe_bash_results,
    probe_environment,
    probe_output,
    secret_environment,
)
from ._shell_properties import (
    BASH_WORKDIR,
    EXECUTOR_CLOSE_REAPS,
    GROUP_KILLED,
    JOB_OUTCOME,
    NON_OWNER_REFUSED,
    NOTICE_DELIVERED,
    NOTICE_ONLY_TO_OWNER,
    OWNER_CLOSE_REAPS,
    OWNER_SERVED,
    OWNER_TOKEN_KEPT,
    READS_CONSUME_OUTPUT,
    SPEC_RESOLVED,
)
from ._shell_properties import PROPERTIES as PROPERTIES
from ._shell_spill_probe import probe_spill_directories
from ._targets import ShellFactory

__all__ = [
    "PROPERTIES",
    "ShellFactory",
    "ShellMachine",
    "shell_settings",
]

KILL_MARGIN = 5.0  # seconds a kill may take past the grace on a loaded machine (D499)


VARIANTS = "conformance_variants"
"""The attribute of a shell factory naming other configurations of its executor, as a
mapping of a name to a factory of the same signature: the machine draws the factory or one
of them per example (D423)."""


def builtin_shell_factory(cwd: str) -> ShellExecutor:
    # A short grace keeps the SIGKILL escalation of TERM-ignoring jobs cheap, a small cap
    # the output probe (D78). Sandboxed where the machine can, else not: the suite's main
    # command runs on fresh machines without bubblewrap, and its report says which (D134).
    # A credential passed explicitly, and a variable set, which must reach commands (S8).
    return _builtin(cwd, SandboxPolicy(allow_unsandboxed=True))


def builtin_unsandboxed(cwd: str) -> ShellExecutor:
    # `sandbox=None`, a setting users pass: its processes outlive their leader, so the
    # grace is the whole group's (S1), which a sandbox's namespace ends at once (D132).
    return _builtin(cwd, None)


def _builtin(cwd: str, sandbox: SandboxPolicy | None) -> ShellExecutor:
    return ShellExecutor(
        cwd=cwd,
        grace=0.1,
        max_output_bytes=16_000,
        pass_env=(PASSED[0],),
        env={PROBE_SET[0]: PROBE_SET[1]},
        sandbox=sandbox,
    )


builtin_shell_factory.conformance_variants = {  # type: ignore[attr-defined]
    "unsandboxed": builtin_unsandboxed
}


def shell_settings(base: Settings) -> Settings:
    """Real processes cost real time: a third of the examples of `base`, shorter programs."""
    return Settings(
        base,
        max_examples=max(10, base.max_examples // 3),
        stateful_step_count=min(base.stateful_step_count, 20),
    )


def bash_tools_for(factory: ShellFactory) -> BashTools:
    """The plugin the machine loads for a target: the factory's own `bash_tools()` if it has
    one (a zero-argument callable returning a `BashTools`), else the built-in one."""
    make = getattr(factory, "bash_tools", None)
    if make is None:
        return BashTools()
    return cast("Callable[[], BashTools]", make)()


class ShellMachine(JobChecks, ConformanceMachine):
    """Subclass and set `factory` to check another executor (a factory with a `bash_tools`
    attribute also brings the plugin: see `bash_tools_for`).

    What a subclass's rules and checks can use:

    host: the TrioHost the runtime runs in, on a WallClock (the jobs are real processes).
    dir: the example's temporary directory: the executor's cwd, the jobs' FIFOs.
    bash: the BashTools plugin, loaded in the runtime; the callers use its tools.
    rt: the runtime (None until `start`).
    handles: the handles of the agents `A` and `B` while they are open.
    incarnation: how many times each agent was opened.
    jobs: the model of every job started, by job id.
    done_calls: how many job-done notices the executor sent, per job id.
    done_owners: the owner each job's last job-done notice named, per job id.
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
        self.bash = bash_tools_for(type(self).factory)
        self._factory: ShellFactory = type(self).factory
        self.rt: Runtime | None = None
        self.handles: dict[str, AgentHandle] = {}
        self.incarnation: dict[str, int] = dict.fromkeys(AGENTS, 0)
        self.jobs: dict[str, Job] = {}
        self.done_calls: dict[str, int] = {}
        self.done_owners: dict[str, str | None] = {}
        self.trace: list[str] = []
        self._environment = contextlib.ExitStack()

    # -- runtime ----------------------------------------------------------------------------

    @initialize(data=st.data())
    def start(self, data: st.DataObject | None = None) -> None:
        """Put a secret-bearing environment in place, open the runtime with the executor
        under test (the factory, or one of the configurations it names in
        `conformance_variants`, drawn), and the agents `A` and `B`."""
        factory = type(self).factory
        variants: dict[str, ShellFactory] = dict(getattr(factory, VARIANTS, {}))
        if variants and data is not None:
            # Drawn only where there is a choice: a target without variants meets the same
            # programs as before they existed.
            name = data.draw(st.sampled_from(["as given", *variants]), label="configuration")
            self._factory = variants.get(name, factory)
        self._environment.enter_context(secret_environment())
        self.rt = self._start_service(self._runtime)
        for name in AGENTS:
            self._open(name)

    @asynccontextmanager
    async def _runtime(self) -> AsyncGenerator[Runtime, None]:
        async with open_runtime(MemoryStore(), shell=self._factory(self.dir)) as rt:
            # The report says whether the commands it checked ran sandboxed (D134), when the
            # executor says (`sandboxed`, read when present, after `check_sandbox`: the
            # built-in executor checks at its first command, D170).
            check: Callable[[], Awaitable[object]] | None = getattr(rt.shell, "check_sandbox", None)
            if check is not None:
                await check()
            sandboxed: object = getattr(rt.shell, "sandboxed", None)
            if isinstance(sandboxed, bool):
                key = "sandboxed" if sandboxed else "unsandboxed"
                type(self).stats[key] = type(self).stats.get(key, 0) + 1
            rt.shell.on_job_done(self._count_done)
            await rt.load(self.bash)
            yield rt

    def _count_done(self, job_id: str, owner: str | None, result: RunResult) -> None:
        self.done_calls[job_id] = self.done_calls.get(job_id, 0) + 1
        self.done_owners[job_id] = owner

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
        running = [j for j in self.jobs if self.shell.result(j) is None]
        by_agent = {j for j in running if self._owner_is_live(self.jobs[j])}
        self.host.run_sync(self._stop.set)
        # Real processes take real time to die: wait for the runtime's close itself.
        self.host.call(self._stopped.wait)
        self.handles.clear()
        for job_id in running:
            result = self.shell.result(job_id)
            closed_by = OWNER_CLOSE_REAPS if job_id in by_agent else EXECUTOR_CLOSE_REAPS
            if result is None or not result.cancelled:
                closed_by.fail(
                    f"{job_id} was running when the runtime closed; after the close it "
                    f"reports {result}, not killed"
                )
            notices = self.done_calls.get(job_id, 0)
            (NOTICE_ONLY_TO_OWNER if job_id in by_agent else EXECUTOR_CLOSE_REAPS).check(
                notices == 0,
                f"{job_id}, killed by the close of the runtime, got {notices} job-done notices",
            )
        self._check_processes(everything_closed=True)

    def _after_close(self) -> None:
        # A failing implementation may have left processes behind; this suite must not.
        for job_id in self.jobs:
            with contextlib.suppress(Exception):
                os.killpg(self.shell.pgid(job_id), signal.SIGKILL)
        shutil.rmtree(self.dir, ignore_errors=True)
        self._environment.close()

    # -- helpers ------------------------------------------------------------------------------

    @property
    def shell(self) -> ShellExecutor:
        """The executor under test (`rt.shell`)."""
        assert self.rt is not None
        return self.rt.shell

    def _call_tool(self, name: str, caller: str, **arguments: object) -> ToolResult:
        # The machine's own ToolContext: a caller needs no live agent, only an id.
        tool = next(t for t in self.bash.tools if t.name == name)
        context = ToolContext(caller, f"call-{len(self.trace)}", 1, 1)
        result = self.host.call(lambda: tool(arguments, context))
        assert isinstance(result, ToolResult)
        return result

    def _owned_running(self, caller: str) -> list[str]:
        return [j for j, job in self.jobs.items() if job.owner == caller and job.result is None]

    @staticmethod
    def _refuses(job: Job, caller: str) -> bool:
        return job.owner is not None and job.owner != caller

    # -- rules: jobs --------------------------------------------------------------------------

    @rule(caller=st.sampled_from(CALLERS), kind=st.sampled_from(KINDS), code=st.integers(0, 3))
    def start_job(self, caller: str, kind: Kind, code: int) -> None:
        """`caller` starts a background job with `bash`: quick (it ends within the rule),
        gated (it waits for its FIFO) or stubborn (also a grandchild that ignores SIGTERM).
        The empty-string caller has no agent, so it never closes."""
        if caller in AGENTS and caller not in self.handles:
            return
        number, gate, command, lines = self._prepare(kind, code)
        started = self._call_tool(
            "bash", caller, command=command, description="a job", run_in_background=True
        )
        OWNER_TOKEN_KEPT.check(
            not started.is_error, f"bash could not start a background job: {started.content}"
        )
        self._begin(started.content.rsplit(" ", 1)[-1], caller, kind, code, number, lines, gate)
        self.trace.append(f"start {caller!r} {kind}")

    @rule(token=st.sampled_from(TOKENS), kind=st.sampled_from(KINDS), code=st.integers(0, 3))
    def start_direct(self, token: str | None, kind: Kind, code: int) -> None:
        """Start a job on the executor itself (`start(spec, owner=token)`), as a host would:
        owned by nobody (None), by the empty string, or by a token no caller has."""
        number, gate, command, lines = self._prepare(kind, code)
        spec = self.shell.resolve(ShellRequest(command))
        self._check_resolved(command, token)
        job_id = self.host.call(lambda: self.shell.start(spec, owner=token))
        self._begin(job_id, token, kind, code, number, lines, gate)
        self.trace.append(f"direct {token!r} {kind}")

    def _check_resolved(self, command: str, owner: str | None) -> None:
        """`resolve` of requests that name a working directory and a timeout, or not: every
        pairing of three workdirs (none, relative, absolute) and three timeouts (none, one
        under the cap, one far above it), each time (S10). `resolve` starts nothing, so all
        nine cost nothing, and a wrong one is found on the first job started directly,
        not only on a seventh."""
        shell = self.shell
        base = shell.cwd or os.getcwd()
        for workdir in (None, "sub/dir", os.path.join(base, "elsewhere")):
            for timeout in (None, 0.5, shell.max_timeout * 1000):
                self._check_one_resolved(
                    ShellRequest(command, workdir=workdir, timeout=timeout, owner=owner), base
                )

    def _check_one_resolved(self, request: ShellRequest, base: str) -> None:
        shell = self.shell
        spec = shell.resolve(request)
        workdir, timeout = request.workdir, request.timeout
        wanted = (
            request.command,
            os.path.normpath(os.path.join(base, workdir) if workdir else base),
            min(timeout or shell.timeout, shell.max_timeout),
            request.owner,
        )
        got = (spec.command, os.path.normpath(spec.workdir), spec.timeout, spec.owner)
        SPEC_RESOLVED.check(
            got == wanted,
            lambda: (
                f"resolve({request!r}) gave (command, workdir, timeout, owner) = {got!r}, not "
                f"{wanted!r} (the executor's cwd {shell.cwd!r}, timeout {shell.timeout!r}, "
                f"max_timeout {shell.max_timeout!r})"
            ),
        )

    def _prepare(self, kind: Kind, code: int) -> tuple[int, str, str, set[str]]:
        number = len(self.jobs) + 1
        gate = os.path.join(self.dir, f"gate-{number}")
        os.mkfifo(gate)
        command, lines = job_command(self.dir, number, kind, code, gate)
        return number, gate, command, lines

    def _begin(
        self,
        job_id: str,
        owner: str | None,
        kind: Kind,
        code: int,
        number: int,
        lines: set[str],
        gate: str,
    ) -> None:
        OWNER_TOKEN_KEPT.check(
            job_id not in self.jobs, f"the job id {job_id!r} was handed out twice"
        )
        token = self.shell.owner_of(job_id)
        OWNER_TOKEN_KEPT.check(
            token == owner,
            f"a job started with the owner token {owner!r} has owner_of {token!r}",
        )
        incarnation = self.incarnation.get(owner, 0) if owner is not None else 0
        self.jobs[job_id] = Job(owner, kind, code, incarnation, lines, gate)
        # What a later rule does to a job must not depend on how fast the machine is (or
        # Hypothesis could not replay and shrink a failure): a quick job has ended before
        # the next rule, a waiting one has started everything it will start.
        if kind == "quick":
            self.host.call(self.shell.wait, job_id)
            self._observe_end(job_id)
        else:
            self.host.call(self._started, job_id, f"out-{number}")

    async def _started(self, job_id: str, marker: str) -> None:
        with trio.move_on_after(30) as scope:
            while marker not in self.shell.read_output(job_id, (0, 0)).text:  # noqa: ASYNC110
                await trio.sleep(0.002)
        OWNER_TOKEN_KEPT.check(
            not scope.cancelled_caught, f"the job {job_id} started never printed {marker!r}"
        )

    @precondition(lambda self: bool(self.jobs))
    @rule(caller=st.sampled_from(CALLERS), data=st.data())
    def read(self, caller: str, data: st.DataObject) -> None:
        """`caller` reads a job with `bash_output`: refused unless it owns the job (anybody
        may read a job whose owner is None); reads never repeat a line, and a job that
        completed has shown all of its output."""
        job_id = data.draw(st.sampled_from(sorted(self.jobs)), label="job")
        job = self.jobs[job_id]
        answer = self._call_tool("bash_output", caller, job_id=job_id)
        if self._refuses(job, caller):
            NON_OWNER_REFUSED.check(
                answer.is_error, f"{caller!r} read {job.owner!r}'s job {job_id}: {answer}"
            )
            leaked = sorted(line for line in job.lines if line in answer.content)
            NON_OWNER_REFUSED.check(
                not leaked, f"the refusal of {caller!r}'s read of {job_id} showed {leaked}"
            )
            self.trace.append("read refused")
            return
        OWNER_SERVED.check(
            not answer.is_error, f"{caller!r} was refused a read of its job {job_id}: {answer}"
        )
        *body, status = answer.content.split("\n")
        OWNER_SERVED.check(
            status.startswith("[status: "),
            f"a read of {job_id} answered {answer.content!r}, with no status line",
        )
        lines = {line for line in body if line not in ("", "[stderr]", "(no new output)")}
        repeated = lines & job.seen
        READS_CONSUME_OUTPUT.check(
            not repeated, f"consuming reads of {job_id} repeated {sorted(repeated)}"
        )
        READS_CONSUME_OUTPUT.check(
            lines <= job.lines, f"a read of {job_id} showed {sorted(lines - job.lines)}"
        )
        job.seen |= lines
        if status != "[status: running]":
            self._observe_end(job_id)
            if not job.killed and job.result is not None and not job.result.cancelled:
                READS_CONSUME_OUTPUT.check(
                    job.seen == job.lines,
                    f"{job_id} completed but its reads gave {sorted(job.seen)}, "
                    f"not {sorted(job.lines)}",
                )
        self.trace.append(f"read {status}")

    @precondition(lambda self: bool(self.jobs))
    @rule(caller=st.sampled_from(CALLERS), data=st.data())
    def kill(self, caller: str, data: st.DataObject) -> None:
        """`caller` kills a job with `bash_kill`: refused unless it owns the job (or the
        owner is None), and the job keeps running then; otherwise killed within the grace,
        or reported as already finished."""
        job_id = data.draw(st.sampled_from(sorted(self.jobs)), label="job")
        job = self.jobs[job_id]
        was_running = self.shell.result(job_id) is None
        began = time.monotonic()
        answer = self._call_tool("bash_kill", caller, job_id=job_id)
        seconds = time.monotonic() - began
        if self._refuses(job, caller):
            NON_OWNER_REFUSED.check(
                answer.is_error, f"{caller!r} killed {job.owner!r}'s job {job_id}: {answer}"
            )
            if was_running and job.kind != "quick":
                NON_OWNER_REFUSED.check(
                    self.shell.result(job_id) is None, f"a refused kill ended {job_id}"
                )
            self.trace.append("kill refused")
            return
        OWNER_SERVED.check(
            not answer.is_error, f"{caller!r} was refused the kill of its job {job_id}: {answer}"
        )
        if answer.content.startswith("killed background job"):
            JOB_OUTCOME.check(was_running, f"{job_id} had ended, yet bash_kill says it killed it")
            job.killed = True
            grace = float(getattr(self.shell, "grace", 3.0))
            GROUP_KILLED.check(
                seconds <= grace + KILL_MARGIN,
                f"bash_kill of {job_id} took {seconds:.2f}s, with a grace of {grace}s",
            )
        else:
            JOB_OUTCOME.check(
                answer.content.startswith(f"job {job_id} had already finished")
                and not (was_running and job.kind != "quick"),
                f"bash_kill of the running job {job_id} answered {answer.content!r}",
            )
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
        open_gate(self.jobs[job_id].gate)
        self.host.call(self.shell.wait, job_id)
        self._observe_end(job_id)
        self.trace.append("finish")

    # -- rules: the plugin and the owners -----------------------------------------------------

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
            OWNER_CLOSE_REAPS.check(
                self.shell.result(job_id) is not None,
                f"{job_id} still runs after its owner {name} closed",
            )
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
        NOTICE_DELIVERED.check(
            not missing,
            f"{sorted(missing)} completed by themselves, yet their owner {name} has no "
            "notice of them after its next step",
        )
        self.trace.append(f"step {name} {len(noticed)}")

    # -- rules: foreground probes (each checks itself at once) --------------------------------

    @rule(probe=st.sampled_from(PROBES))
    def run_foreground(self, probe: Probe) -> None:
        """A foreground command probes the executor: it prints its environment and reads
        its stdin (`environment`), runs through the `bash` tool exiting 0, non-zero, by a
        signal and past its timeout (`bash-results`), prints past the in-memory cap
        (`output`) or exactly up to it (`output-at-cap`), or outlives its timeout,
        trapping SIGTERM to exit 3 (`past-timeout`) or 0 (`exit-0-on-term`: timed_out all
        the same) or ignoring it (`deaf`), or ignores SIGTERM and is cancelled by its caller
        (`cancelled`: the group is killed all the same).

        What a probe asks does not change within an example: each runs once per example,
        the two past the timeout (which cost the timeout and the grace) once between them.
        """
        done = {t.removeprefix("probe ") for t in self.trace if t.startswith("probe ")}
        if probe in done or (probe in PAST_TIMEOUT_PROBES and done & PAST_TIMEOUT_PROBES):
            return
        if probe == "environment":
            self.host.call(probe_environment, self.shell)
        elif probe == "bash-results":
            self._probe_bash_results()
        elif probe in ("output", "output-at-cap"):
            at_cap = probe == "output-at-cap"
            self.host.call(lambda: probe_output(self.shell, at_cap=at_cap))
            if not at_cap:
                self.host.call(probe_spill_directories, self.shell)
        elif probe == "cancelled":
            self.host.call(probe_cancelled, self.shell, self.dir)
        else:
            deaf = probe == "deaf"
            exit_code = 0 if probe == "exit-0-on-term" else 3
            self.host.call(
                lambda: probe_past_timeout(self.shell, self.dir, deaf=deaf, exit_code=exit_code)
            )
        self.trace.append(f"probe {probe}")

    def _probe_bash_results(self) -> None:
        tool = next(t for t in self.bash.tools if t.name == "bash")
        context = ToolContext("", f"call-{len(self.trace)}", 1, 1)

        async def call(arguments: dict[str, object]) -> ToolResult:
            result = await tool(arguments, context)
            assert isinstance(result, ToolResult)
            return result

        self.host.call(probe_bash_results, call)
        self._probe_workdir()

    def _probe_workdir(self) -> None:
        """S10 for the `bash` tool: an agent whose session header has a `cwd` runs its
        commands there, in a relative `workdir` under it, in an absolute one inside it; a
        `workdir` outside it (absolute, through `..`, or through a symlink that leads out)
        is refused with an error result and runs nothing (D485)."""
        cwd = os.path.realpath(tempfile.mkdtemp(prefix="session cwd ", dir=self.dir))
        sub = os.path.join(cwd, "sub")
        os.mkdir(sub)
        elsewhere = os.path.realpath(tempfile.mkdtemp(prefix="elsewhere ", dir=self.dir))
        os.symlink(elsewhere, os.path.join(cwd, "out"))
        cases: tuple[tuple[str | None, str | None], ...] = (
            (None, cwd),
            ("sub", sub),
            (sub, sub),
            (elsewhere, None),
            ("..", None),
            ("out", None),
        )
        ran = self.host.call(self._pwd_in_session, cwd, [workdir for workdir, _ in cases])
        for (workdir, expected), (ran_in, refused) in zip(cases, ran, strict=True):
            if expected is None:
                BASH_WORKDIR.check(
                    refused and not ran_in.startswith("/"),
                    f"bash `pwd -P` with workdir {workdir!r}, outside the session cwd "
                    f"{cwd!r} of the calling agent, was not refused: it printed {ran_in!r}",
                )
                continue
            BASH_WORKDIR.check(
                os.path.realpath(ran_in) == expected,
                f"bash `pwd -P` with workdir {workdir!r}, called by an agent whose session "
                f"cwd is {cwd!r}, ran in {ran_in!r}, not {expected!r}",
            )

    async def _pwd_in_session(self, cwd: str, workdirs: list[str | None]) -> list[tuple[str, bool]]:
        """What `pwd -P` printed for each of `workdirs`, and whether the result was an
        error, run by `bash` for a new agent whose session header's `cwd` is `cwd`."""
        assert self.rt is not None
        tool = next(t for t in self.bash.tools if t.name == "bash")
        handle = await self.rt.agents.create(
            model=ScriptedModel(), tools=self.bash.tools, meta={"cwd": cwd}
        )
        printed: list[tuple[str, bool]] = []
        try:
            for workdir in workdirs:
                arguments: dict[str, object] = {"command": "pwd -P", "description": "a probe"}
                if workdir is not None:
                    arguments["workdir"] = workdir
                context = ToolContext(handle.agent.id, f"call-{len(self.trace)}", 1, 1)
                result = await tool(arguments, context)
                content = result if isinstance(result, str) else result.content
                refused = not isinstance(result, str) and result.is_error
                printed.append((content.splitlines()[0] if content else "", refused))
        finally:
            await handle.aclose()
        return printed

    def _observe_end(self, job_id: str) -> None:
        """Record the job's terminal outcome the first time; it may never change after."""
        result = self.shell.result(job_id)
        JOB_OUTCOME.check(result is not None, f"{job_id} reported an end but has no result")
        assert result is not None
        job = self.jobs[job_id]
        if job.result is None:
            job.result = result
        JOB_OUTCOME.check(
            result == job.result, f"{job_id} changed outcome: {job.result} -> {result}"
        )

    # -- invariants ---------------------------------------------------------------------------

    def _verify(self) -> None:
        """Every job keeps its owner token; no process of an ended job, or of a closed
        owner's job, is alive; every outcome is the one expected and never changes; notices
        are at most one per job, only for a job that completed by itself, and only to its
        owner."""
        self._check_owners()
        self._check_processes(everything_closed=False)
        self._check_outcomes()
        self._check_notices()
