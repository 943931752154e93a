"""Anthropic's Messages API, for the scripted endpoint: where a call is in its script, the
tools it offers, and the reply as the API streams it (D474). Pure: no trio, no I/O.

A request is `POST /v1/messages` with `messages` (each `content` a string or a list of
blocks: `text`, `tool_use`, `tool_result`, ...) and `tools` (`name`, `input_schema`). A tool's
result comes back as a *user* message of `tool_result` blocks, so the prompt a call answers
is the last user message that holds text, and the step is the number of assistant messages
after it.

A streamed reply is SSE `event:` / `data:` pairs: `message_start`, then per content block
`content_block_start`, its deltas (`text_delta`, or `input_json_delta` for a `tool_use`)
and `content_block_stop`, then `message_delta` carrying the `stop_reason` (`end_turn`,
`tool_use`, `max_tokens`) and `message_stop`. `stream: false` gets the message as one
object.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, cast

from ._framing import Framed, Turn, pieces

__all__ = [
    "block_start",
    "block_stop",
    "closing",
    "framed",
    "functions",
    "locate",
    "message_object",
    "opening",
    "stop_reason",
    "text_delta",
    "tool_use_blocks",
]

TOKEN = re.compile(r"acp-check-\d+")


def _objects(value: object) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [
        cast("Mapping[str, Any]", v) for v in cast("list[object]", value) if isinstance(v, dict)
    ]


def _text_of(content: object) -> str:
    """The text of a message's content: the string, or its text blocks joined."""
    if isinstance(content, str):
        return content
    return "\n".join(
        str(block.get("text", "")) for block in _objects(content) if block.get("type") == "text"
    )


def locate(messages: object) -> tuple[str | None, int]:
    """The token of the last user message that holds text (None if it has none) and how many
    assistant messages follow it: which step of which script this call is."""
    items = _objects(messages)
    for position in range(len(items) - 1, -1, -1):
        message = items[position]
        if message.get("role") != "user":
            continue
        text = _text_of(message.get("content"))
        if not text and isinstance(message.get("content"), list):
            continue  # only tool results: the turn's next step, not a new prompt
        found = TOKEN.findall(text)
        if not found:
            return None, 0
        after = items[position + 1 :]
        return str(found[-1]), sum(1 for m in after if m.get("role") == "assistant")
    return None, 0


def functions(tools: object) -> list[dict[str, Any]]:
    """The request's tools in the chat-completions shape the scripts read
    (`{"function": {"name", "parameters"}}`)."""
    return [
        {"function": {"name": tool["name"], "parameters": tool.get("input_schema") or {}}}
        for tool in _objects(tools)
        if isinstance(tool.get("name"), str)
    ]


def _event(kind: str, payload: Mapping[str, Any]) -> bytes:
    data = json.dumps({"type": kind, **payload})
    return f"event: {kind}\ndata: {data}\n\n".encode()


_USAGE = {"input_tokens": 10, "output_tokens": 5}


def _message(message_id: str, model: str, content: list[Any], stop: str | None) -> dict[str, Any]:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": dict(_USAGE),
    }


def opening(message_id: str, model: str) -> bytes:
    """`message_start`: an empty assistant message."""
    return _event("message_start", {"message": _message(message_id, model, [], None)})


def block_start(index: int, block: Mapping[str, Any]) -> bytes:
    """`content_block_start` of block `index`."""
    return _event("content_block_start", {"index": index, "content_block": dict(block)})


def text_delta(index: int, text: str) -> bytes:
    """One piece of the text block `index`."""
    return _event(
        "content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": text}}
    )


def block_stop(index: int) -> bytes:
    """`content_block_stop` of block `index`."""
    return _event("content_block_stop", {"index": index})


def tool_use_blocks(index: int, call_id: str, name: str, arguments: Mapping[str, Any]) -> bytes:
    """A whole `tool_use` block: its start (empty input), its input as one JSON delta, its
    stop."""
    start = block_start(index, {"type": "tool_use", "id": call_id, "name": name, "input": {}})
    delta = _event(
        "content_block_delta",
        {
            "index": index,
            "delta": {"type": "input_json_delta", "partial_json": json.dumps(arguments)},
        },
    )
    return start + delta + block_stop(index)


def closing(stop: str) -> bytes:
    """`message_delta` with the stop reason, then `message_stop`."""
    delta = _event(
        "message_delta",
        {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 5}},
    )
    return delta + _event("message_stop", {})


def message_object(
    message_id: str,
    model: str,
    text: str,
    call: tuple[str, str, Mapping[str, Any]] | None,
    stop: str,
) -> dict[str, Any]:
    """The reply of a `stream: false` request: the message, its text then its tool use."""
    content: list[Any] = [{"type": "text", "text": text}] if text else []
    if call is not None:
        call_id, name, arguments = call
        content.append({"type": "tool_use", "id": call_id, "name": name, "input": dict(arguments)})
    return _message(message_id, model, content, stop)


def stop_reason(cut: bool, called: bool) -> str:
    """The stop reason of a reply: `tool_use`, `max_tokens` or `end_turn`."""
    return "tool_use" if called else ("max_tokens" if cut else "end_turn")


def framed(turn: Turn, message_id: str, call_id: str, model: str) -> Framed:
    """`turn` as Messages: a text block (when there is text, or the stream is held), then a
    `tool_use` block, then the stop reason; or one message object."""
    stop = stop_reason(turn.cut, turn.call is not None)
    use = (call_id, *turn.call) if turn.call is not None else None
    before = [opening(message_id, model)]
    after: list[bytes] = []
    block = 0
    if turn.text or turn.hold:
        before.append(block_start(0, {"type": "text", "text": ""}))
        after.append(block_stop(0))
        block = 1
    if use is not None:
        after.append(tool_use_blocks(block, *use))
    after.append(closing(stop))
    return Framed(
        whole=message_object(message_id, model, turn.text, use, stop),
        before=tuple(before),
        pieces=tuple(text_delta(0, piece) for piece in pieces(turn.text)),
        after=tuple(after),
    )
