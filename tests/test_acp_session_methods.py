"""What ACP stabilised in 2026 (D507-D509): `session/close`, `session/resume`,
`session/delete`, `$/cancel_request`, message ids and usage, in process over memory streams,
each answer held to the schema where the pinned SDK knows it."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from acp import schema

from trio_agents import Finish, MemoryStore, OfflineModel, TextDelta, ToolCall, Usage
from trio_agents._cli import main
from trio_agents.acp import AcpServer
from trio_agents.testing import ScriptedModel, ScriptedStep, reply, tool_step

from .support.acp_peer import AcpPeer, GatedStore, acp_peer


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


async def new_session(peer: AcpPeer) -> str:
    result = await peer.result("session/new", {"cwd": "/tmp", "mcpServers": []})
    return str(result["sessionId"])


async def test_initialize_advertises_resume_close_and_delete() -> None:
    async with acp_peer() as peer:
        result = await peer.result("initialize", {"protocolVersion": 1})
        schema.InitializeResponse.model_validate(result)
        assert result["agentCapabilities"]["sessionCapabilities"] == {
            "list": {},
            "resume": {},
            "close": {},
            "delete": {},
        }


async def test_close_cancels_the_turn_answers_its_prompt_first_and_frees_the_session() -> None:
    store = MemoryStore()
    async with acp_peer(store=store) as peer:
        sid = await new_session(peer)
        prompt = await peer.start_request(
            "session/prompt", {"sessionId": sid, "prompt": text("/hold")}
        )
        await trio.testing.wait_all_tasks_blocked()
        closed = await peer.start_request("session/close", {"sessionId": sid})
        assert (await peer.answer(closed))["result"] == {}
        answers = [f for f in peer.frames if f.get("id") in (prompt, closed)]
        assert [f["id"] for f in answers] == [prompt, closed]  # the prompt's answer first
        assert answers[0]["result"] == {"stopReason": "cancelled"}
        # A plain prompt's answer is its outcome: no steering notification tells it again.
        assert not [f for f in peer.frames if f.get("method") == "_trio-agents/prompt_outcome"]
        assert peer.runtime.agents.list() == []  # its agent is closed
        after = await peer.request("session/prompt", {"sessionId": sid, "prompt": text("x")})
        assert after["error"]["code"] == -32602
        again = await peer.request("session/close", {"sessionId": sid})
        assert "is not open on this connection" in again["error"]["message"]
        # Still stored: it loads again.
        loaded = await peer.result(
            "session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}
        )
        schema.LoadSessionResponse.model_validate(loaded)


async def test_delete_removes_a_session_from_the_list_closing_it_first_if_open() -> None:
    store = MemoryStore()
    async with acp_peer(store=store) as peer:
        kept, closed_one, open_one = [await new_session(peer) for _ in range(3)]
        for sid in (kept, closed_one, open_one):
            await peer.result("session/prompt", {"sessionId": sid, "prompt": text("hi")})
        await peer.result("session/close", {"sessionId": closed_one})
        prompt = await peer.start_request(
            "session/prompt", {"sessionId": open_one, "prompt": text("/hold")}
        )
        await trio.testing.wait_all_tasks_blocked()
        for sid in (closed_one, open_one):
            deleted = await peer.result("session/delete", {"sessionId": sid})
            assert deleted == {}
        # The open one was closed first: its prompt answered, its agent gone.
        [answer] = [f for f in peer.frames if f.get("id") == prompt]
        assert answer["result"] == {"stopReason": "cancelled"}
        assert [a.id for a in peer.runtime.agents.list()] == [kept]
        listed = await peer.result("session/list", {})
        assert [info["sessionId"] for info in listed["sessions"]] == [kept]
        # Deleting again, or a session never made, succeeds silently (the spec's SHOULD).
        assert await peer.result("session/delete", {"sessionId": open_one}) == {}
        assert await peer.result("session/delete", {"sessionId": "never-made"}) == {}
        gone = await peer.request(
            "session/load", {"sessionId": open_one, "cwd": "/tmp", "mcpServers": []}
        )
        assert gone["error"]["code"] == -32602
        assert open_one in gone["error"]["message"]
        bad = await peer.request("session/delete", {})
        assert bad["error"]["code"] == -32602
        assert "sessionId" in bad["error"]["message"]


async def test_each_message_has_one_id_live_and_the_same_in_a_replay() -> None:
    store = MemoryStore()
    # A turn of two steps, each with text: two assistant messages, streamed in pieces.
    steps = [
        tool_step(("bash_output", {"job_id": "none"}), text="Looking first. "),
        reply("Found nothing there.", chunks=4),
    ]
    model = ScriptedModel(steps)

    def chunks(updates: list[dict[str, Any]], kind: str) -> list[tuple[str, str]]:
        return [
            (u["messageId"], u["content"]["text"]) for u in updates if u["sessionUpdate"] == kind
        ]

    def merged(pieces: list[tuple[str, str]]) -> dict[str, str]:
        whole: dict[str, str] = {}
        for message_id, piece in pieces:
            whole[message_id] = whole.get(message_id, "") + piece
        return whole

    async with acp_peer(lambda: model, store=store) as peer:
        sid = await new_session(peer)
        await peer.result("session/prompt", {"sessionId": sid, "prompt": text("look")})
        live = merged(chunks(peer.updates(sid), "agent_message_chunk"))
    assert list(live.values()) == ["Looking first. ", "Found nothing there."]
    assert len(set(live)) == 2
    async with acp_peer(lambda: model, store=store) as peer:
        await peer.result("session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
        updates = peer.updates(sid)
        for update in updates:
            schema.SessionNotification.model_validate({"sessionId": sid, "update": update})
        assert merged(chunks(updates, "agent_message_chunk")) == live
        [(user_id, said)] = chunks(updates, "user_message_chunk")
    assert said == "look"
    assert user_id not in live


def _step_using(text_or_call: str | tuple[str, dict[str, Any]], used: Usage) -> ScriptedStep:
    if isinstance(text_or_call, str):
        return ScriptedStep((TextDelta(text_or_call), Finish("stop", used)))
    return ScriptedStep((ToolCall("c1", *text_or_call), Finish("tool_calls", used)))


async def test_a_turns_usage_is_in_its_answer_and_each_calls_in_a_usage_update() -> None:
    steps = [
        _step_using(("bash_output", {"job_id": "none"}), Usage(100, 20)),
        _step_using("done", Usage(150, 5)),
    ]
    async with acp_peer(lambda: ScriptedModel(steps), context_window=8000) as peer:
        sid = await new_session(peer)
        answer = await peer.result("session/prompt", {"sessionId": sid, "prompt": text("go")})
        schema.PromptResponse.model_validate(answer)
        assert answer == {
            "stopReason": "end_turn",
            "usage": {"totalTokens": 275, "inputTokens": 250, "outputTokens": 25},
        }
        usages = [u for u in peer.updates(sid) if u["sessionUpdate"] == "usage_update"]
        for update in usages:
            schema.SessionNotification.model_validate({"sessionId": sid, "update": update})
        assert [(u["used"], u["size"]) for u in usages] == [(120, 8000), (155, 8000)]
    # Without the window's size there is no usage_update (the protocol wants it), and a
    # model that says nothing of usage leaves it out of the answer.
    async with acp_peer(lambda: ScriptedModel(steps)) as peer:
        sid = await new_session(peer)
        await peer.result("session/prompt", {"sessionId": sid, "prompt": text("go")})
        assert not [u for u in peer.updates(sid) if u["sessionUpdate"] == "usage_update"]
    async with acp_peer(lambda: ScriptedModel([reply("hi")]), context_window=8000) as peer:
        sid = await new_session(peer)
        answer = await peer.result("session/prompt", {"sessionId": sid, "prompt": text("go")})
        assert answer == {"stopReason": "end_turn"}
        assert not [u for u in peer.updates(sid) if u["sessionUpdate"] == "usage_update"]


async def test_a_loads_updates_all_come_before_its_answer() -> None:
    # The ACP test kit's LOAD-002 takes any update after a load's answer for more history:
    # the commands update comes with the replay, before the answer (D514).
    store = MemoryStore()
    async with acp_peer(store=store) as peer:
        sid = await new_session(peer)
        await peer.result("session/prompt", {"sessionId": sid, "prompt": text("hi")})
    for live in (False, True):
        async with acp_peer(store=store) as peer:
            if live:
                load: dict[str, Any] = {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}
                await peer.result("session/load", load)
            loaded = await peer.start_request(
                "session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}
            )
            await peer.answer(loaded)
            await trio.testing.wait_all_tasks_blocked()
            at = next(i for i, f in enumerate(peer.frames) if f.get("id") == loaded)
            before = [
                f["params"]["update"]["sessionUpdate"]
                for f in peer.frames[:at]
                if f.get("method") == "session/update"
            ]
            after = [f for f in peer.frames[at + 1 :] if f.get("method") == "session/update"]
            assert "available_commands_update" in before
            assert after == []


async def test_resume_makes_a_stored_session_live_without_replaying_it() -> None:
    store = MemoryStore()
    model = ScriptedModel([reply("first answer"), reply("second answer")])
    async with acp_peer(lambda: model, store=store) as peer:
        sid = await new_session(peer)
        await peer.result("session/prompt", {"sessionId": sid, "prompt": text("hello")})
    async with acp_peer(lambda: model, store=store) as peer:
        result = await peer.result("session/resume", {"sessionId": sid, "cwd": "/tmp"})
        schema.LoadSessionResponse.model_validate(result)  # the same shape: modes, options
        kinds = {u["sessionUpdate"] for u in peer.updates(sid)}
        assert not kinds & {"user_message_chunk", "agent_message_chunk", "tool_call"}
        answer = await peer.result("session/prompt", {"sessionId": sid, "prompt": text("again")})
        assert answer == {"stopReason": "end_turn"}
        # A live session resumes too, again without a replay.
        before = len(peer.updates(sid))
        await peer.result("session/resume", {"sessionId": sid, "cwd": "/tmp"})
        assert not [
            u for u in peer.updates(sid)[before:] if u["sessionUpdate"].endswith("message_chunk")
        ]


async def test_cancel_request_of_a_prompt_cancels_its_turn() -> None:
    async with acp_peer() as peer:
        sid = await new_session(peer)
        prompt = await peer.start_request(
            "session/prompt", {"sessionId": sid, "prompt": text("/hold")}
        )
        await trio.testing.wait_all_tasks_blocked()
        await peer.notify("$/cancel_request", {"requestId": prompt})
        assert (await peer.answer(prompt))["result"] == {"stopReason": "cancelled"}


async def test_cancel_request_of_a_load_answers_minus_32800_and_leaves_nothing() -> None:
    store = GatedStore()
    async with acp_peer(store=store) as peer:
        sid = await new_session(peer)
    async with acp_peer(store=store) as peer:
        store.gate = trio.Event()
        load = await peer.start_request(
            "session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}
        )
        await trio.testing.wait_all_tasks_blocked()
        await peer.notify("$/cancel_request", {"requestId": load})
        answer = await peer.answer(load)
        assert answer["error"]["code"] == -32800
        assert peer.runtime.agents.list() == []
        # Unknown or finished ids are ignored; the connection goes on.
        await peer.notify("$/cancel_request", {"requestId": 12345})
        await peer.notify("$/cancel_request", {"requestId": load})
        store.gate = None
        loaded = await peer.result(
            "session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}
        )
        schema.LoadSessionResponse.model_validate(loaded)


def test_a_context_window_that_is_not_a_positive_whole_number_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for bad in ("0", "-5", "1.5", "lots"):
        with pytest.raises(SystemExit) as usage:
            main(["acp", "--context-window", bad])
        assert usage.value.code == 2
        error = capsys.readouterr().err.splitlines()[-1]
        assert error.endswith(
            f"--context-window: must be a whole number of tokens > 0, got {bad!r}"
        )
    with pytest.raises(ValueError, match="context_window must be a number of tokens > 0, got 0"):
        AcpServer(MemoryStore(), OfflineModel, context_window=0)  # type: ignore[arg-type]
