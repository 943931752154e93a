"""ACP v2, negotiated (issue 37, item 5; design D526): a client that asks for protocol 2 gets
the v2 draft's wire, a v1 client the v1 wire unchanged. In process over memory streams; every
frame the server sends is held to the schema of the version the connection speaks
(`acp_peer`: `@agentclientprotocol/sdk` 2.4.0's `schema/v1` or `schema/v2`)."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing

from trio_agents import MemoryStore
from trio_agents.acp import _v2 as v2
from trio_agents.testing import ScriptedModel, reply, tool_step

from .support.acp_peer import AcpPeer, acp_peer

V2_INIT = {"protocolVersion": 2, "info": {"name": "a v2 client", "version": "1"}}


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


async def v2_session(peer: AcpPeer, cwd: str = "/tmp") -> str:
    result = await peer.result("initialize", V2_INIT)
    assert result["protocolVersion"] == 2
    made = await peer.result("session/new", {"cwd": cwd})
    return str(made["sessionId"])


async def send_prompt(peer: AcpPeer, sid: str, said: str) -> int:
    return await peer.start_request("session/prompt", {"sessionId": sid, "prompt": text(said)})


async def until_idle(peer: AcpPeer, sid: str) -> None:
    with trio.fail_after(10):
        while not any(s["state"] == "idle" for s in states(peer, sid)):
            await trio.testing.wait_all_tasks_blocked()


async def permission_asked(peer: AcpPeer, asked: list[dict[str, Any]]) -> tuple[str, Any]:
    """A v2 session, a prompt whose model calls a command, and the permission request it
    sent (the peer's requests collected in `asked`)."""
    peer.on_request = asked.append
    sid = await v2_session(peer)
    await peer.answer(await send_prompt(peer, sid, "x"))
    with trio.fail_after(10):
        while not asked:
            await trio.testing.wait_all_tasks_blocked()
    return sid, asked[0]


def states(peer: AcpPeer, sid: str) -> list[dict[str, Any]]:
    return [u for u in peer.updates(sid) if u["sessionUpdate"] == "state_update"]


def position(peer: AcpPeer, predicate: Callable[[dict[str, Any]], bool]) -> int:
    for index, frame in enumerate(peer.frames):
        if predicate(frame):
            return index
    raise AssertionError("no such frame")


def update_of(kind: str, **fields: Any) -> Callable[[dict[str, Any]], bool]:
    def matches(frame: dict[str, Any]) -> bool:
        if frame.get("method") != "session/update":
            return False
        update = frame["params"]["update"]
        same = all(update.get(k) == v for k, v in fields.items())
        return update["sessionUpdate"] == kind and same

    return matches


@pytest.mark.parametrize(("asked", "answered"), [(0, 1), (1, 1), (2, 2), (3, 2), (65535, 2)])
async def test_initialize_answers_the_highest_version_at_or_below_the_one_asked(
    asked: int, answered: int
) -> None:
    async with acp_peer() as peer:
        result = await peer.result("initialize", {**V2_INIT, "protocolVersion": asked})
        assert result["protocolVersion"] == answered
        if answered == 2:
            assert result["info"] == {"name": "trio-agents", "version": "0"}
            session = result["capabilities"]["session"]
            # Every marker an object: {} is supported (booleans are gone in v2).
            assert session == {
                "prompt": {"embeddedContext": {}},
                "mcp": {"stdio": {}, "http": {}},
                "delete": {},
            }
            assert "agentCapabilities" not in result
        else:
            assert result["agentCapabilities"]["loadSession"] is True
            assert "capabilities" not in result


async def test_a_prompt_is_answered_with_its_receipt_before_its_turn_ends() -> None:
    model = ScriptedModel([reply("hello there")], hold_all=True)
    async with acp_peer(lambda: model) as peer:
        sid = await v2_session(peer)
        prompt = await send_prompt(peer, sid, "hi")
        receipt = (await peer.answer(prompt))["result"]
        await trio.testing.wait_all_tasks_blocked()
        assert model.held == 1  # the model is still streaming: the turn is not over
        message_id = receipt["messageId"]
        assert isinstance(message_id, str)
        assert message_id
        assert "stopReason" not in receipt
        assert states(peer, sid) == [{"sessionUpdate": "state_update", "state": "running"}]
        model.release()
        with trio.fail_after(10):
            while len(states(peer, sid)) < 2:
                await trio.testing.wait_all_tasks_blocked()
        assert states(peer, sid)[-1] == {
            "sessionUpdate": "state_update",
            "state": "idle",
            "stopReason": "end_turn",
        }
        # receipt, then where the prompt went (the same id), running, the text, idle.
        answered = position(peer, lambda f: f.get("id") == prompt and "method" not in f)
        inserted = position(peer, update_of("user_message", messageId=message_id))
        ran = position(peer, update_of("state_update", state="running"))
        said = position(peer, update_of("agent_message_chunk"))
        ended = position(peer, update_of("state_update", state="idle"))
        assert answered < inserted < ran < said < ended
        (user,) = [u for u in peer.updates(sid) if u["sessionUpdate"] == "user_message"]
        assert user["content"] == text("hi")


async def test_a_cancelled_turn_ends_with_one_idle_cancelled_and_nothing_after_it() -> None:
    model = ScriptedModel([reply("never finished")], hold_all=True)
    async with acp_peer(lambda: model) as peer:
        sid = await v2_session(peer)
        prompt = await send_prompt(peer, sid, "x")
        await peer.answer(prompt)
        await trio.testing.wait_all_tasks_blocked()
        await peer.notify("session/cancel", {"sessionId": sid})
        await until_idle(peer, sid)
        await trio.testing.wait_all_tasks_blocked()
        idles = [s for s in states(peer, sid) if s["state"] == "idle"]
        cancelled = {"sessionUpdate": "state_update", "state": "idle", "stopReason": "cancelled"}
        assert idles == [cancelled]
        last = peer.updates(sid)[-1]
        assert last == idles[0]
        # The prompt was answered once: by its receipt.
        assert len([f for f in peer.frames if f.get("id") == prompt]) == 1


async def test_a_permission_request_is_bracketed_by_requires_action_and_running() -> None:
    call = ("bash", {"command": "true", "description": "nothing"})
    model = ScriptedModel([tool_step(call), reply("done")])
    async with acp_peer(lambda: model, mode="ask") as peer:
        asked: list[dict[str, Any]] = []
        sid, request = await permission_asked(peer, asked)
        assert len(asked) == 1
        params = request["params"]
        assert params["title"] == "true"  # the call's title: its command
        assert params["subject"]["type"] == "tool_call"
        assert params["subject"]["toolCall"]["kind"] == "execute"
        assert "toolCall" not in params
        allow = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
        frame = {"jsonrpc": "2.0", "id": request["id"], "result": allow}
        await peer.send_raw(json.dumps(frame).encode() + b"\n")
        await until_idle(peer, sid)
        assert [s["state"] for s in states(peer, sid)] == [
            "running", "requires_action", "running", "idle"
        ]  # fmt: skip
        waits = position(peer, update_of("state_update", state="requires_action"))
        asks = position(peer, lambda f: f.get("method") == "session/request_permission")
        assert waits < asks
        assert states(peer, sid)[-1]["stopReason"] == "end_turn"


async def test_a_tool_call_begins_with_a_tool_call_update_and_a_diff_is_a_patch(
    tmp_path: pathlib.Path,
) -> None:
    (tmp_path / "f.txt").write_text("one\n")
    edit = ("edit", {"path": "f.txt", "old_string": "one", "new_string": "two"})
    model = ScriptedModel([tool_step(edit), reply("ok")])
    async with acp_peer(lambda: model) as peer:
        sid = await v2_session(peer, str(tmp_path))
        prompt = await send_prompt(peer, sid, "x")
        await peer.answer(prompt)
        await until_idle(peer, sid)
        kinds = [u["sessionUpdate"] for u in peer.updates(sid)]
        assert "tool_call" not in kinds
        first = next(u for u in peer.updates(sid) if u["sessionUpdate"] == "tool_call_update")
        assert (first["status"], first["kind"]) == ("pending", "edit")
        path = str(tmp_path / "f.txt")
        (diff,) = [c for c in first["content"] if c["type"] == "diff"]
        assert diff["changes"] == [{"operation": "modify", "path": path}]
        assert diff["patch"]["format"] == "git_patch"
        assert "-one\n+two\n" in diff["patch"]["text"]
        assert (tmp_path / "f.txt").read_text() == "two\n"


async def test_methods_v2_removed_are_not_found_and_v1_keeps_them() -> None:
    async with acp_peer() as peer:
        sid = await v2_session(peer)
        calls: list[tuple[str, dict[str, Any]]] = [
            ("session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}),
            ("session/set_mode", {"sessionId": sid, "modeId": "auto"}),
            ("authenticate", {"methodId": "x"}),
        ]
        for method, params in calls:
            answer = await peer.request(method, params)
            assert answer["error"]["code"] == -32601, answer
            assert "not an ACP v2 method" in answer["error"]["message"]
    async with acp_peer() as peer:
        await peer.result("initialize", {"protocolVersion": 1})
        made = await peer.result("session/new", {"cwd": "/tmp", "mcpServers": []})
        assert "modes" in made
        assert (
            await peer.result(
                "session/set_mode", {"sessionId": made["sessionId"], "modeId": "auto"}
            )
            == {}
        )


async def test_config_options_are_named_by_config_id_and_no_mode_update_is_sent() -> None:
    async with acp_peer() as peer:
        sid = await v2_session(peer)
        switched = await peer.result(
            "session/set_config_option",
            {"sessionId": sid, "configId": "mode", "type": "id", "value": "read-only"},
        )
        mode = next(o for o in switched["configOptions"] if o["configId"] == "mode")
        assert mode["currentValue"] == "read-only"
        assert all("id" not in o for o in switched["configOptions"])
        kinds = {u["sessionUpdate"] for u in peer.updates(sid)}
        assert "current_mode_update" not in kinds


async def test_resume_replays_from_the_start_only_when_asked() -> None:
    store = MemoryStore()
    async with acp_peer(store=store) as peer:
        sid = await v2_session(peer)
        prompt = await send_prompt(peer, sid, "hi")
        receipt = (await peer.answer(prompt))["result"]
        await until_idle(peer, sid)
    for replay_from, replayed in [(None, False), ({"type": "start"}, True)]:
        async with acp_peer(store=store) as peer:
            await peer.result("initialize", V2_INIT)
            params: dict[str, Any] = {"sessionId": sid, "cwd": "/tmp"}
            if replay_from is not None:
                params["replayFrom"] = replay_from
            resumed = await peer.start_request("session/resume", params)
            assert "result" in await peer.answer(resumed)
            # The session's state, after the replay and before the answer.
            snapshot = position(peer, update_of("state_update", state="idle"))
            answered = [i for i, f in enumerate(peer.frames) if f.get("id") == resumed]
            assert snapshot < answered[0]
            users = [u for u in peer.updates(sid) if u["sessionUpdate"] == "user_message_chunk"]
            if replayed:
                # The history, before the answer, with the ids the live session used.
                assert [u["messageId"] for u in users] == [receipt["messageId"]]
                assert any(u["sessionUpdate"] == "agent_message_chunk" for u in peer.updates(sid))
            else:
                assert users == []
            bad = await peer.request("session/resume", {**params, "replayFrom": {"type": "end"}})
            assert bad["error"]["code"] == -32602


def test_the_v1_update_translation_drops_what_v2_lacks_and_keeps_the_rest() -> None:
    assert v2.update({"sessionUpdate": "current_mode_update", "currentModeId": "ask"}) is None
    assert v2.update({"sessionUpdate": "user_message_chunk", "content": {}}) is None
    usage = {"sessionUpdate": "usage_update", "used": 1, "size": 2}
    assert v2.update(usage) == usage
    commands = v2.update(
        {
            "sessionUpdate": "available_commands_update",
            "availableCommands": [{"name": "x", "description": "y", "input": {"hint": "h"}}],
        }
    )
    assert commands is not None
    assert commands["availableCommands"] == [
        {"type": "command", "name": "x", "description": "y", "input": {"type": "text", "hint": "h"}}
    ]
    added = v2.update(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "c",
            "content": [{"type": "diff", "path": "/w/new.txt", "newText": "a\n"}],
        }
    )
    assert added is not None
    (diff,) = added["content"]
    assert diff["changes"] == [{"operation": "add", "path": "/w/new.txt"}]
    assert "new file mode" in diff["patch"]["text"]
    assert "+a\n" in diff["patch"]["text"]


async def test_a_cancelled_permission_request_ends_the_turn_with_no_running_before_the_idle() -> (
    None
):
    call = ("bash", {"command": "true", "description": "nothing"})
    model = ScriptedModel([tool_step(call), reply("never")])
    async with acp_peer(lambda: model, mode="ask") as peer:
        sid, request = await permission_asked(peer, [])
        cancelled = {"outcome": {"outcome": "cancelled"}}
        frame = {"jsonrpc": "2.0", "id": request["id"], "result": cancelled}
        await peer.send_raw(json.dumps(frame).encode() + b"\n")
        await until_idle(peer, sid)
        assert [(s["state"], s.get("stopReason")) for s in states(peer, sid)] == [
            ("running", None), ("requires_action", None), ("idle", "cancelled")
        ]  # fmt: skip


async def test_a_connection_speaks_the_version_its_first_initialize_negotiated() -> None:
    async with acp_peer() as peer:
        assert (await peer.result("initialize", V2_INIT))["protocolVersion"] == 2
        again = await peer.result("initialize", {"protocolVersion": 1})
        assert again["protocolVersion"] == 2
        assert "info" in again
    async with acp_peer() as peer:
        assert (await peer.result("initialize", {"protocolVersion": 1}))["protocolVersion"] == 1
        again = await peer.result("initialize", V2_INIT)
        assert again["protocolVersion"] == 1
        assert "agentInfo" in again
