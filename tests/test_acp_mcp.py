"""MCP servers in ACP sessions (issue 18, acceptance 2 and 3): `trio-agents acp` as a real
process connects the stdio reference server (`agent_conformance._mcp_server`) a session
names in `mcpServers` (and servers over streamable HTTP and SSE), the offline model calls
their tools, and every close path (end of input, SIGTERM, a forced exit, a request that
fails) leaves no process, read from /proc."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest
from acp import RequestError
from acp.schema import EnvVariable, McpServerStdio, ToolCallProgress, ToolCallStart

from trio_agents._agent._approval import ApprovalRequest
from trio_agents._cli import main
from trio_agents.acp import _jsonrpc as rpc
from trio_agents.acp._mapping import mcp_servers, tool_call_title, tool_kind
from trio_agents.acp._modes import ModePolicy

from .support.acp_process import AcpProcess
from .support.acp_sdk import RecordingClient, prompt, run, server
from .support.processes import gone, with_marker

SERVER = [sys.executable, "-m", "agent_conformance._mcp_server"]
# The server gets a scrubbed environment plus what the entry names: it needs this checkout.
CHECKOUT = {k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ}
# A server that starts is given time on a loaded machine; the ones that fail, fail at once.
BOUND = ("--mcp-start-timeout", "60")


def stdio(name: str, *flags: str, command: str = SERVER[0]) -> McpServerStdio:
    return McpServerStdio(
        name=name,
        command=command,
        args=[*SERVER[1:], *flags],
        env=[EnvVariable(name=k, value=v) for k, v in CHECKOUT.items()],
    )


def raw(name: str, *flags: str) -> dict[str, Any]:
    return stdio(name, *flags).model_dump(by_alias=True, exclude_none=True)


def recorded(record: pathlib.Path) -> list[dict[str, Any]]:
    """The events the server wrote to its record file so far."""
    text = record.read_text() if record.exists() else ""
    return [json.loads(line) for line in text.splitlines()]


def events(record: pathlib.Path) -> list[str]:
    return [event["event"] for event in recorded(record)]


def pids(record: pathlib.Path) -> dict[str, int]:
    """The pids the server wrote to its record file, by event (`ready`; `child` first, with
    `--spawn-child`), once it is ready."""
    assert until(lambda: "ready" in events(record), 20), f"no ready event in {record}"
    return {event["event"]: int(event["pid"]) for event in recorded(record) if "pid" in event}


def until(condition: Callable[[], bool], deadline: float = 10.0) -> bool:
    """Whether `condition` holds within `deadline` seconds (a bounded poll of /proc: a
    killed process is reaped by its parent, or by init, a moment after it died)."""
    limit = time.monotonic() + deadline
    while not condition():
        if time.monotonic() > limit:
            return False
        time.sleep(0.05)
    return True


def all_gone(*numbers: int) -> bool:
    return until(lambda: all(gone(pid) for pid in numbers))


# -- the pure parts --------------------------------------------------------------------------


def test_an_mcp_tool_is_titled_by_its_server_and_tool_and_asked_like_a_command() -> None:
    assert tool_call_title("mcp__ref__echo", {"text": "hi", "description": "x"}) == "ref: echo"
    assert tool_kind("mcp__fs__read_file") == "other"
    assert tool_call_title("mcp__odd", {}) == "mcp__odd"  # not a server's tool name
    call = ApprovalRequest("s", "c1", 1, 1, "mcp__ref__echo", {"text": "hi"})
    policy = ModePolicy("ask")
    assert policy.verdict(call) == "ask"
    policy.switch("read-only")
    assert policy.verdict(call) == "reject"
    assert "'mcp__ref__echo' does not run" in policy.rejection_note(call)
    policy.switch("auto")
    assert policy.verdict(call) == "allow"


def test_a_malformed_mcp_server_entry_names_the_entry_and_field() -> None:
    assert mcp_servers({"cwd": "/"}) == ()
    cases: list[tuple[dict[str, Any], str]] = [
        ({"name": "x", "command": 5, "args": [], "env": []}, "mcpServers[0].command must be"),
        ({"command": "x", "args": [], "env": []}, "mcpServers[0].name must be a string"),
        ({"name": "x", "command": "x", "args": "a", "env": []}, "mcpServers[0].args must be"),
        (
            {"type": "http", "name": "h", "url": "ftp://x", "headers": []},
            "url must start with http",
        ),
        ({"type": "acp", "name": "a", "id": "x"}, 'mcpServers[0].type must be "http" or "sse"'),
    ]
    for entry, words in cases:
        with pytest.raises(rpc.JsonRpcError) as refused:
            mcp_servers({"mcpServers": [entry]})
        assert refused.value.code == rpc.INVALID_PARAMS
        assert words in refused.value.detail


def test_a_start_timeout_that_is_not_a_positive_number_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for bad in ("0", "-1", "nan", "inf", "soon"):
        with pytest.raises(SystemExit) as usage:
            main(["acp", "--mcp-start-timeout", bad])
        assert usage.value.code == 2
        error = capsys.readouterr().err.splitlines()[-1]
        assert error.endswith(f"--mcp-start-timeout: must be a number of seconds > 0, got {bad!r}")


# -- real processes --------------------------------------------------------------------------


@pytest.mark.subprocess
def test_P15_P17_a_session_calls_an_mcp_tool_and_no_server_outlives_it(
    tmp_path: pathlib.Path,
) -> None:
    """Acceptance 2, with the real Python ACP client: the tool call streams and is asked
    first (ask mode), a session/cancel reaches the server, a tool it adds is called next; a
    server that does not start fails session/new or session/load naming it, and stores or
    changes nothing. End of input, then (a second process, which loads the session) SIGTERM
    with a server that ignores TERM and spawned a child: no process is left."""
    store = tmp_path / "s.sqlite3"
    first = tmp_path / "first.jsonl"
    second = tmp_path / "second.jsonl"

    async def new_then_end_of_input() -> str:
        client = RecordingClient()
        async with server(client, store, *BOUND) as (conn, process):
            capabilities = client.init.agent_capabilities.mcp_capabilities
            assert capabilities is not None
            assert (capabilities.http, capabilities.sse) == (True, True)
            created = await conn.new_session(
                cwd=str(tmp_path), mcp_servers=[stdio("ref", "--record", str(first))]
            )
            sid = created.session_id
            call = '/tool mcp__ref__echo {"text": "hi"}'
            answer = await conn.prompt(session_id=sid, prompt=prompt(call))
            assert answer.stop_reason == "end_turn"
            (asked,) = client.permissions
            assert (asked[1].title, asked[1].kind) == ("ref: echo", "other")
            start, *progress = [
                u for u in client.of(sid) if isinstance(u, ToolCallStart | ToolCallProgress)
            ]
            assert isinstance(start, ToolCallStart)
            assert (start.title, start.kind, start.status) == ("ref: echo", "other", "pending")
            assert start.raw_input == {"text": "hi"}
            assert [u.status for u in progress] == ["in_progress", "completed"]
            assert progress[-1].content is not None
            assert progress[-1].content[0].content.text == "hi"
            assert "hi" in client.text(sid)

            # A session/cancel reaches the server's request (notifications/cancelled).
            slow = asyncio.ensure_future(
                conn.prompt(session_id=sid, prompt=prompt("/tool mcp__ref__slow"))
            )
            assert await asyncio.to_thread(until, lambda: "started" in events(first))
            await conn.cancel(session_id=sid)
            assert (await slow).stop_reason == "cancelled"
            assert await asyncio.to_thread(until, lambda: "cancelled" in events(first))
            assert len(client.permissions) == 2  # asked again: allowed once is once

            # tools/list_changed: a tool the server adds is the session's next step's.
            added = '/tool mcp__ref__add_tool {"name": "extra"}'
            assert (await conn.prompt(session_id=sid, prompt=prompt(added))).stop_reason == (
                "end_turn"
            )
            await conn.prompt(session_id=sid, prompt=prompt("/tool mcp__ref__extra"))
            assert client.text(sid).endswith("extra called")

            for entry, reason in [
                (stdio("missing", command=str(tmp_path / "no-such-server")), "missing"),
                (stdio("crashes", "--crash-on-start"), "crashes"),
            ]:
                with pytest.raises(RequestError) as refused:
                    await conn.new_session(cwd=str(tmp_path), mcp_servers=[entry])
                assert refused.value.code == -32603
                assert f"MCP server {reason!r}" in str(refused.value.data), refused.value.data
            listed = await conn.list_sessions()
            assert [s.session_id for s in listed.sessions] == [sid]  # nothing else stored
            server_pid = pids(first)["ready"]
        assert process.returncode == 0
        assert all_gone(server_pid), "the MCP server outlived the end of input"
        return sid

    async def load_then_sigterm(sid: str) -> None:
        client = RecordingClient()
        async with server(client, store, "--mode", "auto", *BOUND) as (conn, process):
            with pytest.raises(RequestError) as refused:
                await conn.load_session(
                    cwd=str(tmp_path),
                    session_id=sid,
                    mcp_servers=[stdio("crashes", "--crash-on-start")],
                )
            assert "MCP server 'crashes' exited with status 3" in str(refused.value.data)
            assert client.of(sid) == []  # refused before the replay: the session is as it was
            flags = ("--record", str(second), "--ignore-term", "--spawn-child")
            await conn.load_session(
                cwd=str(tmp_path), session_id=sid, mcp_servers=[stdio("ref", *flags)]
            )
            replayed = [u.title for u in client.of(sid) if isinstance(u, ToolCallStart)]
            assert replayed == ["ref: echo", "ref: slow", "ref: add_tool", "ref: extra"]
            call = '/tool mcp__ref__echo {"text": "again"}'
            answer = await conn.prompt(session_id=sid, prompt=prompt(call))
            assert answer.stop_reason == "end_turn"
            assert client.text(sid).endswith("again")
            found = pids(second)
            assert set(found) == {"ready", "child"}
            process.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(process.wait(), 30) == 128 + signal.SIGTERM
        assert all_gone(*found.values()), f"left running after SIGTERM: {found}"

    made: list[str] = []

    async def first_process() -> None:
        made.append(await new_then_end_of_input())

    run(first_process())  # each process within its own bound
    run(load_then_sigterm(made[0]))
    assert with_marker(str(first)) == []
    assert with_marker(str(second)) == []


@pytest.mark.subprocess
def test_P16_bad_mcp_configurations_are_one_clear_error_each_and_leave_nothing(
    tmp_path: pathlib.Path,
) -> None:
    """Acceptance 3 over raw frames (the SDK's client refuses to send a malformed entry): a
    malformed entry is -32602 naming the field, before anything starts; a server that never
    answers `initialize` fails within the bound, naming it, also when the input ends while it
    starts; nothing is stored or running."""
    record = tmp_path / "silent.jsonl"
    acp = AcpProcess(tmp_path / "s.sqlite3", "--mcp-start-timeout", "1")
    try:
        acp.initialize()
        malformed: dict[str, Any] = {"name": "bad", "command": 5, "args": [], "env": []}
        answer = acp.answer(
            acp.send("session/new", {"cwd": str(tmp_path), "mcpServers": [malformed]})
        )
        assert answer["error"]["code"] == rpc.INVALID_PARAMS
        assert answer["error"]["data"] == "mcpServers[0].command must be a string, got 5"

        silent = raw("silent", "--no-initialize", "--record", str(record))
        answer = acp.answer(acp.send("session/new", {"cwd": str(tmp_path), "mcpServers": [silent]}))
        assert answer["error"]["code"] == -32603
        detail = answer["error"]["data"]
        assert "MCP server 'silent'" in detail, detail
        assert "initialize" in detail, detail
        assert "\n" not in detail
        assert "within 1 s" in detail, detail  # the --mcp-start-timeout bound, not the default
        # Killed before the answer (perhaps before it wrote its pid): found by its argv.
        assert until(lambda: with_marker(str(record)) == []), "the silent server is running"
        assert acp.result("session/list", {})["sessions"] == []

        # End of input while a server is starting: the request is still answered, then the
        # process exits, and the server is gone.
        late = raw("late", "--no-initialize", "--record", str(record))
        pending = acp.send("session/new", {"cwd": str(tmp_path), "mcpServers": [late]})
        assert acp.process.stdin is not None
        acp.process.stdin.close()
        assert "MCP server 'late'" in acp.answer(pending)["error"]["data"]
        assert acp.process.wait(timeout=30) == 0
    finally:
        acp.close()
    assert until(lambda: with_marker(str(record)) == [])


def port_of(port_file: pathlib.Path, process: subprocess.Popen[bytes]) -> int:
    assert until(lambda: port_file.exists() or process.poll() is not None, 30)
    assert process.poll() is None, f"the HTTP server exited with {process.returncode}"
    return int(port_file.read_text())


@pytest.mark.subprocess
def test_P15_a_session_calls_tools_over_streamable_http_and_sse(tmp_path: pathlib.Path) -> None:
    """What `mcpCapabilities` advertises works: an `http` server (the reference server's
    streamable HTTP) and an `sse` one (its HTTP+SSE transport), both on 127.0.0.1."""
    http_port, sse_port = tmp_path / "http.port", tmp_path / "sse.port"
    servers = [
        subprocess.Popen([*SERVER, "--http", str(http_port)]),
        subprocess.Popen([*SERVER, "--http", str(sse_port), "--sse"]),
    ]
    acp = AcpProcess(tmp_path / "s.sqlite3")
    try:
        http, sse = port_of(http_port, servers[0]), port_of(sse_port, servers[1])
        acp.initialize()
        entries: list[dict[str, Any]] = [
            {"type": "http", "name": "web", "url": f"http://127.0.0.1:{http}/mcp", "headers": []},
            {"type": "sse", "name": "old", "url": f"http://127.0.0.1:{sse}/sse", "headers": []},
        ]
        sid = acp.result("session/new", {"cwd": str(tmp_path), "mcpServers": entries})["sessionId"]
        for name in ("web", "old"):
            call = f'/tool mcp__{name}__echo {{"text": "over {name}"}}'
            assert acp.answer(acp.prompt(sid, call))["result"] == {"stopReason": "end_turn"}
        done = [
            f["params"]["update"]
            for f in acp.frames
            if f.get("method") == "session/update"
            and f["params"]["update"].get("status") in ("completed", "failed")
        ]
        assert [(u["status"], u["rawOutput"]["output"]) for u in done] == [
            ("completed", "over web"),
            ("completed", "over old"),
        ]
        assert acp.process.stdin is not None
        acp.process.stdin.close()
        assert acp.process.wait(timeout=30) == 0
    finally:
        acp.close()
        for process in servers:
            process.kill()
            process.wait(timeout=30)


@pytest.mark.subprocess
def test_P17_a_forced_exit_still_ends_every_mcp_server_group(tmp_path: pathlib.Path) -> None:
    """A second signal during the teardown exits at once, without the MCP servers' owners
    running: the forced exit SIGKILLs their groups too, the child a TERM-ignoring server
    spawned included."""
    record = tmp_path / "stubborn.jsonl"
    acp = AcpProcess(tmp_path / "s.sqlite3", *BOUND)
    try:
        acp.initialize()
        stubborn = raw("ref", "--record", str(record), "--ignore-term", "--spawn-child")
        params = {"cwd": str(tmp_path), "mcpServers": [stubborn]}
        sid = acp.result("session/new", params)["sessionId"]
        found = pids(record)
        assert set(found) == {"ready", "child"}
        held = acp.prompt(sid, "/hold")
        while not any(
            f.get("method") == "session/update"
            and "holding" in str(f["params"]["update"].get("content", ""))
            for f in acp.frames
        ):
            assert acp.read_frame() is not None, "the server ended before its turn held"
        acp.process.send_signal(signal.SIGTERM)
        # Answered once the quit has begun; the server's group holds out for its grace.
        assert acp.answer(held)["result"] == {"stopReason": "cancelled"}
        acp.process.send_signal(signal.SIGINT)
        assert acp.process.wait(timeout=30) == 128 + signal.SIGINT  # the forced exit's
    finally:
        acp.close()
    assert all_gone(*found.values()), f"left running after the forced exit: {found}"
