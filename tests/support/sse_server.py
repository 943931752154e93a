"""A scripted HTTP/1.1 server on loopback for the OpenAI-compatible model's tests.

It speaks just enough HTTP: it reads one request (headers and a Content-Length body) per
connection, records it, and writes the next scripted `Reply`: a status line, headers, then
the body in steps, each step its own `send_all`. A `Hold` step pauses the reply until the
test releases it, so a test decides where the network splits the stream; `DROP` closes the
socket in the middle of the body. While it writes, the server watches the connection and
records when the client goes away (a read returning b"" or a broken pipe).

It runs in the test's own trio run, on 127.0.0.1 (a numeric address: no resolver thread),
so it works under the autojump MockClock: no step ever waits on the clock.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import json
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import trio

__all__ = [
    "DONE",
    "DROP",
    "Hold",
    "Received",
    "Reply",
    "ScriptedServer",
    "Step",
    "error_reply",
    "event",
    "finish",
    "serve",
    "text",
    "tool_delta",
    "usage",
]

MAX_HEAD = 64 * 1024


@dataclass
class Hold:
    """A pause in a reply: the server sets `reached`, then waits for `release`."""

    reached: trio.Event = field(default_factory=trio.Event)
    release: trio.Event = field(default_factory=trio.Event)


class _Drop:
    def __repr__(self) -> str:
        return "DROP"


DROP = _Drop()
"""A reply step: close the connection here, without ending the body."""

Step = bytes | Hold | _Drop


@dataclass
class Reply:
    status: int = 200
    body: Sequence[Step] = ()
    headers: Sequence[tuple[str, str]] = (("content-type", "text/event-stream"),)
    # chunked: HTTP/1.1 chunked encoding (what OpenAI sends); close: the body ends when the
    # connection does; length: Content-Length (no holds or drops).
    framing: Literal["chunked", "close", "length"] = "chunked"


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: Mapping[str, str]
    body: Any


class ScriptedServer:
    """Answers each request with the next scripted reply (a 500 once they run out)."""

    def __init__(self, replies: Sequence[Reply]) -> None:
        self._replies = collections.deque(replies)
        self.requests: list[Received] = []
        self.port = 0
        self.disconnected = trio.Event()
        """Set when the client went away while a reply was still being written."""
        self.disconnected_after: int | None = None
        """How many steps of that reply had been written when it did."""
        self.open_connections = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def handle(self, stream: trio.SocketStream) -> None:
        self.open_connections += 1
        try:
            async with stream:
                request = await _read_request(stream)
                if request is None:
                    return
                self.requests.append(request)
                reply = self._replies.popleft() if self._replies else _unscripted()
                await self._answer(stream, reply)
        finally:
            self.open_connections -= 1

    async def _answer(self, stream: trio.SocketStream, reply: Reply) -> None:
        steps = list(reply.body)
        written = 0
        # From the start of the reply's last write on, a close by the client is a normal end
        # (it may read the last bytes and hang up before send_all returns here).
        finishing = False
        gone = False

        async def watch(scope: trio.CancelScope) -> None:
            nonlocal gone
            with contextlib.suppress(trio.BrokenResourceError):
                while await stream.receive_some(4096):
                    pass  # the client sends nothing more; a read of b"" is its close
            if not finishing:
                gone = True
                scope.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch, nursery.cancel_scope)
            try:
                await stream.send_all(_head(reply))
                for position, step in enumerate(steps):
                    if isinstance(step, Hold):
                        step.reached.set()
                        await step.release.wait()
                    elif isinstance(step, _Drop):
                        finishing = True
                        break
                    else:
                        finishing = position == len(steps) - 1 and reply.framing != "chunked"
                        await stream.send_all(_frame(step, reply.framing))
                    written += 1
                else:
                    finishing = True
                    if reply.framing == "chunked":
                        await stream.send_all(b"0\r\n\r\n")
            except trio.BrokenResourceError:
                gone = gone or not finishing
            nursery.cancel_scope.cancel()
        if gone:
            self.disconnected_after = written
            self.disconnected.set()


@asynccontextmanager
async def serve(*replies: Reply, port: int = 0) -> AsyncGenerator[ScriptedServer, None]:
    """A server answering with `replies` in order, on `port` (default: any free one)."""
    server = ScriptedServer(replies)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, server.handle, port, host="127.0.0.1")
        )
        server.port = listeners[0].socket.getsockname()[1]
        yield server
        nursery.cancel_scope.cancel()


async def _read_request(stream: trio.SocketStream) -> Received | None:
    data = bytearray()
    while b"\r\n\r\n" not in data:
        piece = await stream.receive_some(65536)
        if not piece:
            return None
        data += piece
        if len(data) > MAX_HEAD:
            raise AssertionError("request head too long")
    head, _, rest = bytes(data).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _version = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    body = bytearray(rest)
    while len(body) < length:
        piece = await stream.receive_some(65536)
        if not piece:
            return None
        body += piece
    parsed: Any = json.loads(bytes(body)) if body else None
    return Received(method, path, headers, parsed)


_REASONS = {
    200: "OK",
    401: "Unauthorized",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def _head(reply: Reply) -> bytes:
    lines = [f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Whatever')}"]
    lines += [f"{name}: {value}" for name, value in reply.headers]
    lines.append("connection: close")
    if reply.framing == "chunked":
        lines.append("transfer-encoding: chunked")
    elif reply.framing == "length":
        assert all(isinstance(step, bytes) for step in reply.body), "length framing: bytes only"
        size = sum(len(step) for step in reply.body if isinstance(step, bytes))
        lines.append(f"content-length: {size}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _frame(data: bytes, framing: str) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data) if framing == "chunked" else data


def _unscripted() -> Reply:
    return error_reply(500, "the test server has no reply scripted for this request")


# -- scripted content ---------------------------------------------------------------------


def event(payload: object) -> bytes:
    """One server-sent event carrying `payload` as JSON (UTF-8, not escaped to ASCII)."""
    return b"data: " + json.dumps(payload, ensure_ascii=False).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"


def _chunk(delta: Mapping[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "model": "test-model",
        "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish_reason}],
        "usage": None,
    }


def text(piece: str) -> bytes:
    return event(_chunk({"content": piece}))


def tool_delta(
    index: int, *, id: str | None = None, name: str | None = None, arguments: str | None = None
) -> bytes:
    call: dict[str, Any] = {"index": index}
    if id is not None:
        call |= {"id": id, "type": "function"}
    function: dict[str, str] = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    if function:
        call["function"] = function
    return event(_chunk({"tool_calls": [call]}))


def finish(reason: str) -> bytes:
    return event(_chunk({}, reason))


def usage(prompt: int, completion: int) -> bytes:
    """The final chunk `stream_options.include_usage` asks for: no choices, only usage."""
    return event(
        {
            "id": "chatcmpl-test",
            "object": "chat.completion.chunk",
            "choices": [],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }
    )


def error_reply(status: int, message: str, *headers: tuple[str, str]) -> Reply:
    body = json.dumps({"error": {"message": message, "type": "test_error"}}).encode()
    return Reply(status, [body], (("content-type", "application/json"), *headers), framing="length")
