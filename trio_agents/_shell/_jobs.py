"""The shell executor's background jobs: what is kept of each, the watcher that ends it, reads
of its output, and the table of them all with who hears when one ends. The executor
(`_shell/_executor.py`) starts jobs and kills them; a `Job` is one job's state, the same before and
after it ended (its owner may still read it), and the `JobTable` keeps every job it started.

The watcher runs shielded in the executor's nursery: only a kill (`kill_requested`) or the
leader's exit ends a job, and either way the whole group goes with it (D23).
"""

from __future__ import annotations

import enum
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterator

import trio

from .._errors import JobNotFoundError
from ._output import OutputCollector
from ._process import pump
from ._types import JobOutput, RunResult, ShellSpec

__all__ = ["FROM_SPEC", "FromSpec", "Job", "JobListener", "JobTable"]

logger = logging.getLogger("trio_agents.shell")

JobListener = Callable[[str, "str | None", RunResult], object]

KillGroup = Callable[[trio.Process], Awaitable[None]]


class FromSpec(enum.Enum):
    """The type of `FROM_SPEC`: a job's owner is its spec's (None is an owner of its own)."""

    FROM_SPEC = enum.auto()


FROM_SPEC = FromSpec.FROM_SPEC


class Job:
    """One background job: its spec, owner token, process, output collectors and outcome."""

    __slots__ = (
        "cancelled",
        "cursor",
        "done",
        "err",
        "id",
        "kill_requested",
        "out",
        "owner",
        "process",
        "result",
        "silent",
        "spec",
    )

    def __init__(
        self,
        job_id: str,
        spec: ShellSpec,
        owner: str | None,
        process: trio.Process,
        streams: tuple[OutputCollector, OutputCollector],
    ) -> None:
        self.id = job_id
        self.spec = spec
        self.owner = owner
        self.process = process
        self.out, self.err = streams
        self.done = trio.Event()
        self.kill_requested = trio.Event()
        self.result: RunResult | None = None
        self.cancelled = False  # killed by us (kill, kill_owned, close), not by itself
        self.silent = False  # send no job-done notice (the killer reports the outcome)
        self.cursor: tuple[int, int] = (0, 0)  # where the next consuming read starts

    def output(self, offsets: tuple[int, int] | None) -> JobOutput:
        """Output since `offsets`, or since the cursor (and then move it): stdout, then
        `[stderr]` and stderr."""
        start = self.cursor if offsets is None else offsets
        out, next_out, lossy_out = self.out.read_from(start[0])
        err, next_err, lossy_err = self.err.read_from(start[1])
        if offsets is None:
            self.cursor = (next_out, next_err)
        text = out
        if out and err and not out.endswith("\n"):
            text += "\n"
        if err:
            text += "[stderr]\n" + err
        spills = tuple(p for p in (self.out.spill_path, self.err.spill_path) if p is not None)
        return JobOutput(
            text,
            (next_out, next_err),
            lossy_out or lossy_err,
            spills,
            self.done.is_set(),
            self.result,
        )

    async def watch(self, kill_group: KillGroup, grace: float, ended: Callable[[], None]) -> None:
        """Pump the output until the leader exits or a kill is asked for, then kill the group
        with `kill_group` (the executor's, which a subclass may change), close the pipes and
        call `ended` (which records the result). Whatever fails, the group dies, the pipes
        close and the job ends. Shielded: only a kill ends a job."""
        process = self.process
        assert process.stdout is not None
        assert process.stderr is not None
        with trio.CancelScope(shield=True):  # only kill() and close_jobs() end a job
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(pump, process.stdout, self.out)
                    nursery.start_soon(pump, process.stderr, self.err)
                    async with trio.open_nursery() as waiter:
                        waiter.start_soon(self._kill_when_asked, kill_group)
                        await process.wait()
                        if not self.kill_requested.is_set():
                            waiter.cancel_scope.cancel()
                    await kill_group(process)  # nothing of the job outlives its leader
                    nursery.cancel_scope.deadline = trio.current_time() + grace
            finally:
                # Whatever failed above, the group dies, the pipes close, the job ends.
                await kill_group(process)
                await process.stdout.aclose()
                await process.stderr.aclose()
                ended()

    async def _kill_when_asked(self, kill_group: KillGroup) -> None:
        await self.kill_requested.wait()
        await kill_group(self.process)


class JobTable:
    """Every job an executor started, by id in start order (ended ones too), the ids it hands
    out (`bash-1`, `bash-2`, ...) and the listeners told when a job ends."""

    __slots__ = ("_jobs", "_listeners", "_numbers", "silenced")

    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._numbers = itertools.count(1)
        self._listeners: list[JobListener] = []
        self.silenced = False  # no notices at all: the executor is closing

    def __iter__(self) -> Iterator[Job]:
        return iter(self._jobs.values())

    def __contains__(self, job_id: str) -> bool:
        return job_id in self._jobs

    def next_id(self) -> str:
        """The id of the next job to start."""
        return f"bash-{next(self._numbers)}"

    def add(self, job: Job) -> None:
        """Keep `job`, under its id."""
        self._jobs[job.id] = job

    def find(self, job_id: str) -> Job | None:
        """The job with that id, None if there is none."""
        return self._jobs.get(job_id)

    def get(self, job_id: str) -> Job:
        """The job with that id. Raises JobNotFoundError (a KeyError) naming the known ones."""
        job = self._jobs.get(job_id)
        if job is None:
            known = ", ".join(self._jobs) or "none"
            raise JobNotFoundError(f"no job {job_id!r}; known jobs: {known}")
        return job

    def running(self) -> list[Job]:
        """The jobs that have not ended yet, oldest first."""
        return [j for j in self._jobs.values() if not j.done.is_set()]

    def listen(self, listener: JobListener) -> Callable[[], None]:
        """Tell `listener` of every job that ends from now on; return what disconnects it."""
        self._listeners.append(listener)

        def disconnect() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return disconnect

    def announce(self, job: Job) -> None:
        """Tell every listener that `job` ended, unless notices are silenced (for all jobs,
        or for this one); a listener that raises is logged and skipped."""
        result = job.result
        assert result is not None, "the job has not ended"
        if self.silenced or job.silent:
            return
        for listener in tuple(self._listeners):
            try:
                listener(job.id, job.owner, result)
            except Exception:
                logger.exception("job-done listener %r raised; ignored", listener)
