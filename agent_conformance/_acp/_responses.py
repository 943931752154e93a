"""The OpenAI Responses API's streaming framing, for the scripted endpoint: the SSE events of
a reply that is an assistant message of text and at most one function call, and the same
reply as one JSON object. Pure: no trio, no I/O.

Agents that speak only this API (codex-acp refuses chat completions) read a stream as
`event: <type>` / `data: <json>` pairs: `response.created`, `response.output_item.added`
and `response.content_part.added`, one `response.output_text.delta` per piece, then
`response.output_text.done`, `response.content_part.done`, `response.output_item.done`
carrying the whole message and `response.completed` carrying the whole response. A stream that ends
without `response.completed` is an error to them, so a reply always ends with it, or, for a
reply cut at the token limit, with `response.incomplete` (status `incomplete`,
`incomplete_details.reason` `max_output_tokens`), which is how the API says so.

A function call is an output item of its own (`type: function_call`, its `call_id`, `name`
and `arguments` as a JSON string), streamed as `response.output_item.added`, one
`response.function_call_arguments.delta`, `...arguments.done` and `output_item.done`. The
request offers tools flat (`{"type": "function", "name", "parameters"}`), and the call's
result comes back in `input` as a `function_call_output` item (D476).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

from ._framing import Framed, Turn, pieces

__all__ = [
    "call_events",
    "closing",
    "framed",
    "functions",
    "opening",
    "reply_object",
    "text_delta",
    "user_and_steps",
]

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
        content.append(_part(text))
    status = "in_progress" if text is None else "incomplete" if cut else "completed"
    return {
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": status,
        "content": content,
    }


def opening(response_id: str, item_id: str, model: str, *, message: bool = True) -> list[bytes]:
    """The events before any text: the response created and, `message`, its message item
    added (a reply that is only a function call has none)."""
    created = _event(
        "response.created", {"response": _response(response_id, model, "in_progress", [])}
    )
    if not message:
        return [created]
    added = _event(
        "response.output_item.added", {"output_index": 0, "item": _message(item_id, None)}
    )
    part = _event(
        "response.content_part.added",
        {"item_id": item_id, "output_index": 0, "content_index": 0, "part": _part("")},
    )
    return [created, added, part]


def _part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": []}


Call = tuple[str, str, Mapping[str, Any]]
"""A function call of a reply: its call id, the tool's name, the arguments."""


def _function_call(call: Call, *, done: bool) -> dict[str, Any]:
    call_id, name, arguments = call
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(dict(arguments)) if done else "",
        "status": "completed" if done else "in_progress",
    }


def call_events(index: int, call: Call) -> list[bytes]:
    """A function call as output item `index`: added, its arguments in one delta, done."""
    item = _function_call(call, done=True)
    where = {"item_id": item["id"], "output_index": index}
    return [
        _event(
            "response.output_item.added",
            {"output_index": index, "item": _function_call(call, done=False)},
        ),
        _event("response.function_call_arguments.delta", {**where, "delta": item["arguments"]}),
        _event("response.function_call_arguments.done", {**where, "arguments": item["arguments"]}),
        _event("response.output_item.done", {"output_index": index, "item": item}),
    ]


def text_delta(item_id: str, piece: str) -> bytes:
    """One piece of the message's text."""
    return _event(
        "response.output_text.delta",
        {"item_id": item_id, "output_index": 0, "content_index": 0, "delta": piece},
    )


def _output(item_id: str, text: str | None, call: Call | None, *, cut: bool) -> list[Any]:
    output: list[Any] = [] if text is None else [_message(item_id, text, cut=cut)]
    if call is not None:
        output.append(_function_call(call, done=True))
    return output


def closing(
    response_id: str,
    item_id: str,
    model: str,
    text: str | None,
    *,
    cut: bool = False,
    call: Call | None = None,
) -> list[bytes]:
    """The events after the text (`text` None: the reply had no message item) and the
    call's: the message item done with all of `text`, the response completed (with usage),
    or, `cut`, incomplete at the token limit. The call's own events go between the two."""
    status = "incomplete" if cut else "completed"
    events: list[bytes] = []
    if text is not None:
        where = {"item_id": item_id, "output_index": 0, "content_index": 0}
        item = _message(item_id, text, cut=cut)
        events += [
            _event("response.output_text.done", {**where, "text": text}),
            _event("response.content_part.done", {**where, "part": _part(text)}),
            _event("response.output_item.done", {"output_index": 0, "item": item}),
        ]
    output = _output(item_id, text, call, cut=cut)
    if call is not None:
        events.extend(call_events(len(output) - 1, call))
    response = _response(response_id, model, status, output)
    events.append(_event(f"response.{status}", {"response": response}))
    return events


def reply_object(
    response_id: str,
    item_id: str,
    model: str,
    text: str,
    *,
    cut: bool = False,
    call: Call | None = None,
) -> dict[str, Any]:
    """The whole reply as one response object, for a request with `stream` false."""
    status = "incomplete" if cut else "completed"
    message = text if text or call is None else None
    return _response(response_id, model, status, _output(item_id, message, call, cut=cut))


def functions(tools: object) -> list[dict[str, Any]]:
    """The request's function tools in the chat-completions shape the scripts read
    (`{"function": {"name", "parameters"}}`); built-in tools (`local_shell`, `web_search`,
    custom grammars) are not offered to a script."""
    if not isinstance(tools, list):
        return []
    found: list[dict[str, Any]] = []
    for tool in cast("Sequence[object]", tools):
        if not isinstance(tool, dict):
            continue
        fields = cast("Mapping[str, Any]", tool)
        if fields.get("type") == "function" and isinstance(fields.get("name"), str):
            parameters: object = fields.get("parameters") or {}
            found.append({"function": {"name": fields["name"], "parameters": parameters}})
    return found


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


def framed(turn: Turn, number: int, model: str) -> Framed:
    """`turn` as Responses events: the message item (when there is text, or the stream is
    held; a reply that is only a call has none), the function call item, the response
    completed or incomplete; or one response object."""
    response_id, item_id = f"resp_{number}", f"msg_{number}"
    call = (f"call_{number}", *turn.call) if turn.call is not None else None
    message = bool(turn.text or turn.hold or call is None)
    text = turn.text if message else None
    return Framed(
        whole=reply_object(response_id, item_id, model, turn.text, cut=turn.cut, call=call),
        before=tuple(opening(response_id, item_id, model, message=message)),
        pieces=tuple(text_delta(item_id, piece) for piece in pieces(turn.text)),
        after=tuple(closing(response_id, item_id, model, text, cut=turn.cut, call=call)),
    )
