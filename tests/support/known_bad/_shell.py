"""Known-bad shell executors (and one bash-tools plugin): each is the real one with one seeded
defect, a mistake a developer could make."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import trio

from agent_conformance._shell_probes import PASSED, PROBE_SET
from trio_agents import (
    BashTools,
    RunResult,
    ShellExecutor,
    ShellRequest,
    ShellSpec,
    ToolContext,
    ToolResult,
)
from trio_agents._runtime import Runtime
from trio_agents._shell._bash_tools import (
    _BashKill,  # pyright: ignore[reportPrivateUsage]
    _BashOutput,  # pyright: ignore[reportPrivateUsage]
    render_output,
    status_line,
)
from trio_agents._shell._env import QUIET_TOOLS, carries_credentials, command_environment
from trio_agents._shell._group import group_gone, group_has_live_members, signal_group
from trio_agents._shell._output import OutputCollector, SpillSource
from trio_agents._shell._process import outcome, pump
from trio_agents._shell._sandbox_policy import SandboxPolicy
from trio_agents._shell._spill import SpillDirectory

from ._seeded import Seeded

# -- shell executors with one defect ---------------------------------------------------------


class _TimeoutAskedUncapped(ShellExecutor):
    """Caps only the default timeout at `max_timeout`: one the caller asks for is taken as
    asked (the caller knows best, its author thought)."""

    def resolve(self, request: ShellRequest) -> ShellSpec:
        spec = super().resolve(request)
        if request.timeout is not None:
            spec = dataclasses.replace(spec, timeout=request.timeout)
        return spec


class _LeaderOnlyKill(ShellExecutor):
    """(i) Kills signal the job's leader, not its process group: a grandchild survives."""

    async def kill_group(self, process: trio.Process) -> None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        with trio.move_on_after(self.grace):
            await process.wait()
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()


class _OwnerForgottenAtEnd(ShellExecutor):
    """(j) A finished job forgets its owner, so anyone may read it afterwards."""

    def owner_of(self, job_id: str) -> str | None:
        if self.has_job(job_id) and self.result(job_id) is not None:
            return None
        return super().owner_of(job_id)


class _NoticeForKilledJobs(ShellExecutor):
    """(k) Killed jobs still send a job-done notice (a closing owner's jobs included)."""

    async def kill(self, job_id: str, *, notify: bool = True) -> RunResult:
        return await super().kill(job_id, notify=True)


class _OwnerTokenLowercased(ShellExecutor):
    """owner_of normalises the token it gives back (ids compared case-insensitively)."""

    def owner_of(self, job_id: str) -> str | None:
        owner = super().owner_of(job_id)
        return owner.lower() if owner is not None else None


class _TermWithoutKill(ShellExecutor):
    """The group kill sends SIGTERM and waits for the leader to go: no SIGKILL after the
    grace, so a process that ignores SIGTERM is never ended."""

    async def kill_group(self, process: trio.Process) -> None:
        if process.returncode is not None and not group_has_live_members(process.pid):
            await trio.lowlevel.checkpoint()
            return
        signal_group(process.pid, signal.SIGTERM)
        await process.wait()
        with trio.move_on_after(self.grace):
            await group_gone(process.pid)


class _KillWithoutTerm(ShellExecutor):
    """The group kill goes straight to SIGKILL: a command never gets its SIGTERM, so one
    that would clean up and exit on it is killed instead."""

    async def kill_group(self, process: trio.Process) -> None:
        if process.returncode is not None and not group_has_live_members(process.pid):
            await trio.lowlevel.checkpoint()
            return
        signal_group(process.pid, signal.SIGKILL)
        await process.wait()
        with trio.move_on_after(self.grace):
            await group_gone(process.pid)


class _KillWithoutGrace(ShellExecutor):
    """The group kill sends SIGTERM and SIGKILL at once: the grace is never waited for."""

    async def kill_group(self, process: trio.Process) -> None:
        if process.returncode is not None and not group_has_live_members(process.pid):
            await trio.lowlevel.checkpoint()
            return
        signal_group(process.pid, signal.SIGTERM)
        signal_group(process.pid, signal.SIGKILL)
        await process.wait()
        with trio.move_on_after(self.grace):
            await group_gone(process.pid)


class _GraceForTheLeaderOnly(ShellExecutor):
    """The group gets SIGTERM, but the grace waits for the leader only: once it has gone,
    the rest of the group is SIGKILLed, so a child still cleaning up is cut short."""

    async def kill_group(self, process: trio.Process) -> None:
        if process.returncode is not None and not group_has_live_members(process.pid):
            await trio.lowlevel.checkpoint()
            return
        signal_group(process.pid, signal.SIGTERM)
        with trio.move_on_after(self.grace):
            await process.wait()
        signal_group(process.pid, signal.SIGKILL)
        await process.wait()
        with trio.move_on_after(self.grace):
            await group_gone(process.pid)


class _TimeoutReportedAsCancelled(ShellExecutor):
    """A foreground timeout is reported as a cancellation (the executor killed it, after all):
    `cancelled` follows `timed_out` instead of being a field of its own."""

    async def run(self, spec: ShellSpec) -> RunResult:
        result = await super().run(spec)
        return dataclasses.replace(result, cancelled=result.timed_out)


class _CancelledRunLeavesGroup(ShellExecutor):
    """A foreground run cancelled by its caller kills its group without a shield: the
    SIGTERM goes out, but the wait for the grace is cut at once by the very cancel, so the
    SIGKILL never comes and a command that ignores SIGTERM outlives the call. (The rest is
    `ShellExecutor.run` as it is.)"""

    async def run(self, spec: ShellSpec) -> RunResult:
        process = await self._spawn(spec)
        spill = self._spill_source(spec.owner)
        out, err = self._collector("stdout", spill), self._collector("stderr", spill)
        timed_out = False
        try:
            async with trio.open_nursery() as nursery:
                assert process.stdout is not None
                assert process.stderr is not None
                nursery.start_soon(pump, process.stdout, out)
                nursery.start_soon(pump, process.stderr, err)
                with trio.move_on_after(spec.timeout) as timer:
                    await process.wait()
                timed_out = timer.cancelled_caught
                await self.kill_group(process)
                nursery.cancel_scope.deadline = trio.current_time() + self.grace
        except BaseException:
            await self.kill_group(process)  # the defect: not shielded from the cancel
            raise
        finally:
            stdout, stderr = out.finish(), err.finish()
        return outcome(
            process,
            timed_out=timed_out,
            cancelled=False,
            timeout=spec.timeout,
            stdout=stdout,
            stderr=stderr,
            sandboxed=False,
        )


class _SecretsUpperCaseOnly(ShellExecutor):
    """The environment is scrubbed of credential names in upper case only (`my_api_key`,
    `GithubToken` get through)."""

    def _environment(self) -> dict[str, str]:
        pattern = re.compile(r"KEY|SECRET|TOKEN|PASSWORD")
        env = {name: value for name, value in os.environ.items() if not pattern.search(name)}
        return {**env, **QUIET_TOOLS}


class _SecretsByNameOnly(ShellExecutor):
    """The environment is the server's, scrubbed of credential-like names (KEY, SECRET,
    TOKEN, PASSWORD in any case): `GITHUB_PAT`, `DATABASE_URL`, `SSH_AUTH_SOCK` get through.
    The executor before issue 16."""

    def _environment(self) -> dict[str, str]:
        pattern = re.compile(r"KEY|SECRET|TOKEN|PASSWORD", re.IGNORECASE)
        env = {name: value for name, value in os.environ.items() if not pattern.search(name)}
        return {**env, **QUIET_TOOLS}


class _InheritedBeatsQuiet(ShellExecutor):
    """The quiet defaults are set first and the allowed names of the server's environment
    over them, so a terminal's TERM (or PAGER) reaches commands that then page or colour."""

    def _environment(self) -> dict[str, str]:
        allowed = command_environment(os.environ, pass_env=self.pass_env, env=self.env)
        inherited = {n: os.environ[n] for n in QUIET_TOOLS if n in os.environ}
        return {**allowed, **inherited, **(self.env or {})}


class _ExplicitPassFiltered(ShellExecutor):
    """A name passed explicitly (`pass_env`) is dropped when its value looks like a
    credential, as the allowed names are: the user's explicit permission is second-guessed."""

    def _environment(self) -> dict[str, str]:
        env = command_environment(os.environ, env=self.env)
        for name in self.pass_env:
            if name in os.environ and not carries_credentials(os.environ[name]):
                env[name] = os.environ[name]
        return env


class _TrustingDirectory(SpillDirectory):
    """Hands out paths without checking that they still lead to the directory held."""

    __slots__ = ()

    def verify(self) -> None:
        return

    def path_of(self, name: str) -> str:
        return os.path.join(self.path, name)


class _SpillTrustedByPath(ShellExecutor):
    """A spill directory is trusted by its path: one replaced behind the executor's back
    (moved away, another made in its place) is handed out, and so are paths in it."""

    def _spill_for(self, owner: str | None) -> SpillDirectory:
        directory = super()._spill_for(owner)
        directory.__class__ = _TrustingDirectory  # the same slots: only the checks differ
        return directory


class _SecretsBySuffixOnly(ShellExecutor):
    """The environment is scrubbed of names that end in a credential word only
    (`DB_PASSWORD_FILE`, `SECRETS` get through)."""

    def _environment(self) -> dict[str, str]:
        pattern = re.compile(r"(KEY|SECRET|TOKEN|PASSWORD)$", re.IGNORECASE)
        env = {name: value for name, value in os.environ.items() if not pattern.search(name)}
        return {**env, **QUIET_TOOLS}


class _HeadCollector(OutputCollector):
    """Trims the newest chunks instead of the oldest (`pop()`, not `pop(0)`)."""

    def _trim(self) -> None:
        while self._retained > self._max and len(self._chunks) > 1:
            self._retained -= len(self._chunks.pop())
        if self._retained > self._max:
            keep = self._chunks[0][: self._max]
            self._chunks[0] = keep
            self._retained = len(keep)
        self.truncated = True


class _OutputHeadKept(ShellExecutor):
    """Output past the cap keeps its head in memory, not its tail."""

    def _collector(self, label: str, spill: SpillSource) -> OutputCollector:
        return _HeadCollector(self.max_output_bytes, label, spill=spill)


class _WorldReadableSpill(OutputCollector):
    """Creates the spill file with the usual mode for a log, 0644 (after the umask)."""

    def _open_spill(self) -> None:
        try:
            self._directory = self._spill_source()
            self._spill, self._spill_name = self._directory.open_file(self._label, 0o644)
        except OSError:
            self._spill_failed = True
            return
        for chunk in self._chunks:
            self._write_spill(chunk)
            if self._spill_failed:
                return


class _SpillWorldReadable(ShellExecutor):
    """Spill files are readable by every user."""

    def _collector(self, label: str, spill: SpillSource) -> OutputCollector:
        return _WorldReadableSpill(self.max_output_bytes, label, spill=spill)


class _CloseKillsBeforeSilencing(ShellExecutor):
    """Closing kills every job first and silences notices after: the jobs killed by the
    close send notices."""

    async def close_jobs(self) -> None:
        for job_id in self.jobs():
            if self.result(job_id) is None:
                await self.kill(job_id)
        await super().close_jobs()


class _OwnerCloseDoesNotWait(ShellExecutor):
    """kill_owned starts the kills of the closing owner's jobs and returns at once, without
    waiting until they are reaped."""

    async def kill_owned(self, owner: str | None) -> None:
        nursery = self._nursery  # pyright: ignore[reportPrivateUsage]
        assert nursery is not None
        for job_id in self.jobs(owner):
            if self.result(job_id) is None:
                nursery.start_soon(partial(self.kill, job_id, notify=False))
        # Only the wait is missing: the owner's spill directory goes as in the real one, so
        # no other rule (S9) can be what catches it first.
        spill_root = self._spill_root  # pyright: ignore[reportPrivateUsage]
        if spill_root is not None:
            spill_root.remove_directory(owner)
        await trio.lowlevel.checkpoint()


# -- a bash-tools plugin with one defect -------------------------------------------------------


def _loose_access(shell: ShellExecutor, job_id: object, context: ToolContext) -> str | ToolResult:
    """The access check with a truthiness test: an empty-string owner counts as none."""
    if not isinstance(job_id, str) or not job_id:
        return ToolResult(f"invalid job_id {job_id!r}", is_error=True)
    owner = shell.owner_of(job_id)
    if owner and owner != context.agent_id:
        return ToolResult(f"job {job_id} belongs to another session", is_error=True)
    if not shell.has_job(job_id):
        return ToolResult(f"unknown job {job_id!r}", is_error=True)
    return job_id


class _LooseOutput(_BashOutput):
    async def run(
        self, runtime: Runtime, arguments: Mapping[str, Any], context: ToolContext
    ) -> ToolResult:
        await trio.lowlevel.checkpoint()
        job_id = _loose_access(runtime.shell, arguments.get("job_id"), context)
        if isinstance(job_id, ToolResult):
            return job_id
        return ToolResult(render_output(runtime.shell.read_output(job_id)))


class _LooseKill(_BashKill):
    async def run(
        self, runtime: Runtime, arguments: Mapping[str, Any], context: ToolContext
    ) -> ToolResult:
        shell = runtime.shell
        job_id = _loose_access(shell, arguments.get("job_id"), context)
        if isinstance(job_id, ToolResult):
            await trio.lowlevel.checkpoint()
            return job_id
        finished = shell.result(job_id)
        if finished is not None:
            await trio.lowlevel.checkpoint()
            return ToolResult(f"job {job_id} had already finished {status_line(finished)}")
        result = await shell.kill(job_id, notify=False)
        return ToolResult(f"killed background job {job_id} {status_line(result)}")


class _EmptyOwnerIsNobody(BashTools):
    """bash_output and bash_kill test the owner's truthiness, so a job owned by the empty
    string is open to every caller."""

    def __init__(self) -> None:
        super().__init__()
        bash, _, _ = self.tools
        self.tools = (bash, _LooseOutput(self._bound), _LooseKill(self._bound))  # pyright: ignore[reportPrivateUsage]


class _ExitCodeOnly:
    """The `bash` tool, whose result is an error only when the command's exit code is not
    0: a command that a signal ended has no exit code, so it reads as a success."""

    def __init__(self, tool: Any) -> None:
        self._tool = tool
        self.name = tool.name
        self.description = tool.description
        self.parameters = tool.parameters

    async def __call__(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        result = await self._tool(arguments, context)
        assert isinstance(result, ToolResult)
        signalled = "\n[killed by signal: " in result.content
        return ToolResult(result.content, is_error=result.is_error and not signalled)


class _ErrorByExitCode(BashTools):
    def __init__(self) -> None:
        super().__init__()
        bash, output, kill = self.tools
        self.tools = (_ExitCodeOnly(bash), output, kill)  # pyright: ignore[reportAttributeAccessIssue]


class _AbsoluteWorkdir(_ExitCodeOnly):
    """The `bash` tool normalises a `workdir` with `os.path.abspath` before using it: a
    relative one is taken from the process's directory, not the session's `cwd`."""

    async def __call__(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        workdir = arguments.get("workdir")
        if isinstance(workdir, str) and workdir:
            arguments = {**arguments, "workdir": os.path.abspath(workdir)}  # noqa: ASYNC240
        result = await self._tool(arguments, context)
        assert isinstance(result, ToolResult)
        return result


class _WorkdirMadeAbsolute(BashTools):
    def __init__(self) -> None:
        super().__init__()
        bash, output, kill = self.tools
        self.tools = (_AbsoluteWorkdir(bash), output, kill)  # pyright: ignore[reportAttributeAccessIssue]


def shell_factory_for(
    executor: type[ShellExecutor],
    bash_tools: Callable[[], BashTools] | None = None,
    *,
    sandboxed: bool = True,
) -> Callable[[str], ShellExecutor]:
    """A shell target: `executor` with the built-in target's grace, cap and sandbox (where the
    machine has one), and, when given, the plugin the machine loads instead of the built-in
    `BashTools` (its `bash_tools`). `sandboxed=False` for a defect of the group kill, which
    the sandbox would mask (killing bwrap kills everything inside)."""
    sandbox = SandboxPolicy(allow_unsandboxed=True) if sandboxed else None

    def factory(cwd: str) -> ShellExecutor:
        return executor(
            cwd=cwd,
            grace=0.1,
            max_output_bytes=16_000,
            pass_env=(PASSED[0],),
            env={PROBE_SET[0]: PROBE_SET[1]},
            sandbox=sandbox,
        )

    factory.__name__ = executor.__name__.strip("_")
    if bash_tools is not None:
        factory.bash_tools = bash_tools  # type: ignore[attr-defined]
    return factory


leader_only_kill = shell_factory_for(_LeaderOnlyKill, sandboxed=False)
timeout_asked_uncapped = shell_factory_for(_TimeoutAskedUncapped)
owner_forgotten_at_end = shell_factory_for(_OwnerForgottenAtEnd)
notice_for_killed_jobs = shell_factory_for(_NoticeForKilledJobs)
owner_token_lowercased = shell_factory_for(_OwnerTokenLowercased)
term_without_kill = shell_factory_for(_TermWithoutKill, sandboxed=False)
kill_without_term = shell_factory_for(_KillWithoutTerm, sandboxed=False)
kill_without_grace = shell_factory_for(_KillWithoutGrace, sandboxed=False)
grace_for_the_leader_only = shell_factory_for(_GraceForTheLeaderOnly, sandboxed=False)
cancelled_run_leaves_group = shell_factory_for(_CancelledRunLeavesGroup, sandboxed=False)
timeout_reported_as_cancelled = shell_factory_for(_TimeoutReportedAsCancelled)
secrets_upper_case_only = shell_factory_for(_SecretsUpperCaseOnly)
inherited_beats_quiet = shell_factory_for(_InheritedBeatsQuiet)
secrets_by_suffix_only = shell_factory_for(_SecretsBySuffixOnly)
secrets_by_name_only = shell_factory_for(_SecretsByNameOnly)
explicit_pass_filtered = shell_factory_for(_ExplicitPassFiltered)
spill_trusted_by_path = shell_factory_for(_SpillTrustedByPath)
output_head_kept = shell_factory_for(_OutputHeadKept)
spill_world_readable = shell_factory_for(_SpillWorldReadable)
close_kills_before_silencing = shell_factory_for(_CloseKillsBeforeSilencing)
owner_close_does_not_wait = shell_factory_for(_OwnerCloseDoesNotWait)
empty_owner_is_nobody = shell_factory_for(ShellExecutor, _EmptyOwnerIsNobody)
# The same defect without the sandbox, for the test of printed reproductions: shrinking
# replays the program hundreds of times, and unsandboxed commands start five times faster.
empty_owner_is_nobody_unsandboxed = shell_factory_for(
    ShellExecutor, _EmptyOwnerIsNobody, sandboxed=False
)
error_by_exit_code = shell_factory_for(ShellExecutor, _ErrorByExitCode)
workdir_made_absolute = shell_factory_for(ShellExecutor, _WorkdirMadeAbsolute)


SEEDED = (
    Seeded("i-leader-only-kill", leader_only_kill, "shell", "group-killed"),
    Seeded("timeout-asked-uncapped", timeout_asked_uncapped, "shell", "spec-resolved"),
    Seeded("j-owner-forgotten-at-end", owner_forgotten_at_end, "shell", "owner-token-kept"),
    Seeded("k-notice-for-killed-jobs", notice_for_killed_jobs, "shell", "notice-only-to-owner"),
    Seeded("owner-token-lowercased", owner_token_lowercased, "shell", "owner-token-kept"),
    Seeded("term-without-kill", term_without_kill, "shell", "group-killed"),
    Seeded("kill-without-term", kill_without_term, "shell", "outcome-fields"),
    # No grace at all also cuts the group's cleanup short (D423): whichever probe runs first.
    Seeded(
        "kill-without-grace",
        kill_without_grace,
        "shell",
        "outcome-fields",
        also=("group-killed",),
    ),
    Seeded("grace-for-the-leader-only", grace_for_the_leader_only, "shell", "group-killed"),
    Seeded("cancelled-run-leaves-group", cancelled_run_leaves_group, "shell", "group-killed"),
    Seeded(
        "timeout-reported-as-cancelled", timeout_reported_as_cancelled, "shell", "outcome-fields"
    ),
    Seeded("secrets-upper-case-only", secrets_upper_case_only, "shell", "env-scrubbed"),
    Seeded("inherited-beats-quiet", inherited_beats_quiet, "shell", "env-scrubbed"),
    Seeded("secrets-by-suffix-only", secrets_by_suffix_only, "shell", "env-scrubbed"),
    Seeded("secrets-by-name-only", secrets_by_name_only, "shell", "env-scrubbed"),
    Seeded("output-head-kept", output_head_kept, "shell", "output-tail-kept"),
    Seeded("explicit-pass-filtered", explicit_pass_filtered, "shell", "env-passed-explicitly"),
    Seeded("spill-trusted-by-path", spill_trusted_by_path, "shell", "spill-directory-per-owner"),
    Seeded("spill-world-readable", spill_world_readable, "shell", "output-spilled-privately"),
    Seeded(
        "close-kills-before-silencing",
        close_kills_before_silencing,
        "shell",
        "executor-close-reaps",
    ),
    Seeded("owner-close-does-not-wait", owner_close_does_not_wait, "shell", "owner-close-reaps"),
    Seeded("empty-owner-is-nobody", empty_owner_is_nobody, "shell", "non-owner-refused"),
    Seeded("error-by-exit-code", error_by_exit_code, "shell", "bash-result-is-error"),
    Seeded("workdir-made-absolute", workdir_made_absolute, "shell", "bash-workdir"),
)
