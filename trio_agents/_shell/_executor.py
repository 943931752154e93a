"""The shell executor: commands as `bash -c` in their own process group, on trio subprocesses.

Every command runs in a new session (so its own process group), with stdin closed and an
environment built from an allowlist (`_shell/_env.command_environment`), not inherited. A
timeout or a cancellation kills the whole group: SIGTERM, a grace period, SIGKILL. When a
foreground command's leader exits, whatever it left running in its group is killed the same
way, so a foreground call never leaves a process behind (the most reported defect in peer
agents is orphaned processes).

By default every command runs in a bubblewrap sandbox (`_sandbox.py`, `_sandbox_policy.py`
in this room): its own PID namespace, a fresh /proc, the file system read-only but its
workdir and a private /tmp, the store and the user's secrets hidden. bwrap then leads the
process group, and the kill path spares it the SIGTERM (it would take the grace away) but
not the SIGKILL (D132).

Outcome fields are independent: a command that traps TERM and exits 0 after its timeout
reports `timed_out=True, exit_code=0, signal=None`.

This module is the executor's API and what ties it together; the rest lives by concept
(D361): the data in `_shell/_types.py`, one process (spawn, pipes, group kill, outcome) in
`_shell/_process.py`, background jobs and their table in `_shell/_jobs.py`, the executor's
sandbox state in `_shell/_executor_sandbox.py`.
"""

from __future__ import annotations

import math
import os
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from functools import partial

import trio

from .._errors import AlreadyRunningError, ShellClosedError
from .._util import check_number, check_strings
from ._env import check_env_name, command_environment
from ._executor_sandbox import ShellSandbox
from ._jobs import FROM_SPEC, FromSpec, Job, JobListener, JobTable
from ._output import OutputCollector, SpillSource
from ._process import kill_at_once, outcome, pump, spawn, terminate_group
from ._sandbox_policy import SandboxPolicy
from ._spill import SpillDirectory, SpillRoot
from ._types import JobOutput, RunResult, ShellRequest, ShellSpec

__all__ = [
    "JobOutput",
    "RunResult",
    "ShellExecutor",
    "ShellRequest",
    "ShellSpec",
    "command_environment",
]


class ShellExecutor:
    """Runs commands. `timeout`, `max_timeout` and `grace` are seconds.

    cwd: the default working directory (None: this process's, when a command is resolved).
    timeout: the default foreground timeout.
    max_timeout: the cap on every foreground timeout, requested or default.
    max_output_bytes: how much of each output stream is kept in memory; past it the whole
        stream goes to a private spill file, in the owner's spill directory.
    grace: how long a killed process group has between SIGTERM and SIGKILL.
    pass_env: names of this process's environment passed to commands as they are, on top of
        the allowlist (credentials included: naming them is the permission).
    env: variables set for every command, as given (they win over everything else).
    sandbox: how each command is confined (`SandboxPolicy`, by default one of its own);
        None runs commands unsandboxed. Whether the machine can sandbox is checked once, on
        entering `running()` or at the first command: SandboxUnavailableError unless the
        policy allows the fallback.

    Foreground commands (`run`) need nothing more; background jobs (`start`) run inside
    `running()`, which `open_runtime` enters. Raises ValueError unless every number is
    positive and finite, or a name in `pass_env` or `env` cannot be a variable's name.
    """

    def __init__(
        self,
        *,
        cwd: str | None = None,
        timeout: float = 120.0,
        max_timeout: float = 600.0,
        max_output_bytes: int = 64_000,
        grace: float = 3.0,
        pass_env: Iterable[str] = (),
        env: Mapping[str, str] | None = None,
        sandbox: SandboxPolicy | None = SandboxPolicy(),  # noqa: B008 - frozen, shared
    ) -> None:
        for name, value in (("timeout", timeout), ("max_timeout", max_timeout), ("grace", grace)):
            check_number(f"ShellExecutor {name}", value)
        check_number("ShellExecutor max_output_bytes", max_output_bytes, integer=True)
        if cwd is not None and not isinstance(cwd, str | os.PathLike):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"ShellExecutor cwd must be a path or None, got {cwd!r}")
        if env is not None and not isinstance(env, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"ShellExecutor env must be a mapping of names to values, got {env!r}")
        if sandbox is not None and not isinstance(sandbox, SandboxPolicy):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                f"ShellExecutor sandbox must be a SandboxPolicy or None, got {sandbox!r}"
            )
        self.cwd = cwd
        self.timeout = timeout
        self.max_timeout = max_timeout
        self.max_output_bytes = max_output_bytes
        self.grace = grace
        self.pass_env = tuple(
            check_env_name(name, "pass_env name")
            for name in check_strings("ShellExecutor pass_env", pass_env)
        )
        self.env = {check_env_name(k, "env name"): v for k, v in (env or {}).items()}
        for name, given in self.env.items():
            if not isinstance(given, str) or "\0" in given:  # pyright: ignore[reportUnnecessaryIsInstance]
                raise ValueError(f"env[{name!r}] = {given!r}: give a string without NUL")
        self._spill_root: SpillRoot | None = None
        self._jobs = JobTable()
        self._foreground: set[trio.Process] = set()  # what `kill_now` must reach besides jobs
        self._nursery: trio.Nursery | None = None
        self._sandboxing = ShellSandbox(sandbox)

    # -- the sandbox ------------------------------------------------------------------------

    @property
    def sandbox(self) -> SandboxPolicy | None:
        """The policy given (None: unsandboxed). Read-only: the sandbox check and every
        command follow the one given at construction (D362)."""
        return self._sandboxing.policy

    @property
    def sandboxed(self) -> bool:
        """Whether commands run in the sandbox (False until the check, and for the fallback)."""
        return self._sandboxing.active

    def hide(self, *paths: str) -> None:
        """Hide `paths` (absolute; files or directories) from every later sandboxed command,
        besides the policy's own (`open_runtime` hides its store this way). Never blocks."""
        self._sandboxing.hide(paths)

    def hidden_paths(self, root: str) -> tuple[str, ...]:
        """Every path a command rooted at `root` (absolute) would have hidden from it: the
        policy's secret and hidden paths (the default policy's when there is none), those
        given to `hide`, and the spill directories; `~` taken as this process's HOME. What
        the file tools of a session refuse (D516). Never blocks."""
        return self._sandboxing.hidden_paths(root)

    async def check_sandbox(self) -> bool:
        """Find out (once) whether commands can be sandboxed; return `sandboxed`. A checkpoint.

        Raises SandboxUnavailableError when they cannot and the policy does not allow the
        fallback (the next call checks again)."""
        return await self._sandboxing.check()

    def _exposed(self, spec: ShellSpec) -> Sequence[str]:
        # What one command may read besides the policy's view: its owner's spill directory,
        # where the tool result tells the agent to read the full output. Only its own: the
        # root, with every other owner's, stays hidden under the private /tmp.
        # Only one made already (by an earlier command's spill): a command whose own output
        # spills reads it in a later command, and a command that never spills makes none.
        root = self._spill_root
        if root is None or root.existing(spec.owner) is None:
            return ()
        try:
            return (self.spill_directory(spec.owner),)
        except OSError:
            return ()  # a refused directory: the spill itself reports it

    # -- background jobs ------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncGenerator[ShellExecutor, None]:
        """Hold the nursery background jobs run in. Leaving it closes the executor: notices
        are silenced first, then every job is killed and reaped.

        Entering is a checkpoint; leaving is a cancel-shielded one. Raises
        AlreadyRunningError (a RuntimeError) if the executor is already running.
        """
        if self._nursery is not None:
            raise AlreadyRunningError(
                "this shell executor is already running; one runtime at a time"
            )
        # Not the sandbox check: it runs at the first command (D170).
        await trio.lowlevel.checkpoint()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._jobs.silenced = False
            try:
                yield self
            finally:
                with trio.CancelScope(shield=True):
                    await self.close_jobs()
                    await self._sandboxing.release_networks()
                self._nursery = None
                self._remove_spills()

    def on_job_done(self, listener: JobListener) -> Callable[[], None]:
        """Call `listener(job_id, owner, result)` when a job finishes by itself or is killed
        (not after the executor is closing). Listeners are contained: one that raises is
        logged and skipped. Returns a function that disconnects it. Never blocks.

        A kill with `notify=False`, and `kill_owned`, send no notice for the jobs they kill.
        """
        return self._jobs.listen(listener)

    async def start(self, spec: ShellSpec, *, owner: str | FromSpec | None = FROM_SPEC) -> str:
        """Start `spec` in the background (its timeout does not apply) and return the job's
        id (`bash-1`, `bash-2`, ...: not secret; the owner check is the fence).

        `owner` (default: `spec.owner`) is stored with the job and never interpreted.
        Raises OSError when the command cannot be started (a bad workdir, no bash).

        Always a checkpoint. Also raises ShellClosedError unless the executor is running
        (inside `running()`, and not closing), and ValueError if `owner` contradicts `spec.owner`.
        """
        if not self._accepting():
            raise ShellClosedError(
                "the shell executor is not running; start jobs inside `running()` "
                "(open_runtime enters it for `rt.shell`)"
            )
        if isinstance(owner, FromSpec):
            owner = spec.owner
        elif spec.owner is not None and owner != spec.owner:
            raise ValueError(
                f"owner={owner!r} contradicts spec.owner={spec.owner!r}; pass one of them"
            )
        process = await self._spawn(spec)
        if not self._accepting():
            # The executor began closing while the process was being spawned: close_jobs
            # has already taken its list, so this process would be nobody's.
            with trio.CancelScope(shield=True):
                await self.kill_group(process)
            raise ShellClosedError(
                "the shell executor closed while the job was starting; the job was killed: "
                "start jobs while `running()` is open"
            )
        job_id = self._jobs.next_id()
        spill = self._spill_source(owner)
        streams = (
            self._collector(f"{job_id}-stdout", spill),
            self._collector(f"{job_id}-stderr", spill),
        )
        job = Job(job_id, spec, owner, process, streams)
        self._jobs.add(job)
        assert self._nursery is not None
        self._nursery.start_soon(self._watch, job)
        return job.id

    def _accepting(self) -> bool:
        return self._nursery is not None and not self._jobs.silenced

    def owner_of(self, job_id: str) -> str | None:
        """The owner token the job was started with, or None (also for an unknown job).
        Never blocks."""
        job = self._jobs.find(job_id)
        return job.owner if job is not None else None

    def pgid(self, job_id: str) -> int:
        """The job's process group id (its leader's pid): every process it starts is in it.
        Raises KeyError for an unknown job."""
        return self._jobs.get(job_id).process.pid

    def jobs(self, owner: str | None = None) -> list[str]:
        """The ids of the jobs started so far (ended ones too), oldest first; with `owner`,
        only that owner's. Never blocks."""
        return [j.id for j in self._jobs if owner is None or j.owner == owner]

    def read_output(self, job_id: str, offsets: tuple[int, int] | None = None) -> JobOutput:
        """Output since `offsets` (stdout, stderr byte offsets), merged as stdout, then
        `[stderr]` and stderr. Without offsets the read is consuming: it starts where the
        previous consuming read of this job stopped, so consecutive reads never repeat.
        Never blocks. Raises KeyError for an unknown job."""
        return self._jobs.get(job_id).output(offsets)

    def has_job(self, job_id: str) -> bool:
        """Whether a job with that id was started here (it may have ended)."""
        return job_id in self._jobs

    def result(self, job_id: str) -> RunResult | None:
        """The job's result once it has ended, None while it runs. Raises KeyError for an
        unknown job."""
        return self._jobs.get(job_id).result

    async def wait(self, job_id: str) -> RunResult:
        """Wait until the job has ended and been reaped; return its result.

        Always a checkpoint. A cancelled wait leaves the job running. Raises KeyError for an
        unknown job.
        """
        job = self._jobs.get(job_id)
        await job.done.wait()
        assert job.result is not None
        return job.result

    async def kill(self, job_id: str, *, notify: bool = True) -> RunResult:
        """Kill the job's whole process group and wait until it is reaped; return its result
        (at once if it had already ended). `notify=False` sends no job-done notice for it
        (the caller reports the outcome itself).

        Always a checkpoint. The job's own watcher does the killing, so a caller cancelled
        meanwhile does not stop it half-way. Raises KeyError for an unknown job.
        """
        job = self._jobs.get(job_id)
        if not job.done.is_set() and job.process.poll() is None:
            # Only a job whose leader is still running is killed by us; one that already
            # exited by itself (its watcher is reaping the rest) keeps its own outcome.
            job.cancelled = True
            job.silent = job.silent or not notify
            # The job's own watcher kills it, so a cancelled caller cannot stop the
            # escalation half-way (TERM sent, KILL never).
            job.kill_requested.set()
        await job.done.wait()
        assert job.result is not None
        return job.result

    async def kill_owned(self, owner: str | None) -> None:
        """Kill every running job of `owner` (its agent is closing) and wait until they are
        reaped, then remove the owner's spill directory and its files. No notice is sent for
        the jobs: their owner is going away. Always a checkpoint.
        """
        await self._kill_all([j for j in self._jobs.running() if j.owner == owner], notify=False)
        await self._sandboxing.release_network(owner)
        if self._spill_root is not None:
            self._spill_root.remove_directory(owner)

    async def close_jobs(self) -> None:
        """Silence notices, then kill and reap every job. Afterwards `start` refuses new
        jobs. Always a checkpoint."""
        self._jobs.silenced = True
        await self._kill_all(self._jobs.running())

    async def _kill_all(self, jobs: list[Job], *, notify: bool = True) -> None:
        if not jobs:
            # An empty nursery's exit is only a schedule point, not a cancellation point.
            await trio.lowlevel.checkpoint()
            return
        async with trio.open_nursery() as nursery:
            for job in jobs:
                nursery.start_soon(partial(self.kill, job.id, notify=notify))

    async def _watch(self, job: Job) -> None:
        await job.watch(self.kill_group, self.grace, partial(self._end, job))

    def _end(self, job: Job) -> None:
        job.result = outcome(
            job.process,
            timed_out=False,
            cancelled=job.cancelled,
            timeout=job.spec.timeout,
            stdout=job.out.finish(),
            stderr=job.err.finish(),
            sandboxed=self._sandboxing.confines(job.process),
        )
        job.done.set()
        self._jobs.announce(job)

    # -- foreground -------------------------------------------------------------------------

    def resolve(self, request: ShellRequest) -> ShellSpec:
        """Fill every default: workdir, the timeout (capped at `max_timeout`), the owner.
        Never blocks. Raises ValueError for a timeout that is not a positive finite number."""
        if request.timeout is not None and not (0 < request.timeout < math.inf):
            raise ValueError(
                f"request.timeout must be a positive number of seconds, got {request.timeout!r}"
            )
        timeout = min(request.timeout or self.timeout, self.max_timeout)
        base = self.cwd or os.getcwd()
        workdir = os.path.join(base, request.workdir) if request.workdir else base
        root = os.path.join(base, request.root) if request.root else None
        return ShellSpec(request.command, workdir, timeout, request.owner, root=root)

    async def run(self, spec: ShellSpec) -> RunResult:
        """Run `spec` in the foreground. Returns for any exit, timeout included; raises only
        when the command cannot be started (a bad workdir, no bash). If the caller is
        cancelled, the group is killed (shielded, bounded by the grace) and Cancelled
        propagates.

        Always a checkpoint. Needs no `running()`: the command is the caller's task's.
        """
        process = await self._spawn(spec)
        spill = self._spill_source(spec.owner)
        out, err = self._collector("stdout", spill), self._collector("stderr", spill)
        timed_out = False
        self._foreground.add(process)
        try:
            async with trio.open_nursery() as nursery:
                assert process.stdout is not None
                assert process.stderr is not None
                nursery.start_soon(pump, process.stdout, out)
                nursery.start_soon(pump, process.stderr, err)
                with trio.move_on_after(spec.timeout) as timer:
                    await process.wait()
                timed_out = timer.cancelled_caught
                # Timed out, or the leader exited: nothing of this group may outlive the call.
                await self.kill_group(process)
                # A process that escaped the group could hold the pipes open forever.
                nursery.cancel_scope.deadline = trio.current_time() + self.grace
        except BaseException:
            with trio.CancelScope(shield=True):
                await self.kill_group(process)
            raise
        finally:
            self._foreground.discard(process)
            stdout, stderr = out.finish(), err.finish()
        return outcome(
            process,
            timed_out=timed_out,
            cancelled=False,
            timeout=spec.timeout,
            stdout=stdout,
            stderr=stderr,
            sandboxed=self._sandboxing.confines(process),
        )

    def _environment(self) -> dict[str, str]:
        """The environment every command starts with. Seam: a double may change what is passed
        or scrubbed."""
        # One place for what every command's environment is (tests seed defects here). Read
        # at each spawn: the server's environment may change while it runs.
        return command_environment(os.environ, pass_env=self.pass_env, env=self.env)

    async def _spawn(self, spec: ShellSpec) -> trio.Process:
        await self.check_sandbox()
        env = self._environment()
        if not self._sandboxing.active:
            return await spawn(spec, env)
        # Made before the first command, not at the first spill: a command already running
        # when the root appeared would not have it hidden (D493).
        if self._spill_root is None:
            self._spill_root = SpillRoot()
        spill = self._spill_root.path
        # An owner's network lives until its jobs are killed or the executor closes; a
        # command run outside `running()` has no such end, and gets a network of its own.
        netns = await self._sandboxing.network_for(spec.owner) if self._accepting() else None
        prepared = self._sandboxing.command(
            spec, exposed=self._exposed(spec), spill=spill, netns=netns
        )
        process = await spawn(spec, env, sandboxed=prepared)
        return self._sandboxing.started(process, prepared.helper)

    def _collector(self, label: str, spill: SpillSource) -> OutputCollector:
        """The collector of one job's output stream. Seam: a double may give another
        collector."""
        return OutputCollector(self.max_output_bytes, label, spill=spill)

    # -- spill directories ----------------------------------------------------------------

    def spill_directory(self, owner: str | None = None) -> str:
        """The path of `owner`'s spill directory (mode 0700), made on first use: the output
        of `owner`'s commands past the cap goes there, and nothing else. Every one is a
        direct child of the executor's spill root, `os.path.dirname(path)`, which holds
        only them. Removed by `kill_owned(owner)` and when `running()` is left. Never
        blocks.

        Raises SpillDirectoryError (an OSError) if the directory, or the root, was removed,
        replaced or turned into a symlink since it was made; OSError if it cannot be made.
        """
        directory = self._spill_for(owner)
        directory.verify()
        return directory.path

    def _spill_source(self, owner: str | None) -> SpillSource:
        return partial(self._spill_for, owner)

    def _spill_for(self, owner: str | None) -> SpillDirectory:
        """The spill directory of `owner`'s jobs. Seam: a double may change the directory
        handed out."""
        if self._spill_root is None:
            self._spill_root = SpillRoot()
        return self._spill_root.directory(owner)

    def _remove_spills(self) -> None:
        root, self._spill_root = self._spill_root, None
        if root is not None:
            root.remove()

    def kill_now(self) -> int:
        """SIGKILL the process group of every command still running here, foreground and
        background, without waiting: for a process that is about to exit at once (the forced
        exit of `trio-agents acp` and `chat`). Returns how many groups were signalled. Never
        blocks; the jobs' watchers reap them as usual if the process lives on."""
        jobs = [j.process for j in self._jobs.running()]
        return kill_at_once([*jobs, *self._foreground])

    async def kill_group(self, process: trio.Process) -> None:
        """SIGTERM the process's group, wait up to the grace for the leader, then SIGKILL
        whatever of the group is left. Idempotent; errors for a group already gone are
        ignored.

        Always a checkpoint.
        """
        await terminate_group(process, self.grace, sandboxed=self._sandboxing.confines(process))
        if process.returncode is not None:
            await self._sandboxing.release(process)  # its network, once nothing uses it
