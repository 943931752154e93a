"""`trio-agents acp` asks before it runs a command: permission requests answered by the real
Python ACP client (allow, reject, cancel while pending, a late answer), and modes switched
mid-session (issue 17, acceptance 2 and the set_mode part of 4). One server process serves
the whole scenario."""

from __future__ import annotations

import asyncio
import pathlib
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError
from acp.schema import (
    ConfigOptionUpdate,
    CurrentModeUpdate,
    PermissionOption,
    RequestPermissionRequest,
    ToolCallProgress,
    ToolCallStart,
)

from .support.acp_sdk import RecordingClient, choose, new_session, prompt, run, server

pytestmark = pytest.mark.subprocess

KINDS = ["allow_once", "allow_always", "reject_once", "reject_always"]


def results(client: RecordingClient, sid: str) -> list[str]:
    """The text of each tool result the session was sent."""
    return [
        u.content[0].content.text
        for u in client.of(sid)
        if isinstance(u, ToolCallProgress) and u.content
    ]


async def round_trip(conn: Any) -> None:
    """Anything the server wrote before answering this has arrived by the time it answers."""
    await conn.initialize(protocol_version=PROTOCOL_VERSION)


def test_P8_a_command_runs_only_once_the_client_allows_it(tmp_path: pathlib.Path) -> None:
    work = tmp_path / "work"
    work.mkdir()

    async def scenario() -> None:
        client = RecordingClient()
        async with server(client, tmp_path / "s.sqlite3") as (conn, process):
            created = await conn.new_session(cwd=str(work), mcp_servers=[])
            sid = created.session_id
            assert created.modes is not None
            assert created.modes.current_mode_id == "ask"
            assert [m.id for m in created.modes.available_modes] == ["ask", "auto", "read-only"]
            assert created.config_options is not None
            assert [o.id for o in created.config_options] == ["mode", "model"]

            # Allowed once: the command runs, after exactly one request naming it.
            allowed = await conn.prompt(session_id=sid, prompt=prompt(f"!touch {work}/allowed"))
            assert allowed.stop_reason == "end_turn"
            assert (work / "allowed").exists()
            ((asked_sid, call, options),) = client.permissions
            assert asked_sid == sid
            assert [o.kind for o in options] == KINDS
            (start,) = [u for u in client.of(sid) if isinstance(u, ToolCallStart)]
            assert call.tool_call_id == start.tool_call_id
            assert call.kind == "execute"
            assert call.status == "pending"
            assert call.raw_input["command"] == f"touch {work}/allowed"
            RequestPermissionRequest(session_id=sid, tool_call=call, options=options)

            # Rejected: nothing runs, and the model is told so (it says what the tool said).
            async def reject(options: list[PermissionOption]) -> Any:
                return choose(options, "reject_once")

            client.on_permission = reject
            rejected = await conn.prompt(session_id=sid, prompt=prompt(f"!touch {work}/rejected"))
            assert rejected.stop_reason == "end_turn"
            assert not (work / "rejected").exists()
            told = "the user rejected the call to 'bash'; it did not run"
            assert told in results(client, sid)[-1]
            assert f"tool said:\n{told}" in client.text(sid)
        assert process.returncode == 0

    run(scenario())


def test_P9_a_cancel_answers_the_prompt_while_its_permission_request_is_unanswered(
    tmp_path: pathlib.Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()

    async def scenario() -> None:
        client = RecordingClient()
        async with server(client, tmp_path / "s.sqlite3") as (conn, process):
            sid = await new_session(conn, work)
            # The client answers only once released, after the cancel: too late.
            release = asyncio.Event()

            async def late(options: list[PermissionOption]) -> Any:
                await release.wait()
                return choose(options, "allow_once")

            client.on_permission = late
            asked = len(client.permissions)
            held = asyncio.ensure_future(
                conn.prompt(session_id=sid, prompt=prompt(f"!touch {work}/cancelled"))
            )
            while len(client.permissions) == asked:
                client.arrived.clear()
                await client.arrived.wait()
            await conn.cancel(session_id=sid)
            assert (await held).stop_reason == "cancelled"
            seen = len(client.of(sid))
            release.set()  # the late answer: ignored, no error, no update
            await round_trip(conn)
            await round_trip(conn)
            assert len(client.of(sid)) == seen, "an update followed the cancelled prompt"
            assert not (work / "cancelled").exists()
            # The session goes on: the next command asks again, and runs once allowed.
            client.on_permission = client.allow_once
            again = await conn.prompt(session_id=sid, prompt=prompt(f"!touch {work}/again"))
            assert again.stop_reason == "end_turn"
            assert (work / "again").exists()
            assert len(client.permissions) == asked + 2
        assert process.returncode == 0

    run(scenario())


def test_set_mode_from_ask_to_auto_mid_session_stops_asking(tmp_path: pathlib.Path) -> None:
    work = tmp_path / "work"
    work.mkdir()

    async def scenario() -> None:
        client = RecordingClient()
        async with server(client, tmp_path / "s.sqlite3") as (conn, process):
            sid = await new_session(conn, work)
            first = await conn.prompt(session_id=sid, prompt=prompt(f"!touch {work}/asked"))
            assert first.stop_reason == "end_turn"
            assert len(client.permissions) == 1
            # ask -> auto in the middle of the session: no request any more.
            asked = len(client.permissions)
            await conn.set_session_mode(mode_id="auto", session_id=sid)
            auto = await conn.prompt(session_id=sid, prompt=prompt(f"!touch {work}/auto"))
            assert auto.stop_reason == "end_turn"
            assert (work / "auto").exists()
            assert len(client.permissions) == asked
            modes = [u.current_mode_id for u in client.of(sid) if isinstance(u, CurrentModeUpdate)]
            assert modes == ["auto"]
            (switched,) = [u for u in client.of(sid) if isinstance(u, ConfigOptionUpdate)]
            assert switched.config_options[0].current_value == "auto"

            # read-only, as a config option: rejected without asking, and the model is told why.
            answer = await conn.set_config_option(
                config_id="mode", session_id=sid, value="read-only"
            )
            assert answer.config_options[0].current_value == "read-only"
            ro = await conn.prompt(session_id=sid, prompt=prompt(f"!touch {work}/read-only"))
            assert ro.stop_reason == "end_turn"
            assert not (work / "read-only").exists()
            assert len(client.permissions) == asked
            assert "read-only mode" in results(client, sid)[-1]
            modes = [u.current_mode_id for u in client.of(sid) if isinstance(u, CurrentModeUpdate)]
            assert modes == ["auto", "read-only"]

            with pytest.raises(RequestError) as unknown:
                await conn.set_session_mode(mode_id="yolo", session_id=sid)
            assert unknown.value.code == -32602
            assert "'yolo'" in str(unknown.value.data or unknown.value)
        assert process.returncode == 0

    run(scenario())


def test_always_allow_holds_for_the_rest_of_the_session_and_after_a_load(
    tmp_path: pathlib.Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    store = tmp_path / "s.sqlite3"

    async def always(options: list[PermissionOption]) -> Any:
        return choose(options, "allow_always")

    async def first() -> str:
        client = RecordingClient()
        client.on_permission = always
        async with server(client, store) as (conn, _):
            sid = await new_session(conn, work)
            for name in ("one", "two"):
                await conn.prompt(session_id=sid, prompt=prompt(f"!touch {work}/{name}"))
            assert len(client.permissions) == 1  # the second call was not asked about
        return sid

    async def second(sid: str) -> None:
        client = RecordingClient()
        async with server(client, store) as (conn, _):
            await conn.load_session(cwd=str(work), session_id=sid, mcp_servers=[])
            await conn.prompt(session_id=sid, prompt=prompt(f"!touch {work}/three"))
            assert client.permissions == []  # remembered from the session's records

    async def both() -> None:
        await second(await first())

    run(both())
    assert sorted(p.name for p in work.iterdir()) == ["one", "three", "two"]
