"""Server-sent events and OpenAI chat-completion chunks, reassembled. Pure; no trio, no httpx.

Two sans-I/O layers that `_model/_openai` drives with the bytes it reads:

- `SSEParser` turns bytes, split anywhere, into `ServerSentEvent`s, following the WHATWG
  event-stream rules (any of CRLF, LF, CR ends a line; `:` starts a comment; `data` lines
  accumulate; a blank line dispatches; a partial event at the end of the stream is dropped).
- `ChatStream` turns the JSON payloads of a streamed chat completion into model chunks:
  text deltas as they come, tool calls reassembled from their fragments and emitted whole
  when the stream ends, then exactly one `Finish`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, cast

from .._errors import ChatStreamError
from ._seam import Finish, FinishReason, ModelChunk, TextDelta, ToolCall, Usage

__all__ = ["ChatStream", "ChatStreamError", "SSEParser", "ServerSentEvent", "describe", "snippet"]

_EOL: Final = re.compile(rb"\r\n|\r|\n")
_BOM: Final = b"\xef\xbb\xbf"
DONE: Final = "[DONE]"
_FINISH_REASONS: Final[Mapping[str, FinishReason]] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
}


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    data: str
    event: str = "message"
    id: str = ""


class SSEParser:
    """An incremental event-stream parser: feed it bytes as they arrive.

    `max_event_bytes` bounds what it buffers for one line or one event, so a server that
    never ends a line cannot grow it without limit.
    """

    def __init__(self, *, max_event_bytes: int = 8 * 1024 * 1024) -> None:
        self._buffer = bytearray()
        self._max = max_event_bytes
        self._at_start = True
        # A CR that ended the last chunk may be the first half of a CRLF.
        self._skip_lf = False
        self._data: list[str] = []
        self._data_size = 0
        self._event = ""
        self._last_id = ""

    def feed(self, data: bytes) -> list[ServerSentEvent]:
        buffer = self._buffer
        # What is left from the last feed holds no line end: do not scan it again, so a long
        # line arriving in small pieces costs linear time.
        scanned = len(buffer)
        buffer += data
        if self._at_start:
            if len(buffer) < len(_BOM) and _BOM.startswith(buffer):
                return []  # could still be a byte order mark split across chunks
            if buffer.startswith(_BOM):
                del buffer[: len(_BOM)]
            self._at_start = False
            scanned = 0
        start = 0
        if self._skip_lf and buffer:
            if buffer[0] == 0x0A:
                start = 1
            self._skip_lf = False
        events: list[ServerSentEvent] = []
        while (match := _EOL.search(buffer, max(start, scanned))) is not None:
            line = bytes(buffer[start : match.start()])
            start = match.end()
            self._skip_lf = match.group() == b"\r" and start == len(buffer)
            event = self._line(line.decode("utf-8", errors="replace"))
            if event is not None:
                events.append(event)
        del buffer[:start]
        if len(buffer) > self._max:
            raise ChatStreamError(
                f"an event-stream line grew past {self._max} bytes without ending; "
                "the server is not sending server-sent events"
            )
        return events

    def _line(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._data_size += len(value) + 1
            if self._data_size > self._max:
                raise ChatStreamError(
                    f"one server-sent event grew past {self._max} bytes of data; "
                    "the server is not sending a chat-completion stream"
                )
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._last_id = value
        # `retry` and unknown fields are ignored: this client never reconnects.
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        data, event = self._data, self._event
        self._data, self._data_size, self._event = [], 0, ""
        if not data:
            return None
        return ServerSentEvent("\n".join(data), event or "message", self._last_id)


@dataclass(slots=True)
class _PartialCall:
    call_id: str = ""
    name: str = ""
    arguments: str = ""


class ChatStream:
    """Reassembles a streamed chat completion (`choices[0]` only) into model chunks.

    Feed it every event with `event()`; it returns the text deltas to pass on at once. When
    `complete` is true (a `finish_reason` or `[DONE]` arrived), `finish()` returns the tool
    calls and the one `Finish`. Only `[DONE]` sets `done`: after a `finish_reason`, the usage
    may still follow in a chunk with no choices.
    """

    def __init__(self) -> None:
        # Keyed by (index, n): n counts the calls a server started anew at a reused index.
        self._calls: dict[tuple[int, int], _PartialCall] = {}
        self._reason: str | None = None
        self._usage: Usage | None = None
        self.done = False
        self.unknown_reason: str | None = None

    @property
    def complete(self) -> bool:
        return self.done or self._reason is not None

    def event(self, event: ServerSentEvent) -> list[ModelChunk]:
        if self.done:
            return []
        if event.data.strip() == DONE:
            self.done = True
            return []
        try:
            payload: object = json.loads(event.data)
        except ValueError:
            payload = None
        chunk = cast("dict[str, Any]", payload) if isinstance(payload, dict) else None
        if event.event == "error" or (chunk is not None and chunk.get("error") is not None):
            detail = describe(chunk) if chunk is not None else snippet(event.data)
            raise ChatStreamError(f"the server reported an error mid-stream: {detail}")
        if chunk is None:
            raise ChatStreamError(
                f"an event's data is not a JSON object: {snippet(event.data)!r}; is the base "
                "URL an OpenAI-compatible endpoint?"
            )
        return self._chunk(chunk)

    def _chunk(self, chunk: Mapping[str, Any]) -> list[ModelChunk]:
        usage = chunk.get("usage")
        if isinstance(usage, Mapping):
            self._usage = _usage(cast("Mapping[str, Any]", usage))
        out: list[ModelChunk] = []
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return out
        for item in cast("list[object]", choices):
            if not isinstance(item, Mapping):
                continue
            choice = cast("Mapping[str, Any]", item)
            if choice.get("index") not in (0, None):
                continue  # n > 1: the agent takes the first choice only
            delta = choice.get("delta")
            if isinstance(delta, Mapping):
                delta = cast("Mapping[str, Any]", delta)
                content = delta.get("content")
                if isinstance(content, str) and content:
                    out.append(TextDelta(content))
                calls = delta.get("tool_calls")
                if isinstance(calls, list):
                    for call in cast("list[object]", calls):
                        if isinstance(call, Mapping):
                            self._call_delta(cast("Mapping[str, Any]", call))
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self._reason = reason
        return out

    def _call_delta(self, delta: Mapping[str, Any]) -> None:
        call_id = delta.get("id")
        call_id = call_id if isinstance(call_id, str) else ""
        raw_function = delta.get("function")
        function: Mapping[str, Any] = (
            cast("Mapping[str, Any]", raw_function) if isinstance(raw_function, Mapping) else {}
        )
        raw_name = function.get("name")
        name = raw_name if isinstance(raw_name, str) else ""
        index = delta.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            # Some servers leave out `index`: a new id starts a call, no id continues one.
            known = [k for k, c in self._calls.items() if call_id and c.call_id == call_id]
            if known:
                key = known[0]
            elif call_id or not self._calls:
                key = (max(self._calls, default=(-1, 0))[0] + 1, 0)
            else:
                key = max(self._calls)
        else:
            key = max((k for k in self._calls if k[0] == index), default=(index, 0))
            current = self._calls.get(key)
            # A new id with a name starts a new call even at a used index: Ollama sends
            # parallel calls all at index 0. A new id alone (LM Studio sends one with every
            # fragment) continues the call.
            if (
                current is not None
                and current.call_id
                and call_id not in ("", current.call_id)
                and name
            ):
                key = (index, key[1] + 1)
        partial = self._calls.setdefault(key, _PartialCall())
        if call_id and not partial.call_id:
            partial.call_id = call_id
        if not function:
            return
        # Most servers send the name once; some repeat it on every fragment (kept once),
        # some split a long one across fragments (joined).
        if name and name != partial.name:
            partial.name += name
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            partial.arguments += arguments
        elif isinstance(arguments, Mapping):
            # A few servers send the arguments already parsed, in one piece.
            partial.arguments += json.dumps(arguments)

    def finish(self) -> list[ModelChunk]:
        """The reassembled tool calls, in index order, then the `Finish`."""
        reason = self._reason
        mapped = _FINISH_REASONS.get(reason) if reason is not None else None
        if reason is not None and mapped is None:
            self.unknown_reason = reason
        truncated = mapped == "length"
        out: list[ModelChunk] = []
        for key in sorted(self._calls):
            call = self._complete_call(key[0], self._calls[key], truncated)
            if call is not None:
                out.append(call)
        if mapped is None:
            mapped = "tool_calls" if out else "stop"
        out.append(Finish(mapped, self._usage))
        return out

    def _complete_call(self, index: int, call: _PartialCall, truncated: bool) -> ToolCall | None:
        # A reply cut at the token limit may end inside a call's arguments; the agent never
        # runs calls from such a reply, so a broken one is dropped rather than an error.
        if not call.name:
            if truncated:
                return None
            raise ChatStreamError(
                f"tool call #{index} (id {call.call_id!r}) arrived without a function name; "
                "the server's tool-call deltas are malformed"
            )
        text = call.arguments
        try:
            arguments: object = json.loads(text) if text.strip() else {}
        except ValueError as exc:
            if truncated:
                return None
            raise ChatStreamError(
                f"tool call {call.name!r} (id {call.call_id!r}) has arguments that are not "
                f"valid JSON ({exc}): {snippet(text)!r}; the model produced a malformed call"
            ) from None
        if not isinstance(arguments, dict):
            if truncated:
                return None
            raise ChatStreamError(
                f"tool call {call.name!r} (id {call.call_id!r}) has arguments that are not a "
                f"JSON object: {snippet(text)!r}"
            )
        return ToolCall(call.call_id, call.name, cast("dict[str, Any]", arguments))


def _usage(usage: Mapping[str, Any]) -> Usage:
    def count(key: str) -> int:
        value = usage.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    return Usage(count("prompt_tokens"), count("completion_tokens"))


def describe(body: Mapping[str, Any]) -> str:
    """The message of an OpenAI-style error body (`{"error": {"message": ...}}`), or a snippet
    of the whole body."""
    error = body.get("error")
    if isinstance(error, Mapping):
        error = cast("Mapping[str, Any]", error)
        message = error.get("message")
        kind = error.get("type") or error.get("code")
        if isinstance(message, str) and message:
            return snippet(f"{message} ({kind})" if isinstance(kind, str) and kind else message)
    if isinstance(error, str) and error:
        return snippet(error)
    return snippet(json.dumps(body))


def snippet(text: str, limit: int = 300) -> str:
    """`text` on one line, cut to `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
