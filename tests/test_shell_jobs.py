"""Background jobs of the shell executor on real processes: owner tokens, notices, output,
and killing (issue 5, S2-S5). The process table is checked, not our bookkeeping."""

from __future__ import annotations

import os
import pathlib

import pytest
import trio

from trio_agents._shell._executor import RunResult, ShellExecutor, ShellRequest

from .support.processes import gone, host_pid, live_group_members

pytestmark = pytest.mark.subprocess


def executor(cwd: pathlib.Path | None = None) -> ShellExecutor:
    # A sandboxed command may write in its workdir only: a test's FIFO lives there.
    return ShellExecutor(grace=0.5, cwd=None if cwd is None else str(cwd))


async def test_a_finished_job_notifies_with_its_owner_and_its_output_is_readable() -> None:
    ex = executor()
    done = trio.Event()
    notices: list[tuple[str, str | None, int | None]] = []

    def on_done(job_id: str, owner: str | None, result: RunResult) -> None:
        notices.append((job_id, owner, result.exit_code))
        done.set()

    async with ex.running():
        ex.on_job_done(on_done)
        job = await ex.start(ex.resolve(ShellRequest("echo one; echo two >&2", owner="agent-a")))
        assert ex.owner_of(job) == "agent-a"
        await done.wait()
        output = ex.read_output(job)
        assert output.done
        assert output.text == "one\n[stderr]\ntwo\n"
        again = ex.read_output(job, output.next_offsets)
        assert again.text == ""
    assert notices == [(job, "agent-a", 0)]


async def test_an_empty_owner_is_a_real_owner_and_an_unknown_job_has_none() -> None:
    ex = executor()
    async with ex.running():
        job = await ex.start(ex.resolve(ShellRequest("true", owner="")))
        assert ex.owner_of(job) == ""
        assert ex.owner_of("job-999") is None
        await ex.kill(job)


async def test_killing_a_job_kills_its_grandchildren(tmp_path: pathlib.Path) -> None:
    fifo = tmp_path / "pids"
    os.mkfifo(fifo)
    ex = executor(tmp_path)
    async with ex.running():
        job = await ex.start(ex.resolve(ShellRequest(f"sleep 1000 & echo $! > {fifo}; wait")))
        # Reading the FIFO returns once bash has written: the grandchild exists.
        grandchild = host_pid(int(await trio.Path(fifo).read_text()))
        result = await ex.kill(job)
        assert result.cancelled
        assert result.signal in ("SIGTERM", "SIGKILL")
        assert gone(grandchild)
        assert live_group_members(ex.pgid(job)) == []


async def test_kill_owned_kills_only_that_owners_jobs(tmp_path: pathlib.Path) -> None:
    ex = executor()
    async with ex.running():
        mine = await ex.start(ex.resolve(ShellRequest("sleep 1000", owner="a")))
        theirs = await ex.start(ex.resolve(ShellRequest("sleep 1000", owner="b")))
        await ex.kill_owned("a")
        assert ex.read_output(mine).done
        assert not ex.read_output(theirs).done
        await ex.kill(theirs)


async def test_closing_the_executor_silences_notices_then_reaps_every_job() -> None:
    notices: list[str] = []
    ex = executor()
    async with ex.running():
        ex.on_job_done(lambda job_id, owner, result: notices.append(job_id))
        first = await ex.start(ex.resolve(ShellRequest("sleep 1000 & sleep 1000 & wait")))
        second = await ex.start(ex.resolve(ShellRequest("sleep 1000")))
        groups = [ex.pgid(first), ex.pgid(second)]
    assert notices == []
    for pgid in groups:
        assert live_group_members(pgid) == []  # read from the process table itself


async def test_a_lossy_read_returns_the_tail_and_says_so() -> None:
    ex = ShellExecutor(grace=0.5, max_output_bytes=100)
    done = trio.Event()
    async with ex.running():
        ex.on_job_done(lambda job_id, owner, result: done.set())
        job = await ex.start(ex.resolve(ShellRequest("seq 1 1000")))
        await done.wait()
        output = ex.read_output(job)
        assert output.lossy
        assert output.text.endswith("1000\n")
        assert output.result is not None
        assert output.result.stdout.spill_path is not None
