"""Regressions found by review of the shell executor (real processes): a spill file that
cannot be written, a kill that lands after the leader exited, a start racing the executor's
close, a losing duplicate create, notices for killed jobs, relative workdirs, descriptors."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

import pytest
import trio
import trio.testing

import trio_agents._shell._executor as shell_module
import trio_agents._shell._process as shell_process
from trio_agents import (
    DuplicateSessionError,
    MemoryStore,
    SandboxPolicy,
    ShellExecutor,
    ShellRequest,
    ShellSpec,
    open_runtime,
)
from trio_agents._shell._output import OutputCollector
from trio_agents._shell._spill import SpillDirectory
from trio_agents.testing import ScriptedModel

from .support.helpers import bash_runtime, of_type
from .support.processes import gone, live_group_members

pytestmark = pytest.mark.subprocess


def test_a_spill_file_that_cannot_be_made_leaves_the_tail(tmp_path: pathlib.Path) -> None:
    def no_directory() -> SpillDirectory:
        raise NotADirectoryError(20, "Not a directory", str(tmp_path / "file" / "x"))

    out = OutputCollector(4, "t", spill=no_directory)
    out.feed(b"0123456789")  # must not raise
    result = out.finish()
    assert (result.text, result.truncated, result.spill_path) == ("6789", True, None)


def test_a_stream_past_the_spill_cap_keeps_only_its_tail() -> None:
    out = OutputCollector(4, "t", max_spill_bytes=8)
    out.feed(b"01234")
    spill = out.spill_path
    assert spill is not None
    out.feed(b"56789")
    result = out.finish()
    assert (result.text, result.spill_path) == ("6789", None)
    assert not os.path.exists(spill)  # an incomplete file never passes for the whole stream


async def test_a_job_whose_spill_fails_still_ends_and_leaves_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    def cannot_create(self: SpillDirectory, label: str, mode: int = 0o600) -> NoReturn:
        raise FileNotFoundError(2, "No such file or directory", str(tmp_path / "no" / "x"))

    monkeypatch.setattr(SpillDirectory, "open_file", cannot_create)
    ex = ShellExecutor(grace=0.3, max_output_bytes=100)
    async with ex.running():
        job = await ex.start(ex.resolve(ShellRequest("seq 1 2000")))
        result = await ex.wait(job)  # before the fix its watcher died and this hung
        assert result.exit_code == 0
        assert result.stdout.truncated
        assert result.stdout.spill_path is None
        assert live_group_members(ex.pgid(job)) == []


async def test_a_kill_after_the_leader_exited_keeps_the_jobs_own_outcome(
    tmp_path: pathlib.Path,
) -> None:
    fifo = tmp_path / "pid"
    os.mkfifo(fifo)
    ex = ShellExecutor(grace=2.0, cwd=str(tmp_path))
    async with ex.running():
        # The leader exits 0 at once; a TERM-ignoring grandchild keeps the watcher busy.
        command = f"bash -c 'trap \"\" TERM; exec sleep 30' & echo $! > {fifo}; exit 0"
        job = await ex.start(ex.resolve(ShellRequest(command)))
        await trio.Path(fifo).read_text()
        leader = ex.pgid(job)
        with trio.fail_after(10):
            while not gone(leader):  # noqa: ASYNC110 - no event exists for another's exit
                await trio.sleep(0.01)
        result = await ex.kill(job)
        assert (result.exit_code, result.signal, result.cancelled) == (0, None, False)


async def test_a_start_that_races_the_close_leaves_no_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spawned = trio.Event()
    release = trio.Event()
    real_spawn: Callable[..., Awaitable[trio.Process]] = shell_process.spawn
    pgids: list[int] = []

    async def slow_spawn(spec: ShellSpec, *args: Any, **kwargs: Any) -> trio.Process:
        process = await real_spawn(spec, *args, **kwargs)
        pgids.append(process.pid)
        spawned.set()
        await release.wait()
        return process

    # The executor module's own binding: it is what `ShellExecutor._spawn` calls.
    monkeypatch.setattr(shell_module, "spawn", slow_spawn)
    ex = ShellExecutor(grace=0.3)
    errors: list[BaseException] = []

    async def start() -> None:
        try:
            await ex.start(ex.resolve(ShellRequest("sleep 1000")))
        except RuntimeError as exc:
            errors.append(exc)

    async with trio.open_nursery() as nursery:
        async with ex.running():
            nursery.start_soon(start)
            await spawned.wait()
            # Leaving `running()` now begins the close while the spawn is still in flight.
        release.set()
    assert len(errors) == 1
    assert live_group_members(pgids[0]) == []


class GatedExists(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.gate: trio.Event | None = None
        self.waiting = trio.Event()

    async def exists(self, session_id: str) -> bool:
        if self.gate is not None:
            gate, self.gate = self.gate, None
            self.waiting.set()
            await gate.wait()
        return await super().exists(session_id)


async def test_a_losing_duplicate_create_leaves_the_winners_jobs_alone() -> None:
    store = GatedExists()
    async with open_runtime(store, shell=ShellExecutor(grace=0.3)) as rt:
        gate = store.gate = trio.Event()
        async with trio.open_nursery() as nursery:

            async def loser() -> None:
                with pytest.raises(DuplicateSessionError):
                    await rt.agents.create(model=ScriptedModel(), session_id="A")

            nursery.start_soon(loser)
            await store.waiting.wait()  # the loser passed the live check, and waits
            await rt.agents.create(model=ScriptedModel(), session_id="A")
            job = await rt.shell.start(rt.shell.resolve(ShellRequest("sleep 1000")), owner="A")
            gate.set()
        assert rt.shell.result(job) is None  # the winner's job is still running
        assert rt.agents.get("A") is not None


async def test_a_job_killed_through_the_api_sends_its_owner_no_notice() -> None:
    async with bash_runtime() as (rt, bash):
        handle = await rt.agents.create(model=ScriptedModel(), tools=bash.tools, session_id="A")
        job = await rt.shell.start(rt.shell.resolve(ShellRequest("sleep 1000")), owner="A")
        await rt.shell.kill(job)
        handle.agent.send("anything?")
        await handle.agent.wait_idle()
        assert of_type(handle.agent, "context/message") == []


def test_a_relative_workdir_is_taken_from_the_executors_cwd(tmp_path: pathlib.Path) -> None:
    ex = ShellExecutor(cwd=str(tmp_path))
    assert ex.resolve(ShellRequest("pwd", workdir="sub")).workdir == str(tmp_path / "sub")
    assert ex.resolve(ShellRequest("pwd", workdir="/abs")).workdir == "/abs"


async def test_finished_jobs_hold_no_descriptors() -> None:
    ex = ShellExecutor(grace=0.3)
    async with ex.running():
        before = len(os.listdir("/proc/self/fd"))
        for _ in range(20):
            await ex.wait(await ex.start(ex.resolve(ShellRequest("true"))))
        after = len(os.listdir("/proc/self/fd"))
    assert after - before < 5


def test_an_executors_sandbox_policy_is_read_only() -> None:
    """D362: the policy given at construction is the one every command follows; setting
    another afterwards would not reach the commands, so it is refused."""
    policy = SandboxPolicy(network=False)
    executor = ShellExecutor(sandbox=policy)
    assert executor.sandbox is policy
    assert ShellExecutor(sandbox=None).sandbox is None
    with pytest.raises(AttributeError):
        executor.sandbox = None  # type: ignore[misc]  # pyright: ignore[reportAttributeAccessIssue]


async def test_a_member_that_appears_after_a_sandboxs_term_gets_its_own(
    tmp_path: pathlib.Path,
) -> None:
    # The leader stands for bwrap (spared the TERM) still setting its sandbox up: the command
    # it starts once the first TERM has gone out must get one too, and run its trap within
    # the grace, not die of the SIGKILL after it (D500).
    gate, trapped = tmp_path / "gate", tmp_path / "trapped"
    os.mkfifo(gate)
    child = f"(trap 'echo > {trapped}; exit 3' TERM; sleep 30 & wait)"
    leader = f"trap '' TERM; read line < {gate}; {child} & wait"
    process = await trio.lowlevel.open_process(["bash", "-c", leader], start_new_session=True)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: shell_process.terminate_group(process, 20.0, sandboxed=True))
        await trio.testing.wait_all_tasks_blocked()  # the first round of TERMs has gone out
        await trio.Path(gate).write_text("go\n")  # the leader starts its command
    assert trapped.exists()
    assert process.returncode == 0  # the leader waited for its child: no SIGKILL came
    assert not live_group_members(process.pid)
