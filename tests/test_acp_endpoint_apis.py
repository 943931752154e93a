"""The scripted endpoint speaks Anthropic's Messages API as Anthropic's own client reads it
(D474): text streamed, a tool call with its input, a reply cut at the token limit, the turn's
next step after a tool result, the same without streaming, and a held stream the client
walks away from."""

from __future__ import annotations

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
