"""What a scripted model call answers, and how each API frames it (D476). Pure: no trio, no
I/O.

A `Turn` is the answer in no API's terms: its text, at most one tool call, whether it was
cut at the token limit, whether the stream is held open after the text. A `Framed` is that
answer in one API's framing: the whole reply for a request that does not stream, and for
one that does the frames before the text, the text's pieces, and the frames after it (sent
once a held stream is released). The endpoint sends a `Framed` the same way whatever the
API; OpenAI chat completions is framed here, Anthropic Messages, the Responses API and
Gemini in their own modules.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["MODEL", "Framed", "Turn", "chat_framed", "pieces"]

MODEL = "conformance-model"


@dataclass(frozen=True)
class Turn:
    """A scripted model call's answer: `text` (may be empty), `call` (a tool's name and
    arguments), `cut` (ended at the token limit), `hold` (held open after the text)."""

    text: str
    call: tuple[str, Mapping[str, Any]] | None = None
    cut: bool = False
    hold: bool = False


@dataclass(frozen=True)
class Framed:
    """A `Turn` in one API's framing."""

    whole: object
    before: tuple[bytes, ...]
    pieces: tuple[bytes, ...]
    after: tuple[bytes, ...]


def pieces(text: str) -> list[str]:
    """`text` in up to three chunks, cut at spaces: a stream, not one blob."""
    words = text.split(" ")
    if len(words) < 3:
        return [text] if text else []
    third = max(1, len(words) // 3)
    cuts = [words[:third], words[third : 2 * third], words[2 * third :]]
    return [" ".join(c) + (" " if i < 2 else "") for i, c in enumerate(cuts)]


# -- OpenAI chat completions ------------------------------------------------------------------


def _event(payload: object) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def _chunk(chat_id: str, delta: Mapping[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": chat_id,
        "object": "chat.completion.chunk",
        "created": 0,
        "model": MODEL,
        "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish}],
    }


def _usage_chunk(chat_id: str) -> dict[str, Any]:
    return {
        "id": chat_id,
        "object": "chat.completion.chunk",
        "created": 0,
        "model": MODEL,
        "choices": [],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _tool_call(call: tuple[str, Mapping[str, Any]], chat_id: str) -> dict[str, Any]:
    name, arguments = call
    return {
        "index": 0,
        "id": f"call_{chat_id.rsplit('-', 1)[-1]}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(dict(arguments))},
    }


def _completion(chat_id: str, turn: Turn) -> object:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    finish = "length" if turn.cut else "stop"
    if turn.call is not None:
        tool = _tool_call(turn.call, chat_id)
        del tool["index"]
        message["tool_calls"] = [tool]
        finish = "tool_calls"
    return {
        "id": chat_id,
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def chat_framed(turn: Turn, chat_id: str, *, usage: bool) -> Framed:
    """`turn` as chat completions: SSE `data:` chunks (the role, the text, the tool call,
    the finish reason, a usage chunk when `usage`, `[DONE]`), or one `chat.completion`."""
    after: list[bytes] = []
    finish = "length" if turn.cut else "stop"
    if turn.call is not None:
        after.append(_event(_chunk(chat_id, {"tool_calls": [_tool_call(turn.call, chat_id)]})))
        finish = "tool_calls"
    after.append(_event(_chunk(chat_id, {}, finish)))
    if usage:
        after.append(_event(_usage_chunk(chat_id)))
    after.append(b"data: [DONE]\n\n")
    return Framed(
        whole=_completion(chat_id, turn),
        before=(_event(_chunk(chat_id, {"role": "assistant", "content": ""})),),
        pieces=tuple(_event(_chunk(chat_id, {"content": p})) for p in pieces(turn.text)),
        after=tuple(after),
    )
