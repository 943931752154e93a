"""No process outlives its owner (issue 5, acceptance 3), on every close path: killing the job,
closing its agent, closing the executor, closing the runtime, and cancelling a turn in the
middle of a foreground `bash` call.

Each job leaves a grandchild that ignores SIGTERM (an ignored signal survives exec), so only
the SIGKILL escalation ends it. The checks read the process table (/proc), not the library's
bookkeeping.
"""

from __future__ import annotations

import os
import pathlib

import pytest
import trio

from trio_agents import (
    AgentHandle,
    BashTools,
    Runtime,
    ShellExecutor,
    ShellRequest,
    ToolContext,
)
from trio_agents.testing import ScriptedModel, reply, tool_step

from .support.helpers import bash_runtime, of_type
from .support.processes import gone, host_pid, live_group_members

pytestmark = pytest.mark.subprocess


def stubborn(fifo: pathlib.Path) -> str:
    """A command whose grandchild ignores SIGTERM and whose pid it writes to `fifo`."""
    return f"bash -c 'trap \"\" TERM; exec -a {fifo} sleep 1000' & echo $! > {fifo}; wait"


def process_group(pid: int) -> int:
    return int(pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])


class Witness:
    """The grandchild a job started, read from a FIFO (so it certainly exists)."""

    def __init__(self, tmp_path: pathlib.Path) -> None:
        self.fifo = tmp_path / "pid"
        os.mkfifo(self.fifo)
        self.pid = 0
        self.pgid = 0

    async def arrived(self) -> None:
        # A sandboxed `$!` is a pid of the sandbox's namespace: find the process it names.
        self.pid = host_pid(int(await trio.Path(self.fifo).read_text()), str(self.fifo))
        self.pgid = process_group(self.pid)
        assert live_group_members(self.pgid), "the job's group should be running"

    def assert_all_gone(self) -> None:
        assert gone(self.pid), f"grandchild {self.pid} outlived its owner"
        assert live_group_members(self.pgid) == [], f"group {self.pgid} has survivors"


async def start_job_as(agent_id: str, bash: BashTools, command: str) -> str:
    arguments = {"command": command, "description": "a stubborn job", "run_in_background": True}
    result = await bash.tools[0](arguments, ToolContext(agent_id, "c1", 1, 1))
    assert not isinstance(result, str)
    assert not result.is_error, result.content
    return result.content.rsplit(" ", 1)[1]


async def agent_with_job(rt: Runtime, bash: BashTools, witness: Witness) -> tuple[AgentHandle, str]:
    """An agent whose model starts the stubborn job through the `bash` tool."""
    arguments = {
        "command": stubborn(witness.fifo),
        "description": "a stubborn job",
        "run_in_background": True,
    }
    model = ScriptedModel([tool_step(("bash", arguments)), reply("started")])
    handle = await rt.agents.create(model=model, tools=bash.tools, session_id="owner")
    handle.agent.send("start it")
    await witness.arrived()
    await handle.agent.wait_idle()
    (job_id,) = rt.shell.jobs("owner")
    return handle, job_id


async def test_killing_the_job_with_bash_kill_leaves_no_process(tmp_path: pathlib.Path) -> None:
    witness = Witness(tmp_path)
    async with bash_runtime(0.3, tmp_path) as (rt, bash):
        _, job = await agent_with_job(rt, bash, witness)
        killed = await bash.tools[2]({"job_id": job}, ToolContext("owner", "c2", 2, 1))
        assert not isinstance(killed, str)
        assert killed.content == f"killed background job {job} [status: killed by SIGTERM]"
        witness.assert_all_gone()


async def test_closing_the_owning_agent_leaves_no_process(tmp_path: pathlib.Path) -> None:
    witness = Witness(tmp_path)
    async with bash_runtime(0.3, tmp_path) as (rt, bash):
        handle, job = await agent_with_job(rt, bash, witness)
        await handle.aclose()
        witness.assert_all_gone()
        result = rt.shell.result(job)
        assert result is not None
        assert result.cancelled


async def test_closing_the_executor_leaves_no_process(tmp_path: pathlib.Path) -> None:
    witness = Witness(tmp_path)
    shell = ShellExecutor(grace=0.3, cwd=str(tmp_path))
    async with shell.running():
        await shell.start(shell.resolve(ShellRequest(stubborn(witness.fifo))), owner="someone")
        await witness.arrived()
    witness.assert_all_gone()


async def test_closing_the_runtime_leaves_no_process(tmp_path: pathlib.Path) -> None:
    owned = Witness(tmp_path / "owned")
    unowned = Witness(tmp_path / "unowned")
    async with bash_runtime(0.3, tmp_path) as (rt, bash):
        await agent_with_job(rt, bash, owned)
        # A job nobody owns, started by the embedding program itself.
        await rt.shell.start(rt.shell.resolve(ShellRequest(stubborn(unowned.fifo))), owner=None)
        await unowned.arrived()
    owned.assert_all_gone()
    unowned.assert_all_gone()


async def test_cancelling_a_turn_in_a_foreground_bash_call_leaves_no_process(
    tmp_path: pathlib.Path,
) -> None:
    witness = Witness(tmp_path)
    arguments = {"command": stubborn(witness.fifo), "description": "a stubborn foreground run"}
    model = ScriptedModel([tool_step(("bash", arguments))])
    async with bash_runtime(0.3, tmp_path) as (rt, bash):
        handle = await rt.agents.create(model=model, tools=bash.tools)
        agent = handle.agent
        agent.send("run it")
        await witness.arrived()
        assert agent.cancel()
        await agent.wait_idle()
        witness.assert_all_gone()
        (result,) = of_type(agent, "tool/result")
        assert "interrupted" in result["content"]
        assert of_type(agent, "turn/end")[-1]["reason"]["kind"] == "aborted"
        assert rt.shell.jobs() == []  # a foreground run is not a job


@pytest.fixture
def tmp_path(tmp_path: pathlib.Path) -> pathlib.Path:
    for name in ("owned", "unowned"):
        (tmp_path / name).mkdir()
    return tmp_path
