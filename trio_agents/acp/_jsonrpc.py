"""Newline-delimited JSON-RPC 2.0, sans I/O: bytes in, messages out, and back. No trio import.

`LineSplitter` cuts a byte stream into lines, refusing any line longer than its limit without
buffering it (the rest of that line is skipped up to the next newline). `parse` turns one
line into a `Request`, `Notification`, `Response`, or an `Invalid` that says what error to
answer (and to which id). `encode_*` build the frames a peer reads, one line each.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "REQUEST_CANCELLED",
    "ClientRequestError",
    "Invalid",
    "JsonRpcError",
    "LineSplitter",
    "Message",
    "Notification",
    "Request",
    "RequestId",
    "Response",
    "encode_error",
    "encode_notification",
    "encode_request",
    "encode_result",
    "parse",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_CANCELLED = -32800  # ACP's `$/cancel_request`: the request was cancelled

_MESSAGES = {
    PARSE_ERROR: "Parse error",
    INVALID_REQUEST: "Invalid request",
    METHOD_NOT_FOUND: "Method not found",
    INVALID_PARAMS: "Invalid params",
    INTERNAL_ERROR: "Internal error",
    REQUEST_CANCELLED: "Request cancelled",
}

RequestId = int | str


class JsonRpcError(Exception):
    """An error to answer a request with: `code`, a detail that names what was wrong."""

    def __init__(self, code: int, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail

    @classmethod
    def invalid_params(cls, detail: str) -> JsonRpcError:
        return cls(INVALID_PARAMS, detail)

    @classmethod
    def internal(cls, detail: str) -> JsonRpcError:
        return cls(INTERNAL_ERROR, detail)


class ClientRequestError(Exception):
    """A request the server sent its client got no result: the client answered a JSON-RPC
    error (`answered`; its `code`, None if it gave none that is an integer, and its
    message), or the connection ended before it answered (not `answered`). Kept out of the
    library's error tree (as JsonRpcError is): only the server's own code sees it."""

    def __init__(self, method: str, code: int | None, message: str, *, answered: bool) -> None:
        super().__init__(f"{method}: {message}")
        self.method = method
        self.code = code
        self.message = message
        self.answered = answered


@dataclass(frozen=True, slots=True)
class Request:
    id: RequestId
    method: str
    params: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Notification:
    method: str
    params: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Response:
    """A peer's answer to one of our requests: `result`, or `error` (code, message)."""

    id: RequestId | None
    result: Any
    error: Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class Invalid:
    """A line that is not a valid message. `id` is the request id to answer, if one could be
    read; a broken notification (no id) is answered with id null only when nothing could be
    read at all or its method is not a string, as JSON-RPC 2.0 asks."""

    id: RequestId | None
    code: int
    detail: str
    answer: bool


Message = Request | Notification | Response | Invalid


class LineSplitter:
    """Cut bytes into lines. A line longer than `max_line` bytes is reported once, as None,
    and skipped up to its newline, so one huge frame cannot exhaust memory."""

    def __init__(self, max_line: int = 8 * 1024 * 1024) -> None:
        self.max_line = max_line
        self._buffer = bytearray()
        self._skipping = False

    def feed(self, data: bytes | bytearray) -> Iterator[bytes | None]:
        start = 0
        while True:
            newline = data.find(b"\n", start)
            if newline < 0:
                break
            chunk = data[start:newline]
            start = newline + 1
            if self._skipping:
                self._skipping = False
                continue
            if len(self._buffer) + len(chunk) > self.max_line:
                self._buffer.clear()
                yield None
                continue
            line = bytes(self._buffer + chunk)
            self._buffer.clear()
            yield line
        rest = data[start:]
        if self._skipping:
            return
        if len(self._buffer) + len(rest) > self.max_line:
            self._buffer.clear()
            self._skipping = True
            yield None
        else:
            self._buffer += rest

    def end(self) -> Iterator[bytes]:
        """At end of input: a last line without its newline, if any."""
        if self._buffer and not self._skipping:
            yield bytes(self._buffer)
        self._buffer.clear()


def parse(line: bytes) -> Message | None:
    """One frame; None for a blank line (ignored)."""
    if not line.strip():
        return None
    try:
        value = json.loads(line, parse_constant=_not_json)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        # RecursionError: nesting deeper than the parser's stack (a hostile frame).
        return Invalid(None, PARSE_ERROR, f"not JSON: {type(exc).__name__}: {exc}", answer=True)
    if not isinstance(value, dict):
        kind = type(value).__name__
        return Invalid(None, INVALID_REQUEST, f"a frame must be a JSON object, not {kind}", True)
    frame: dict[str, Any] = value  # pyright: ignore[reportUnknownVariableType]
    raw_id = frame.get("id")
    valid_id = raw_id is None or (isinstance(raw_id, int | str) and not isinstance(raw_id, bool))
    request_id: RequestId | None = raw_id if valid_id else None
    if "method" not in frame and ("result" in frame or "error" in frame):
        # A response is never answered, however malformed.
        error: Any = frame.get("error")
        detail = cast("Mapping[str, Any]", error) if isinstance(error, dict) else None
        return Response(request_id, frame.get("result"), detail)
    if frame.get("jsonrpc") != "2.0":
        # Not a request object, so not a notification either: answered, with its id when
        # it has a valid one, else null, as JSON-RPC 2.0's own example (`{"foo": "boo"}`)
        # is (D504).
        return Invalid(request_id, INVALID_REQUEST, '"jsonrpc" must be "2.0"', True)
    if not valid_id:
        return Invalid(
            None, INVALID_REQUEST, f"id must be a string or an integer: {raw_id!r}", True
        )
    if "method" not in frame:
        return Invalid(
            request_id, INVALID_REQUEST, "a frame needs a method, a result or an error", True
        )
    method = frame["method"]
    is_request = "id" in frame
    if not isinstance(method, str):
        # Not a notification either: answered, with id null when it has none, as JSON-RPC
        # 2.0's own example of an invalid request is (D381).
        return Invalid(request_id, INVALID_REQUEST, f"method must be a string: {method!r}", True)
    params = frame.get("params", {})
    if not isinstance(params, dict):
        return Invalid(
            request_id, INVALID_PARAMS, f"params of {method} must be an object", is_request
        )
    if is_request:
        if request_id is None:
            return Invalid(None, INVALID_REQUEST, "a request id must not be null", answer=True)
        return Request(request_id, method, params)  # pyright: ignore[reportUnknownArgumentType]
    return Notification(method, params)  # pyright: ignore[reportUnknownArgumentType]


def _not_json(constant: str) -> Any:
    # Python's parser takes NaN and Infinity; JSON has no such values (RFC 8259).
    raise ValueError(f"{constant} is not a JSON value")


def _line(frame: Mapping[str, Any]) -> bytes:
    # ASCII escapes: a lone surrogate (valid in a JSON string, not in UTF-8) still encodes.
    # No NaN or Infinity: they are not JSON, and strict parsers reject the whole line.
    return json.dumps(frame, separators=(",", ":"), allow_nan=False).encode() + b"\n"


def encode_result(request_id: RequestId, result: Any) -> bytes:
    return _line({"jsonrpc": "2.0", "id": request_id, "result": result})


def encode_error(request_id: RequestId | None, code: int, detail: str | None = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": _MESSAGES.get(code, "Error")}
    if detail:
        error["message"] += f": {detail}"
        error["data"] = detail
    return _line({"jsonrpc": "2.0", "id": request_id, "error": error})


def encode_request(request_id: RequestId, method: str, params: Mapping[str, Any]) -> bytes:
    return _line({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


def encode_notification(method: str, params: Mapping[str, Any]) -> bytes:
    return _line({"jsonrpc": "2.0", "method": method, "params": params})
