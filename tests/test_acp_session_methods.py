"""The session methods ACP stabilised in 2026 (D507): `session/close`, `session/resume` and
`$/cancel_request`, in process over memory streams, each answer held to the schema where
the pinned SDK knows it."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing
from acp import schema

from trio_agents import MemoryStore
from trio_agents.testing import ScriptedModel, reply

from .support.acp_peer import AcpPeer, GatedStore, acp_peer


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


async def new_session(peer: AcpPeer) -> str:
    result = await peer.result("session/new", {"cwd": "/tmp", "mcpServers": []})
    return str(result["sessionId"])


async def test_initialize_advertises_resume_and_close() -> None:
    async with acp_peer() as peer:
        result = await peer.result("initialize", {"protocolVersion": 1})
        schema.InitializeResponse.model_validate(result)
        assert result["agentCapabilities"]["sessionCapabilities"] == {
            "list": {},
            "resume": {},
            "close": {},
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
