"""The ACP mode's scripted chat-completions endpoint, read by the OpenAI-compatible model (our
own SSE client) and by httpx directly: standard streams, tool calls fitted to the agent's
shell tool, holds a release or a disconnect ends, and the plain answer to unscripted calls;
the Responses API's text streams, for agents that speak only it."""

from __future__ import annotations

import json
from typing import Any

import httpx
import trio

from agent_conformance._acp._endpoint import (
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
from agent_conformance._acp._responses import user_and_steps
from trio_agents import AgentOptions, Finish, Message, ModelRequest, OpenAICompatibleModel
from trio_agents._model._seam import TextDelta, ToolCall, ToolSpec
from trio_agents._shell._bash_tools import BashTools

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


def sse_events(raw: str) -> list[tuple[str, dict[str, Any]]]:
    """(event type, data) of each `event:`/`data:` pair of a Responses stream."""
    events: list[tuple[str, dict[str, Any]]] = []
    for block in raw.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if fields:
            data = json.loads(fields["data"])
            assert data["type"] == fields["event"]  # the type is in both, as OpenAI sends it
            events.append((fields["event"], data))
    return events


def responses_input(*items: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"type": "message", "role": "developer", "content": "instructions"},
        *items,
    ]


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


async def test_a_responses_stream_is_the_scripted_text_then_completed() -> None:
    async with open_endpoint() as endpoint, httpx.AsyncClient() as client:
        endpoint.scripts["acp-check-8"] = (Say("three little pieces"),)
        body = {"model": MODEL, "input": responses_input(user("go acp-check-8")), "stream": True}
        raw = await client.post(f"{endpoint.base_url}/responses", json=body)
        assert raw.headers["content-type"] == "text/event-stream"
        events = sse_events(raw.text)
        kinds = [kind for kind, _ in events]
        assert kinds[:2] == ["response.created", "response.output_item.added"]
        assert kinds[-2:] == ["response.output_item.done", "response.completed"]
        deltas = [data["delta"] for kind, data in events if kind == "response.output_text.delta"]
        assert "".join(deltas) == "three little pieces"
        assert len(deltas) == 3
        done = events[-1][1]["response"]
        assert done["status"] == "completed"
        assert done["usage"]["total_tokens"] == 15
        assert done["output"][0]["content"][0]["text"] == "three little pieces"
        assert events[-2][1]["item"] == done["output"][0]
        assert [(s.token, s.index) for s in endpoint.served] == [("acp-check-8", 0)]
        # An unscripted call (no token) and a non-streaming one: the plain answer, counted.
        plain = {"model": MODEL, "input": "a title please"}
        answer = (await client.post(f"{endpoint.base_url}/responses", json=plain)).json()
        assert answer["output"][0]["content"][0]["text"] == "ok"
        assert endpoint.unscripted == 1


async def test_a_responses_hold_and_a_shell_step_goes_on_without_tools() -> None:
    async with open_endpoint() as endpoint, httpx.AsyncClient() as client:
        endpoint.scripts["acp-check-9"] = (Shell("sleep 30"), Hold("wait for it"))
        body = {"model": MODEL, "input": responses_input(user("acp-check-9")), "stream": True}
        got: list[str] = []

        async def consume() -> None:
            response = await client.post(f"{endpoint.base_url}/responses", json=body)
            got.append(response.text)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume)
            with trio.fail_after(10):
                held = await endpoint.held("acp-check-9")
            assert held.step == Hold("wait for it")
            assert held.tool is None
            assert not got  # still streaming
            endpoint.release("acp-check-9")
        assert sse_events(got[0])[-1][0] == "response.completed"


def test_user_and_steps_reads_a_responses_input() -> None:
    after: list[dict[str, Any]] = [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text"}]},
        {"type": "function_call", "name": "shell", "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": "done"},
    ]
    assert user_and_steps(responses_input(user("x acp-check-3"), *after)) == ("x acp-check-3", 2)
    assert user_and_steps("just text") == ("just text", 0)
    assert user_and_steps(responses_input()) is None
    assert user_and_steps(None) is None
