"""Who owns an MCP server's process (rules M4, M5), checked in /proc: leaving
`open_mcp_tools` normally, by an exception or by an outer cancel (pydantic-ai #8548), with a
call in flight on each server, leaves no process, with a server that spawns a child and one
that also ignores SIGTERM (SIGKILL after the grace reaches the child too); a server that
cannot start is one McpServerError line naming it and the reason, and leaves nothing
running.
"""

from __future__ import annotations

import pathlib
import socket
from typing import Any

import pytest
import trio

from trio_agents import McpServer, McpServerError, open_agent, open_mcp_tools
from trio_agents.testing import ScriptedModel, tool_step

from .support.mcp import reference, wait_for_event
from .support.processes import gone, with_marker

pytestmark = pytest.mark.subprocess

GRACE = 0.3  # seconds between SIGTERM and SIGKILL: the stubborn server needs all of it


class Left(Exception):
    pass


async def started(records: list[pathlib.Path]) -> list[int]:
    """The pids of each server and of its child, once each has recorded both."""
    pids: list[int] = []
    for record in records:
        pids.append((await wait_for_event(record, "ready"))["pid"])
        pids.append((await wait_for_event(record, "child"))["pid"])
    return pids


@pytest.mark.parametrize("path", ["normally", "by an exception", "by an outer cancel"])
async def test_leaving_leaves_no_process(tmp_path: pathlib.Path, path: str) -> None:
    records = [tmp_path / "polite.jsonl", tmp_path / "stubborn.jsonl"]
    servers = [
        reference("polite", "--spawn-child", "--record", str(records[0])),
        reference("stubborn", "--ignore-term", "--spawn-child", "--record", str(records[1])),
    ]
    pids: list[int] = []
    with trio.CancelScope() as outer:
        try:
            async with open_mcp_tools(servers, close_grace=GRACE) as tools:
                assert tools.servers == ("polite", "stubborn")
                pids = await started(records)
                assert not any(gone(pid) for pid in pids)
                # A call in flight on each server as the block is left.
                slow: list[tuple[str, dict[str, Any]]] = [
                    ("mcp__polite__slow", {}),
                    ("mcp__stubborn__slow", {}),
                ]
                async with open_agent(ScriptedModel([tool_step(*slow)]), tools=tools) as agent:
                    agent.send("wait")
                    for record in records:
                        await wait_for_event(record, "started")
                    if path == "by an exception":
                        raise Left
                    if path == "by an outer cancel":
                        outer.cancel()
                        await trio.sleep_forever()
        except Left:
            assert path == "by an exception"  # it came out as itself, not in a group
    assert outer.cancelled_caught == (path == "by an outer cancel")
    # The stubborn server ignores SIGTERM: it and its child are gone only by the SIGKILL
    # that follows the grace (how long that took is benchmarks/acp_mcp.py's to measure).
    assert [pid for pid in pids if not gone(pid)] == []


async def test_a_cancel_while_starting_leaves_no_process(tmp_path: pathlib.Path) -> None:
    # Servers that never answer initialize: the cancel surely lands while they start.
    records = [tmp_path / "polite.jsonl", tmp_path / "stubborn.jsonl"]
    flags = ("--no-initialize", "--spawn-child", "--record")
    servers = [
        reference("polite", *flags, str(records[0])),
        reference("stubborn", "--ignore-term", *flags, str(records[1])),
    ]
    pids: list[int] = []

    async def cancel_once_running(scope: trio.CancelScope) -> None:
        pids.extend(await started(records))
        scope.cancel()

    async with trio.open_nursery() as nursery:
        with trio.CancelScope() as scope:
            nursery.start_soon(cancel_once_running, scope)
            async with open_mcp_tools(servers, close_grace=GRACE):
                pytest.fail("started")
    assert scope.cancelled_caught
    assert len(pids) == 4
    assert [pid for pid in pids if not gone(pid)] == []


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def bad(kind: str, tmp_path: pathlib.Path) -> tuple[McpServer, dict[str, Any], str]:
    """A server that does not start, the options to open it with, and its message."""
    record = str(tmp_path / "record.jsonl")
    if kind == "missing command":
        missing = str(tmp_path / "no-such-server")
        server = McpServer("nope", command=missing)
        return server, {}, f"MCP server 'nope': cannot start {missing!r}: No such file or directory"
    if kind == "crash on start":
        return (
            reference("crashy", "--crash-on-start", "--record", record),
            {},
            "MCP server 'crashy' exited with status 3 before it answered initialize; its "
            "stderr ends: reference MCP server: crashing on start (--crash-on-start)",
        )
    if kind == "no initialize":
        return (
            reference("mute", "--no-initialize", "--record", record),
            {"start_timeout": 1.0},
            "MCP server 'mute': no answer to initialize within 1 s",
        )
    url = f"http://127.0.0.1:{free_port()}/mcp"
    return McpServer("gone", transport="http", url=url), {}, "MCP server 'gone': "


@pytest.mark.parametrize("kind", ["missing command", "crash on start", "no initialize", "http"])
async def test_a_bad_start_is_one_line_and_leaves_nothing(
    tmp_path: pathlib.Path, kind: str
) -> None:
    server, options, message = bad(kind, tmp_path)
    # A good server opened with it is closed too, without waiting for it to start. (Not
    # with the short start_timeout, which a loaded machine's good server may miss too.)
    good = reference("good", "--record", str(tmp_path / "good.jsonl"))
    servers = [server] if kind == "no initialize" else [good, server]
    with pytest.raises(McpServerError) as raised:
        async with open_mcp_tools(servers, close_grace=GRACE, **options):
            pytest.fail("opened")
    error = raised.value
    assert error.server == server.name
    assert "\n" not in str(error)
    if kind == "http":
        assert str(error).startswith(message)
    else:
        assert str(error) == message
    assert with_marker(str(tmp_path)) == []  # neither the bad server nor the good one
