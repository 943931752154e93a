"""MCP servers shared by a runtime's agents (`McpServers`, a plugin): the plugin's fiber owns
them, so a reload connects them again and the runtime's close ends them, the stubborn server
and its child included (issue 18, ownership by "a plugin's fiber for servers shared by
several agents")."""

from __future__ import annotations

import pathlib

import pytest

from trio_agents import AgentHandle, AlreadyLoadedError, McpServers, MemoryStore, open_runtime
from trio_agents.testing import ScriptedModel, reply, tool_step

from .support.helpers import of_type
from .support.mcp import reference, wait_for_event
from .support.processes import gone

pytestmark = pytest.mark.subprocess


async def pids_of(record: pathlib.Path) -> list[int]:
    """The server's and its child's pids, as the server recorded them."""
    ready = await wait_for_event(record, "ready")
    child = await wait_for_event(record, "child")
    return [ready["pid"], child["pid"]]


async def test_agents_share_the_servers_a_reload_renews_and_the_runtime_close_ends(
    tmp_path: pathlib.Path,
) -> None:
    record = tmp_path / "shared.jsonl"
    plugin = McpServers(
        [reference("shared", "--ignore-term", "--spawn-child", "--record", str(record))],
        close_grace=0.3,
    )
    assert list(plugin.tools) == []  # not loaded: no tools
    async with open_runtime(MemoryStore()) as rt:
        await rt.load(plugin)
        first = await pids_of(record)
        assert "mcp__shared__echo" in [t.name for t in plugin.tools]
        async with open_runtime(MemoryStore()) as other:
            with pytest.raises(AlreadyLoadedError, match="already loaded in a runtime"):
                await other.load(plugin)  # one instance, one runtime
        handles: list[AgentHandle] = []
        for n in range(2):
            model = ScriptedModel(
                [tool_step(("mcp__shared__echo", {"text": f"from {n}"})), reply("done")]
            )
            handles.append(await rt.agents.create(model=model, tools=plugin.tools))
        for handle in handles:
            handle.agent.send("call it")
        for handle in handles:
            await handle.agent.wait_idle()
        answers = [[r["content"] for r in of_type(h.agent, "tool/result")] for h in handles]
        assert answers == [["from 0"], ["from 1"]]
        # A reload closes the servers in the plugin's fiber and connects them again.
        record.unlink()
        await rt.reload(plugin)  # waits until the old fiber has closed completely
        assert all(gone(pid) for pid in first), first
        second = await pids_of(record)
        assert "mcp__shared__echo" in [t.name for t in plugin.tools]
    # The runtime's close closed the plugin: the stubborn server and its child are gone.
    assert all(gone(pid) for pid in second), second
    assert list(plugin.tools) == []


def test_the_command_line_does_not_import_the_sdk_until_a_server_is_configured() -> None:
    # The SDK costs about a second of start-up: every `trio-agents acp` an editor starts
    # and every chat would pay it, most without an MCP server (issue 18; a regression the
    # ACP conformance runs showed as twice their time).
    import subprocess
    import sys

    code = (
        "import sys, trio_agents, trio_agents._cli._main, trio_agents.acp._server, "
        "trio_agents._cli._chat; "
        "print(sorted(m for m in ('mcp', 'trio_agents._mcp._tools') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
