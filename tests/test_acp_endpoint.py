"""The ACP mode's scripted chat-completions endpoint, read by the OpenAI-compatible model (our
own SSE client) and by httpx directly: standard streams, tool calls fitted to the agent's
shell tool, holds a release or a disconnect ends, and the plain answer to unscripted calls."""

from __future__ import annotations

import json
from typing import Any

import httpx
import trio

from trio_agents import AgentOptions, Finish, Message, ModelRequest, OpenAICompatibleModel
from trio_agents._model import TextDelta, ToolCall, ToolSpec
from trio_agents._shell_tools import BashTools
from trio_agents.testing._acp._endpoint import (
    API_KEY,
    MODEL,
    Hold,
    Say,
    ScriptedEndpoint,
    Shell,
    locate,
    open_endpoint,
    shell_call,
)

BASH_SPECS = tuple(ToolSpec(t.name, t.description, t.parameters) for t in BashTools().tools)


def model(endpoint: ScriptedEndpoint) -> OpenAICompatibleModel:
    return OpenAICompatibleModel(MODEL, base_url=endpoint.base_url, api_key=API_KEY, max_retries=0)


def request(*messages: Message) -> ModelRequest:
    return ModelRequest(messages, BASH_SPECS, AgentOptions())


async def collect(endpoint: ScriptedEndpoint, req: ModelRequest) -> list[Any]:
    return [chunk async for chunk in model(endpoint).stream(req)]


async def test_a_scripted_turn_streams_text_then_a_tool_call_then_the_answer() -> None:
    async with open_endpoint() as endpoint:
        endpoint.scripts["acp-check-1"] = (Shell("echo hi"), Say("all done now, truly"))
        user = Message("user", "please acp-check-1")
        first = await collect(endpoint, request(user))
        calls = [c for c in first if isinstance(c, ToolCall)]
        assert [(c.name, c.arguments["command"]) for c in calls] == [("bash", "echo hi")]
        assert isinstance(first[-1], Finish)
        assert first[-1].reason == "tool_calls"
        assert calls[0].arguments["description"]  # a required string is filled
        tool = Message("tool", "hi", call_id=calls[0].call_id)
        second = await collect(
            endpoint, request(user, Message("assistant", "", tuple(calls)), tool)
        )
        text = "".join(c.text for c in second if isinstance(c, TextDelta))
        assert text == "all done now, truly"
        assert sum(isinstance(c, TextDelta) for c in second) == 3  # streamed in pieces
        assert [s.index for s in endpoint.served] == [0, 1]
        assert endpoint.served[0].tool == "bash"


async def test_an_unscripted_call_gets_a_plain_ok() -> None:
    async with open_endpoint() as endpoint:
        chunks = await collect(endpoint, request(Message("user", "make a title")))
        assert "".join(c.text for c in chunks if isinstance(c, TextDelta)) == "ok"
        assert endpoint.unscripted == 1
        assert endpoint.served == []


async def test_a_hold_waits_for_its_release() -> None:
    async with open_endpoint() as endpoint:
        endpoint.scripts["acp-check-2"] = (Hold("partial answer"),)
        got: list[Any] = []

        async def consume() -> None:
            got.extend(await collect(endpoint, request(Message("user", "acp-check-2"))))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume)
            with trio.fail_after(10):
                await endpoint.held("acp-check-2")
            assert got == []
            endpoint.release("acp-check-2")
        assert isinstance(got[-1], Finish)
        assert got[-1].reason == "stop"


async def test_a_client_that_goes_away_ends_the_hold() -> None:
    async with open_endpoint() as endpoint:
        endpoint.scripts["acp-check-3"] = (Hold("partial"),)
        with trio.move_on_after(10):
            async with trio.open_nursery() as nursery:

                async def consume() -> None:
                    await collect(endpoint, request(Message("user", "acp-check-3")))

                nursery.start_soon(consume)
                await endpoint.held("acp-check-3")
                nursery.cancel_scope.cancel()  # the model closes its response
        with trio.fail_after(10):
            await endpoint.served[0].ended.wait()
        assert endpoint.served[0].gone


async def test_non_streaming_calls_and_the_model_list() -> None:
    async with open_endpoint() as endpoint, httpx.AsyncClient() as client:
        endpoint.scripts["acp-check-4"] = (Shell("ls"),)
        tools = [
            {"type": "function", "function": {"name": s.name, "parameters": s.parameters}}
            for s in BASH_SPECS
        ]
        body = {
            "model": MODEL,
            "messages": [{"role": "user", "content": "acp-check-4"}],
            "tools": tools,
        }
        answer = (await client.post(f"{endpoint.base_url}/chat/completions", json=body)).json()
        choice = answer["choices"][0]
        assert choice["finish_reason"] == "tool_calls"
        call = choice["message"]["tool_calls"][0]["function"]
        assert call["name"] == "bash"
        assert json.loads(call["arguments"])["command"] == "ls"
        models = (await client.get(f"{endpoint.base_url}/models")).json()
        assert models["data"][0]["id"] == MODEL
        missing = await client.get(f"{endpoint.base_url}/nothing")
        assert missing.status_code == 404


def test_locate_counts_the_steps_after_the_last_user_message() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "x acp-check-7"}]},
        {"role": "assistant", "content": "", "tool_calls": []},
        {"role": "tool", "content": "out"},
    ]
    assert locate(messages) == ("acp-check-7", 1)
    assert locate([*messages, {"role": "user", "content": "no token"}]) == (None, 0)
    assert locate("nonsense") == (None, 0)


def test_shell_call_fits_the_offered_tool() -> None:
    codex_like: list[dict[str, Any]] = [
        {"type": "function", "function": {"name": "read_file", "parameters": {}}},
        {
            "type": "function",
            "function": {
                "name": "shell",
                "parameters": {
                    "type": "object",
                    "required": ["command", "timeout_ms"],
                    "properties": {"command": {"type": "array"}, "timeout_ms": {"type": "integer"}},
                },
            },
        },
    ]
    assert shell_call(codex_like, "sleep 1") == (
        "shell",
        {"command": ["bash", "-lc", "sleep 1"], "timeout_ms": 60000},
    )
    assert shell_call([{"type": "function", "function": {"name": "read_file"}}], "x") is None
    assert shell_call(None, "x") is None


async def test_an_agent_without_a_shell_tool_gets_the_next_step() -> None:
    async with open_endpoint() as endpoint:
        endpoint.scripts["acp-check-5"] = (Shell("sleep 30"), Say("went on without it"))
        no_tools = ModelRequest((Message("user", "acp-check-5"),), (), AgentOptions())
        chunks = await collect(endpoint, no_tools)
        assert "".join(c.text for c in chunks if isinstance(c, TextDelta)) == "went on without it"
        assert endpoint.served[0].step == Say("went on without it")
        assert endpoint.served[0].tool is None
