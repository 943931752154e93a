"""MCP tools through an agent, with the reference server on stdio, on streamable HTTP and
(listed and called only) on HTTP+SSE, rules M1-M3: listed under server-named names with the
server's schema, called, a slow call cancelled (the server sees `notifications/cancelled`),
a tool added through `tools/list_changed`, an error result and a crash mid-call each an
error result naming the server. Rule M6: the stdio server's environment, read in /proc.

One server per transport serves every case: starting one costs seconds (the SDK's import).
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Mapping
from typing import Any

import pytest
import trio

from trio_agents import McpServer, McpTools, open_agent, open_mcp_tools
from trio_agents.testing import ScriptedModel, reply, tool_step

from .support.helpers import of_type, turn_ends
from .support.mcp import environment, http_server, reference, wait_for_event

pytestmark = pytest.mark.subprocess

REFERENCE_TOOLS = ["echo", "slow", "crash", "add_tool", "picture", "fail", "environment"]


def results(records: list[Mapping[str, Any]]) -> list[tuple[str, bool]]:
    return [(r["content"], r["is_error"]) for r in records]


async def exercise(tools: McpTools, server: str, record: pathlib.Path) -> None:
    """Every case, in one agent's turns, against the server named `server`."""
    name = f"mcp__{server}__"
    assert tools.servers == (server,)
    assert [tool.name for tool in tools] == ["base", *(name + t for t in REFERENCE_TOOLS)]
    echo = tools[1]
    assert echo.description == "Return the text unchanged."
    assert echo.parameters["properties"]["text"]["type"] == "string"
    assert echo.parameters["required"] == ["text"]

    model = ScriptedModel(
        [
            # turn 1: calls, an image, a tool added by tools/list_changed and then called
            tool_step((name + "echo", {"text": "hi"}), (name + "picture", {})),
            tool_step((name + "add_tool", {"name": "zap"})),
            tool_step((name + "zap", {})),
            tool_step((name + "echo", {})),  # no text: the server answers an error result
            reply("done"),
            # turn 2: a call cancelled while the server runs it
            tool_step((name + "slow", {})),
            # turn 3: the server dies in the middle of a call; the turn goes on
            tool_step((name + "crash", {})),
            reply("after the crash"),
        ]
    )
    async with open_agent(model, tools=tools) as agent:
        agent.send("first")
        await agent.wait_idle()
        done = results(of_type(agent, "tool/result"))
        # The calls of one step run concurrently: their results come in either order.
        assert sorted(done[:2]) == [("[image: image/png, 70 bytes]", False), ("hi", False)]
        assert done[2:4] == [("added zap", False), ("zap called", False)]
        assert done[4][1] is True
        assert done[4][0].startswith(f"MCP server {server!r}: tool 'echo' reported an error: ")
        offered = [[spec.name for spec in request.tools] for request in model.requests]
        assert name + "zap" not in offered[1]
        assert offered[2][-1] == name + "zap"  # the step after the change has it
        assert len(tools) == 1 + len(REFERENCE_TOOLS) + 1  # the base tool, and zap

        agent.send("second")
        await wait_for_event(record, "started")
        agent.cancel()
        await agent.wait_idle()
        assert turn_ends(agent)[1] == {"kind": "aborted", "reason": "cancelled", "cause": "user"}
        assert of_type(agent, "tool/result")[5]["is_error"] is True  # recorded interrupted
        await wait_for_event(record, "cancelled")

        agent.send("third")
        await agent.wait_idle()
        crashed = of_type(agent, "tool/result")[6]
        assert crashed["is_error"] is True
        assert crashed["content"].startswith(f"MCP server {server!r}: tool 'crash' failed: ")
        if server == "ref":  # a stdio server: its exit status is known
            assert crashed["content"].endswith("ConnectionError: the server exited with status 1")
        assert turn_ends(agent)[2] == {"kind": "completed"}
        assert of_type(agent, "assistant/message")[-1]["content"] == "after the crash"


class Base:
    name = "base"
    description = "a tool of the agent's own, before the servers' tools"
    parameters: Mapping[str, Any] = {"type": "object"}

    async def __call__(self, arguments: Mapping[str, Any], context: object) -> str:
        await trio.lowlevel.checkpoint()
        return "base"


async def test_stdio_server(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record = tmp_path / "record.jsonl"
    plain = reference("ref", "--record", str(record))
    server = McpServer(
        "ref", command=plain.command, args=plain.args, env={**plain.env, "GIVEN": "yes"}
    )
    monkeypatch.setenv("MCP_TEST_SECRET_TOKEN", "s3cret")
    async with open_mcp_tools([server], base=[Base()], close_grace=1.0) as tools:
        # Rule M6, read from the kernel: the environment the server got, not what we meant.
        environ = environment((await wait_for_event(record, "ready"))["pid"])
        assert environ["GIVEN"] == "yes"
        assert "MCP_TEST_SECRET_TOKEN" not in environ
        assert environ["PATH"] == os.environ["PATH"]
        await exercise(tools, "ref", record)


# The SDK's streamable HTTP client leaves httpx2's response iterators to the garbage
# collector, which on trio warns (D252); nothing of this library is left open. httpx2
# 2.17.0 names the innermost one, httpcore2's HTTP11ConnectionByteStream.
HTTP_WARNINGS = pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <async_generator object "
    r"(PoolByteStream|EventSource|Response|HTTP11ConnectionByteStream)\."
    ":pytest.PytestUnraisableExceptionWarning"
)


@HTTP_WARNINGS
async def test_http_server(tmp_path: pathlib.Path) -> None:
    record = tmp_path / "record.jsonl"
    async with http_server(tmp_path, "--record", str(record)) as (url, _):
        server = McpServer("web", transport="http", url=url, headers={"X-Test": "1"})
        async with open_mcp_tools([server], base=[Base()]) as tools:
            await exercise(tools, "web", record)


@HTTP_WARNINGS
async def test_sse_server(tmp_path: pathlib.Path) -> None:
    # The older HTTP+SSE transport: listed and called (the other cases are the transport's
    # business, not this library's, and cost a server start each).
    async with http_server(tmp_path, "--sse") as (url, _):
        server = McpServer("old", transport="sse", url=url)
        async with open_mcp_tools([server]) as tools:
            assert [tool.name for tool in tools] == [f"mcp__old__{t}" for t in REFERENCE_TOOLS]
            model = ScriptedModel(
                [tool_step(("mcp__old__echo", {"text": "over sse"})), reply("ok")]
            )
            async with open_agent(model, tools=tools) as agent:
                agent.send("go")
                await agent.wait_idle()
                assert results(of_type(agent, "tool/result")) == [("over sse", False)]
