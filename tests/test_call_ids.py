"""Tool call ids are unique within a session, across steps and across reloads (issue 16, item
10a): `toolCallId` `offline-1` appeared twice in one session after `session/load`, so an editor
that keys a session's calls by id mixed the new call up with the old one."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from trio_agents import (
    Finish,
    MemoryStore,
    ModelChunk,
    ModelRequest,
    TextDelta,
    ToolCall,
    ToolContext,
    open_runtime,
)

from .support.acp_peer import acp_peer


class SameIdModel:
    """Calls `noop` with the id `c1` on every step of every turn, then answers: a model (or
    server) whose ids repeat across steps and restart with every new instance."""

    def __init__(self, calls_per_turn: int = 2) -> None:
        self.calls_per_turn = calls_per_turn

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        since = 0
        for message in request.messages:
            if message.role == "user" and message.source in (None, "prompt"):
                since = 0
            elif message.role == "tool":
                since += 1
        if since < self.calls_per_turn:
            yield ToolCall("c1", "noop", {})
            yield ToolCall("c1", "noop", {})  # repeated within the step too
            yield Finish("tool_calls")
        else:
            yield TextDelta("done")
            yield Finish("stop")


class Noop:
    name = "noop"
    description = "does nothing"
    parameters: Mapping[str, Any] = {"type": "object", "properties": {}}

    async def __call__(self, arguments: Any, context: ToolContext) -> str:
        return f"ran {context.call_id}"


async def test_ids_stay_unique_across_steps_and_a_resume_and_results_match_them() -> None:
    store = MemoryStore()
    async with open_runtime(store) as rt:
        handle = await rt.agents.create(model=SameIdModel(), tools=[Noop()], session_id="s")
        handle.agent.send("one")
        await handle.agent.wait_idle()
        await handle.aclose()
        handle = await rt.agents.resume("s", model=SameIdModel(), tools=[Noop()])
        handle.agent.send("two")
        await handle.agent.wait_idle()
        records = handle.agent.session.records
        await handle.aclose()
    calls = [str(r.data["call_id"]) for r in records if r.type == "tool/call"]
    results = [str(r.data["call_id"]) for r in records if r.type == "tool/result"]
    assert len(calls) == 4
    assert len(set(calls)) == len(calls), calls
    assert sorted(results) == sorted(calls)
    assert calls[:2] == ["c1", "c1#2"]  # the first ones keep the model's id


def _live_call_ids(frames: list[dict[str, Any]]) -> list[str]:
    """The toolCallIds of the live (not replayed) tool_call updates: a replay repeats the
    history's, as it should."""
    ids: list[str] = []
    for frame in frames:
        update = frame.get("params", {}).get("update", {})
        if update.get("sessionUpdate") == "tool_call":
            ids.append(str(update["toolCallId"]))
    return ids


@pytest.mark.subprocess
async def test_an_acp_session_reloaded_never_reuses_a_tool_call_id() -> None:
    store = MemoryStore()
    seen: list[str] = []
    sid = ""
    for round_ in range(3):
        async with acp_peer(store=store) as peer:
            if not sid:
                result = await peer.result("session/new", {"cwd": "/tmp", "mcpServers": []})
                sid = str(result["sessionId"])
            else:
                await peer.result(
                    "session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}
                )
            replayed = len(_live_call_ids(peer.frames))
            assert replayed == len(seen)  # the history, replayed
            for command in (f"!echo {round_}a", f"!echo {round_}b"):
                params = {"sessionId": sid, "prompt": [{"type": "text", "text": command}]}
                await peer.result("session/prompt", params)
            seen += _live_call_ids(peer.frames)[replayed:]
    assert len(seen) == 6
    assert len(set(seen)) == 6, seen
    assert seen == [f"offline-{n}" for n in range(1, 7)]  # the offline model counts on
