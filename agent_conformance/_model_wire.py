"""What the model machine's endpoint streams, and what the adapter under test must make of
it: a drawn reply as server-sent event bytes (the chunks OpenAI's endpoint sends, in the
variants compatible servers send), and a request as the chat-completions body must carry
it. Pure: no trio, no Hypothesis.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from trio_agents import Message, ToolSpec

__all__ = [
    "Arrival",
    "CallSpec",
    "LineEnd",
    "Names",
    "Reason",
    "Reply",
    "body_problems",
    "events",
    "leaks",
    "split",
]


def thaw(value: object) -> Any:
    """`value` as plain JSON types: a mapping a dict, a tuple or other sequence a list (the
    seam may hand over read-only views)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in cast("Mapping[str, object]", value).items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [thaw(v) for v in cast("Sequence[object]", value)]
    return value


Reason = Literal["stop", "tool_calls", "length"]
LineEnd = Literal["\n", "\r\n", "\r"]
Arrival = Literal["in order", "last first", "interleaved"]
Names = Literal["once", "every fragment", "split"]


@dataclass(frozen=True)
class CallSpec:
    """One tool call the endpoint streams: its index, id, name and arguments, the arguments'
    JSON text sent in `fragments` pieces."""

    index: int
    call_id: str
    name: str
    arguments: Mapping[str, Any]
    fragments: int = 1

    def text(self) -> str:
        return json.dumps(thaw(self.arguments), ensure_ascii=False)

    def pieces(self) -> list[str]:
        """The arguments' text cut in `fragments` pieces (never an empty one)."""
        text = self.text()
        count = max(1, min(self.fragments, len(text)))
        size = -(-len(text) // count)
        return [text[at : at + size] for at in range(0, len(text), size)]


@dataclass(frozen=True)
class Reply:
    """A streamed reply as the endpoint sends it.

    texts: the content deltas, in order (an empty one is sent as an empty delta).
    calls: the tool calls; `arrival` is the order their fragments are sent in: each call's
        in index order, the last index first, or the calls' fragments in turns; `names`
        how a call's name is sent: on its first fragment, on every one, or split over the
        first two (servers do each).
    reason: the `finish_reason` sent; None sends none (a reply cut short).
    usage: (prompt_tokens, completion_tokens), or None to report no usage.
    usage_in_finish: the usage rides on the finish chunk (some servers), not a chunk of its
        own after it (OpenAI).
    line_end: what ends each line of the event stream.
    comments: a `: keep-alive` comment line before each event.
    done: `data: [DONE]` ends the stream.
    """

    texts: tuple[str, ...] = ()
    calls: tuple[CallSpec, ...] = ()
    reason: Reason | None = "stop"
    usage: tuple[int, int] | None = None
    usage_in_finish: bool = False
    arrival: Arrival = "in order"
    names: Names = "once"
    line_end: LineEnd = "\n"
    comments: bool = False
    done: bool = True

    @property
    def text(self) -> str:
        return "".join(self.texts)


def _event(payload: object, reply: Reply) -> bytes:
    end = reply.line_end
    comment = f": keep-alive{end}" if reply.comments else ""
    data = json.dumps(payload, ensure_ascii=False)
    return f"{comment}data: {data}{end}{end}".encode()


def _chunk(
    chat_id: str, delta: Mapping[str, Any], finish: str | None = None, **more: Any
) -> dict[str, Any]:
    return {
        "id": chat_id,
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "conformance-model",
        "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish}],
        **more,
    }


def _call_fragments(reply: Reply) -> list[dict[str, Any]]:
    """The tool-call deltas, first fragment of each call carrying its id and name."""
    per_call: list[list[dict[str, Any]]] = []
    for call in reply.calls:
        pieces = call.pieces() or [""]
        deltas: list[dict[str, Any]] = []
        names = _names(call.name, len(pieces), reply.names)
        for number, (piece, name) in enumerate(zip(pieces, names, strict=True)):
            delta: dict[str, Any] = {"index": call.index, "function": {"arguments": piece}}
            if number == 0:
                delta["id"] = call.call_id
                delta["type"] = "function"
            if name:
                delta["function"]["name"] = name
            deltas.append(delta)
        per_call.append(deltas)
    if reply.arrival == "last first":
        per_call.reverse()
    if reply.arrival != "interleaved":
        return [delta for deltas in per_call for delta in deltas]
    out: list[dict[str, Any]] = []
    for turn in range(max((len(d) for d in per_call), default=0)):
        out += [deltas[turn] for deltas in per_call if turn < len(deltas)]
    return out


def _names(name: str, fragments: int, how: Names) -> list[str]:
    """The name each fragment of a call carries ("" for none)."""
    if how == "every fragment":
        return [name] * fragments
    if how == "split" and fragments > 1 and len(name) > 1:
        half = len(name) // 2
        return [name[:half], name[half:], *[""] * (fragments - 2)]
    return [name, *[""] * (fragments - 1)]


def events(reply: Reply, chat_id: str) -> list[bytes]:
    """The reply as event-stream bytes, one item per event."""
    out = [_event(_chunk(chat_id, {"role": "assistant", "content": ""}), reply)]
    out += [_event(_chunk(chat_id, {"content": text}), reply) for text in reply.texts]
    out += [
        _event(_chunk(chat_id, {"tool_calls": [delta]}), reply) for delta in _call_fragments(reply)
    ]
    usage = None
    if reply.usage is not None:
        prompt, completion = reply.usage
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
    if reply.reason is not None:
        extra = {"usage": usage} if usage is not None and reply.usage_in_finish else {}
        out.append(_event(_chunk(chat_id, {}, reply.reason, **extra), reply))
        if usage is not None and not reply.usage_in_finish:
            chunk = _chunk(chat_id, {}, usage=usage)
            chunk["choices"] = []
            out.append(_event(chunk, reply))
        if reply.done:
            end = reply.line_end
            out.append(f"data: [DONE]{end}{end}".encode())
    return out


def split(data: bytes, cuts: Sequence[int]) -> list[bytes]:
    """`data` cut at the offsets `cuts` (taken modulo its length, sorted, empty pieces
    dropped): bytes as a network delivers them, split anywhere, UTF-8 sequences too."""
    if not data:
        return []
    points = sorted({cut % len(data) for cut in cuts} - {0})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds) if b > a]


# -- the request's body (E1) --------------------------------------------------------------


def _wire_message(message: Message) -> dict[str, Any]:
    wire: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.role == "tool":
        wire["tool_call_id"] = message.call_id
    if message.tool_calls:
        wire["tool_calls"] = [
            (call.call_id, call.name, thaw(call.arguments)) for call in message.tool_calls
        ]
    return wire


def _sent_calls(value: object) -> list[tuple[object, object, object]] | str:
    """The tool calls of an assistant message as sent: (id, name, parsed arguments), or what
    is wrong with them."""
    if not isinstance(value, list):
        return f"tool_calls is {value!r}, not a list"
    calls: list[tuple[object, object, object]] = []
    for item in cast("list[object]", value):
        if not isinstance(item, dict):
            return f"a tool call is {item!r}, not an object"
        call = cast("dict[str, Any]", item)
        function = call.get("function")
        if call.get("type") != "function" or not isinstance(function, dict):
            return f"tool call {call!r} is not {{type: function, function: {{...}}}}"
        function = cast("dict[str, Any]", function)
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            return f"tool call {call.get('id')!r} sends arguments {arguments!r}, not JSON text"
        try:
            parsed: object = json.loads(arguments)
        except ValueError:
            return f"tool call {call.get('id')!r} sends arguments {arguments!r}: not JSON"
        calls.append((call.get("id"), function.get("name"), parsed))
    return calls


def _message_problem(number: int, want: Message, sent: object) -> str | None:
    expected = _wire_message(want)
    if not isinstance(sent, dict):
        return f"message {number} is {sent!r}, not an object"
    got = cast("dict[str, Any]", sent)
    if got.get("role") != expected["role"]:
        return f"message {number} has role {got.get('role')!r}, not {expected['role']!r}"
    content = got.get("content")
    # An assistant message that only calls tools may carry null or "" (OpenAI sends null).
    empty_ok = want.role == "assistant" and want.tool_calls and not want.content
    if not (content == want.content or (empty_ok and content in (None, ""))):
        return f"message {number} ({want.role}) has content {content!r}, not {want.content!r}"
    if want.role == "tool" and got.get("tool_call_id") != want.call_id:
        return (
            f"message {number} (tool) answers tool_call_id {got.get('tool_call_id')!r}, "
            f"not {want.call_id!r}"
        )
    if want.tool_calls:
        calls = _sent_calls(got.get("tool_calls"))
        if isinstance(calls, str):
            return f"message {number} (assistant): {calls}"
        if calls != expected["tool_calls"]:
            return (
                f"message {number} (assistant) sends tool calls {calls!r}, not "
                f"{expected['tool_calls']!r} (id, name, arguments)"
            )
    return None


def _tools_problem(tools: Sequence[ToolSpec], sent: object) -> str | None:
    if not tools:
        return None if sent in (None, []) else f"a request without tools sent tools {sent!r}"
    if not isinstance(sent, list):
        return f"the request has {len(tools)} tool(s), the body's tools is {sent!r}"
    items = cast("list[object]", sent)
    wanted = [(t.name, t.description, thaw(t.parameters)) for t in tools]
    got: list[object] = []
    for item in items:
        entry = cast("dict[str, Any]", item) if isinstance(item, dict) else {}
        function = entry.get("function")
        if entry.get("type") != "function" or not isinstance(function, dict):
            return f"a tool is sent as {item!r}, not {{type: function, function: {{...}}}}"
        function = cast("dict[str, Any]", function)
        got.append((function.get("name"), function.get("description"), function.get("parameters")))
    if got != wanted:
        return f"the body's tools are {got!r} (name, description, parameters), not {wanted!r}"
    return None


def body_problems(
    body: object, messages: Sequence[Message], tools: Sequence[ToolSpec]
) -> str | None:
    """What is wrong with a chat-completions body sent for `messages` and `tools` (E1), or
    None."""
    if not isinstance(body, dict):
        return f"the body is {body!r}, not a JSON object"
    sent = cast("dict[str, Any]", body)
    model = sent.get("model")
    if not isinstance(model, str) or not model:
        return f"the body's model is {model!r}, not a model name"
    if sent.get("stream") is not True:
        return f"the body's stream is {sent.get('stream')!r}, not true"
    options = sent.get("stream_options")
    if (
        not isinstance(options, dict)
        or cast("dict[str, Any]", options).get("include_usage") is not True
    ):
        return f"the body's stream_options is {options!r}, not {{include_usage: true}}"
    sent_messages = sent.get("messages")
    if not isinstance(sent_messages, list):
        return f"the body's messages is {sent_messages!r}, not a list"
    listed = cast("list[object]", sent_messages)
    if len(listed) != len(messages):
        roles: list[object] = [
            cast("dict[str, Any]", m).get("role") if isinstance(m, dict) else m for m in listed
        ]
        return (
            f"the body sends {len(listed)} messages (roles {roles!r}) for a request of "
            f"{len(messages)} (roles {[m.role for m in messages]!r})"
        )
    for number, (want, got) in enumerate(zip(messages, listed, strict=True)):
        problem = _message_problem(number, want, got)
        if problem is not None:
            return problem
    return _tools_problem(tools, sent.get("tools"))


def leaks(text: str, secrets: Sequence[str]) -> list[str]:
    """The secrets `text` holds (as given, or JSON-escaped)."""
    found: list[str] = []
    for secret in secrets:
        escaped = json.dumps(secret)[1:-1]
        if secret and (secret in text or escaped in text):
            found.append(secret)
    return found
