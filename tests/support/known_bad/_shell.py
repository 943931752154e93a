"""Known-bad shell executors: each is the real executor with one seeded defect."""

from __future__ import annotations

import contextlib
import signal

import trio

from trio_agents import (
    RunResult,
    ShellExecutor,
)

from ._seeded import Seeded

# -- shell executors with one defect ---------------------------------------------------------


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


def shell_factory_for(executor: type[ShellExecutor]):  # type: ignore[no-untyped-def] # pyright: ignore
    def factory(cwd: str) -> ShellExecutor:
        return executor(cwd=cwd, grace=0.1)

    factory.__name__ = executor.__name__.strip("_")
    return factory


leader_only_kill = shell_factory_for(_LeaderOnlyKill)
owner_forgotten_at_end = shell_factory_for(_OwnerForgottenAtEnd)
notice_for_killed_jobs = shell_factory_for(_NoticeForKilledJobs)


SEEDED = (
    Seeded("i-leader-only-kill", leader_only_kill, "shell", "?"),
    Seeded("j-owner-forgotten-at-end", owner_forgotten_at_end, "shell", "?"),
    Seeded("k-notice-for-killed-jobs", notice_for_killed_jobs, "shell", "?"),
)
