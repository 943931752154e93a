"""The scripted endpoint speaks Anthropic's Messages API as Anthropic's own client reads it
(D474): text streamed, a tool call with its input, a reply cut at the token limit, the turn's
next step after a tool result, the same without streaming, and a held stream the client
walks away from."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest
import trio
from anthropic.types import ToolParam

from agent_conformance._acp._endpoint import Cut, Hold, Say, Shell, open_endpoint

# Real sockets: the real clock, with a wall-clock bound (tests/conftest.py).
pytestmark = pytest.mark.realtime

BASH: ToolParam = {
    "name": "bash",
    "description": "Run a command.",
    "input_schema": {
        "type": "object",
        "properties": {"command": {"type": "string"}, "description": {"type": "string"}},
        "required": ["command", "description"],
    },
}


def _client(base_url: str) -> anthropic.AsyncAnthropic:
    root = base_url.removesuffix("/v1")  # the SDK adds /v1/messages itself
    return anthropic.AsyncAnthropic(base_url=root, api_key="sk-test", max_retries=0)


def _prompt(token: str) -> list[Any]:
    return [{"role": "user", "content": [{"type": "text", "text": f"{token}: go"}]}]


async def test_text_a_tool_call_its_next_step_and_a_cut_reply_read_by_anthropics_client() -> None:
    async with open_endpoint() as endpoint:
        client = _client(endpoint.base_url)
        endpoint.scripts["acp-check-1"] = (Shell("ls -la"), Say("listed the files"))
        endpoint.scripts["acp-check-2"] = (Cut("cut short here"),)
        messages = _prompt("acp-check-1")
        async with client.messages.stream(
            model="m", max_tokens=100, messages=messages, tools=[BASH]
        ) as stream:
            first = await stream.get_final_message()
        assert first.stop_reason == "tool_use"
        (use,) = [block for block in first.content if block.type == "tool_use"]
        assert use.name == "bash"
        assert isinstance(use.input, dict)
        assert use.input["command"] == "ls -la"  # the other required field filled
        # The tool's result comes back as a user message: the script's next step.
        messages += [
            {"role": "assistant", "content": [b.model_dump() for b in first.content]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "a b"}],
            },
        ]
        async with client.messages.stream(
            model="m", max_tokens=100, messages=messages, tools=[BASH]
        ) as stream:
            texts = [text async for text in stream.text_stream]
            second = await stream.get_final_message()
        assert "".join(texts) == "listed the files"
        assert len(texts) > 1  # streamed in pieces
        assert second.stop_reason == "end_turn"
        cut = await client.messages.create(
            model="m", max_tokens=100, messages=_prompt("acp-check-2")
        )
        assert cut.stop_reason == "max_tokens"
        assert [b.text for b in cut.content if b.type == "text"] == ["cut short here"]
        # A call of no script (a title, say) is answered too.
        other = await client.messages.create(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "name this chat"}]
        )
        assert other.stop_reason == "end_turn"
        await client.close()


async def test_a_held_stream_the_client_leaves_is_seen_gone() -> None:
    async with open_endpoint() as endpoint:
        client = _client(endpoint.base_url)
        endpoint.scripts["acp-check-3"] = (Hold("partial text"),)
        with trio.move_on_after(10):
            async with client.messages.stream(
                model="m", max_tokens=100, messages=_prompt("acp-check-3")
            ) as stream:
                async for text in stream.text_stream:
                    assert "partial" in text
                    break  # the client stops reading and closes the stream
        served = await endpoint.held("acp-check-3")
        with trio.fail_after(10):
            await served.ended.wait()
        assert served.gone
        await client.close()


# -- the Responses API's function calls, read by OpenAI's own client (D476) ----------------


def _responses_turns(base_url: str) -> dict[str, Any]:
    """A function call, its next step after the call's output, and a cut reply, through the
    openai client (blocking: run in a thread)."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
    tools: Any = [
        {
            "type": "function",
            "name": "shell",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "array", "items": {"type": "string"}}},
                "required": ["command"],
            },
            "strict": False,
        },
        {"type": "web_search"},  # a built-in tool: never called by a script
    ]
    prompt: list[Any] = [{"role": "user", "content": "acp-check-1: go"}]
    with client.responses.stream(model="m", input=prompt, tools=tools) as stream:
        first = stream.get_final_response()
    (call,) = [item for item in first.output if item.type == "function_call"]
    follow: list[Any] = [
        *prompt,
        {"type": "function_call", "call_id": call.call_id, "name": call.name,
         "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "a b"},
    ]  # fmt: skip
    texts: list[str] = []
    with client.responses.stream(model="m", input=follow, tools=tools) as stream:
        for event in stream:
            if event.type == "response.output_text.delta":
                texts.append(event.delta)
        second = stream.get_final_response()
    cut = client.responses.create(model="m", input="acp-check-2: go")
    client.close()
    return {"first": first, "call": call, "texts": texts, "second": second, "cut": cut}


async def test_the_responses_api_calls_a_function_read_by_openais_client() -> None:
    async with open_endpoint() as endpoint:
        endpoint.scripts["acp-check-1"] = (Shell("ls -la"), Say("listed the files"))
        endpoint.scripts["acp-check-2"] = (Cut("cut short here"),)
        got = await trio.to_thread.run_sync(_responses_turns, endpoint.base_url)
    assert got["first"].status == "completed"
    assert got["call"].name == "shell"
    assert json.loads(got["call"].arguments) == {"command": ["bash", "-lc", "ls -la"]}
    assert "".join(got["texts"]) == "listed the files"
    assert len(got["texts"]) > 1  # streamed in pieces
    assert got["second"].output_text == "listed the files"
    assert got["cut"].status == "incomplete"
    assert got["cut"].incomplete_details.reason == "max_output_tokens"
    assert [s.index for s in endpoint.served] == [0, 1, 0]


# -- Gemini's generateContent, read by Google's own client (D476) ---------------------------


def _gemini_turns(root_url: str) -> dict[str, Any]:
    """A function call streamed, its next step after the function's response, and a cut
    reply not streamed, through google-genai (blocking: run in a thread)."""
    from google import genai
    from google.genai import types

    client = genai.Client(api_key="sk-test", http_options=types.HttpOptions(base_url=root_url))
    shell = types.FunctionDeclaration(
        name="run_shell_command",
        description="Run a command.",
        parameters=types.Schema(
            type=types.Type.OBJECT,
            properties={
                "command": types.Schema(type=types.Type.STRING),
                "directory": types.Schema(type=types.Type.STRING),
            },
            required=["command", "directory"],
        ),
    )
    config = types.GenerateContentConfig(tools=[types.Tool(function_declarations=[shell])])
    prompt = [types.Content(role="user", parts=[types.Part(text="acp-check-1: go")])]
    first = list(client.models.generate_content_stream(model="m", contents=prompt, config=config))
    calls = [c for r in first for c in (r.function_calls or [])]
    follow = [
        *prompt,
        types.Content(role="model", parts=[types.Part(function_call=calls[0])]),
        types.Content(
            role="user",
            parts=[
                types.Part.from_function_response(name="run_shell_command", response={"o": "a"})
            ],
        ),
    ]
    second = list(client.models.generate_content_stream(model="m", contents=follow, config=config))
    cut = client.models.generate_content(model="m", contents="acp-check-2: go")
    return {"first": first, "calls": calls, "second": second, "cut": cut}


async def test_gemini_streams_a_function_call_read_by_googles_client() -> None:
    async with open_endpoint() as endpoint:
        endpoint.scripts["acp-check-1"] = (Shell("ls -la"), Say("listed the files"))
        endpoint.scripts["acp-check-2"] = (Cut("cut short here"),)
        root = endpoint.base_url.removesuffix("/v1")
        got = await trio.to_thread.run_sync(_gemini_turns, root)
    (call,) = got["calls"]
    assert call.name == "run_shell_command"
    assert call.args == {"command": "ls -la", "directory": "a conformance check"}
    texts = [r.text for r in got["second"] if r.text]
    assert "".join(texts) == "listed the files"
    assert len(texts) > 1  # streamed in pieces
    assert got["second"][-1].candidates[0].finish_reason == "STOP"
    assert got["cut"].text == "cut short here"
    assert got["cut"].candidates[0].finish_reason == "MAX_TOKENS"
    assert [s.index for s in endpoint.served] == [0, 1, 0]


def test_a_gemini_stream_without_sse_is_one_json_array() -> None:
    from agent_conformance._acp import _gemini as gemini
    from agent_conformance._acp._framing import Turn

    framed = gemini.framed(Turn("a b c d", ("bash", {"command": "ls"})), "m", sse=False)
    body = json.loads(b"".join((*framed.before, *framed.pieces, *framed.after)))
    assert [part for r in body for part in r["candidates"][0]["content"]["parts"]] == [
        {"text": "a "},
        {"text": "b "},
        {"text": "c d"},
        {"functionCall": {"name": "bash", "args": {"command": "ls"}}},
    ]
    assert body[-1]["candidates"][0]["finishReason"] == "STOP"
