"""The OpenAI Responses API's streaming framing, for the scripted endpoint: the SSE events of
a reply that is one assistant message of text, and the same reply as one JSON object. Pure:
no trio, no I/O.

Agents that speak only this API (codex-acp refuses chat completions) read a stream as
`event: <type>` / `data: <json>` pairs: `response.created`, `response.output_item.added`,
one `response.output_text.delta` per piece, then `response.output_item.done` carrying the
whole message and `response.completed` carrying the whole response. A stream that ends
without `response.completed` is an error to them, so a reply always ends with it, or, for a
reply cut at the token limit, with `response.incomplete` (status `incomplete`,
`incomplete_details.reason` `max_output_tokens`), which is how the API says so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

__all__ = ["closing", "opening", "reply_object", "text_delta", "user_and_steps"]

_USAGE: Mapping[str, Any] = {
    "input_tokens": 10,
    "output_tokens": 5,
    "total_tokens": 15,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens_details": {"reasoning_tokens": 0},
}


def _event(kind: str, payload: Mapping[str, Any]) -> bytes:
    data = json.dumps({"type": kind, **payload})
    return f"event: {kind}\ndata: {data}\n\n".encode()


def _response(response_id: str, model: str, status: str, output: list[Any]) -> dict[str, Any]:
    response: dict[str, Any] = {
        "id": response_id,
        "object": "response",
        "created_at": 0,
        "model": model,
        "status": status,
        "output": output,
    }
    if status in ("completed", "incomplete"):
        response["usage"] = dict(_USAGE)
    if status == "incomplete":
        response["incomplete_details"] = {"reason": "max_output_tokens"}
    return response


def _message(item_id: str, text: str | None, *, cut: bool = False) -> dict[str, Any]:
    """The assistant message item; `text` None is the item as it opens (no content yet)."""
    content: list[Any] = []
    if text is not None:
        content.append({"type": "output_text", "text": text, "annotations": []})
    status = "in_progress" if text is None else "incomplete" if cut else "completed"
    return {
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": status,
        "content": content,
    }


def opening(response_id: str, item_id: str, model: str) -> list[bytes]:
    """The events before any text: the response created, its message item added."""
    return [
        _event("response.created", {"response": _response(response_id, model, "in_progress", [])}),
        _event("response.output_item.added", {"output_index": 0, "item": _message(item_id, None)}),
    ]


def text_delta(item_id: str, piece: str) -> bytes:
    """One piece of the message's text."""
    return _event(
        "response.output_text.delta",
        {"item_id": item_id, "output_index": 0, "content_index": 0, "delta": piece},
    )


def closing(
    response_id: str, item_id: str, model: str, text: str, *, cut: bool = False
) -> list[bytes]:
    """The events after the text: the message item done with all of `text`, the response
    completed (with usage), or, `cut`, incomplete at the token limit."""
    item = _message(item_id, text, cut=cut)
    status = "incomplete" if cut else "completed"
    return [
        _event("response.output_item.done", {"output_index": 0, "item": item}),
        _event(f"response.{status}", {"response": _response(response_id, model, status, [item])}),
    ]


def reply_object(
    response_id: str, item_id: str, model: str, text: str, *, cut: bool = False
) -> dict[str, Any]:
    """The whole reply as one response object, for a request with `stream` false."""
    status = "incomplete" if cut else "completed"
    return _response(response_id, model, status, [_message(item_id, text, cut=cut)])


def user_and_steps(items: object) -> tuple[str, int] | None:
    """The text of the last user message of a Responses `input` and how many model steps
    follow it (assistant messages and tool outputs: each ends one step); None when `input`
    has no user message. A string `input` is one user message."""
    if isinstance(items, str):
        return items, 0
    if not isinstance(items, list):
        return None
    objects = [
        cast("Mapping[str, Any]", item)
        for item in cast("Sequence[object]", items)
        if isinstance(item, dict)
    ]
    for position in range(len(objects) - 1, -1, -1):
        if objects[position].get("role") == "user":
            after = objects[position + 1 :]
            steps = sum(
                1
                for item in after
                if item.get("role") == "assistant"
                or str(item.get("type", "")).endswith("_call_output")
            )
            return _text_of(objects[position].get("content")), steps
    return None


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = cast("Sequence[object]", content)
    return " ".join(
        str(cast("Mapping[str, Any]", part).get("text", ""))
        for part in parts
        if isinstance(part, dict)
    )
