"""The model machine's endpoint: an OpenAI-compatible chat-completions server on 127.0.0.1
that gives each request the next answer the machine queued, and keeps every request it read.

    Stream(pieces, end)   200 with an event stream, each piece one chunk of the body;
                          end: "whole" (then the body's end), "cut" (the connection is
                          closed mid-body) or "hold" (after `hold_after` pieces it waits
                          until released, or until the client goes, which `gone` records)
    Status(status, body)  an answer of any status, e.g. a 429 or a 200 that is a web page

A request beyond the queue gets a 400 that says so, so an adapter that retries what it must
not is counted, not hung.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Literal

import h11
import trio

from . import _http as http

__all__ = ["ModelEndpoint", "Status", "Stream", "open_model_endpoint", "refused_url"]

_UNEXPECTED = b'{"error": {"message": "the conformance endpoint expected no more requests"}}'


@dataclass(frozen=True)
class Stream:
    pieces: tuple[bytes, ...]
    end: Literal["whole", "cut", "hold"] = "whole"
    hold_after: int = 1


@dataclass(frozen=True)
class Status:
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()


Answer = Stream | Status


class ModelEndpoint:
    """The queue of answers and what was asked. Fill `answers` before a call.

    port: the port it listens on.
    seen: every request read, in order.
    arrived: when each of them was read (`time.monotonic()`).
    held: set once a held stream has sent its first pieces.
    gone: set when the client of a held stream closed the connection before its release.
    """

    def __init__(self) -> None:
        self.port = 0
        self.answers: list[Answer] = []
        self.seen: list[http.Request] = []
        self.arrived: list[float] = []
        self.held = trio.Event()
        self.gone = trio.Event()
        self.release = trio.Event()

    def base(self, path: str = "/v1") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def reset(self, answers: list[Answer]) -> None:
        """Queue `answers` for the next call, forgetting the last call's requests and hold.
        Never blocks."""
        self.release.set()
        self.answers = list(answers)
        self.seen = []
        self.arrived = []
        self.held = trio.Event()
        self.gone = trio.Event()
        self.release = trio.Event()

    async def handle(self, stream: trio.SocketStream) -> None:
        await http.serve_connection(stream, self._respond)

    async def _respond(
        self, conn: h11.Connection, stream: trio.SocketStream, request: http.Request
    ) -> bool:
        self.seen.append(request)
        self.arrived.append(time.monotonic())
        answer = self.answers.pop(0) if self.answers else Status(400, _UNEXPECTED)
        return await self._answer(conn, stream, answer)

    async def _answer(
        self, conn: h11.Connection, stream: trio.SocketStream, answer: Answer
    ) -> bool:
        """Send `answer`; False when the connection must close after it."""
        if isinstance(answer, Status):
            head = [
                ("content-type", answer.content_type),
                ("content-length", str(len(answer.body))),
            ]
            response = h11.Response(status_code=answer.status, headers=[*head, *answer.headers])
            await http.send(conn, stream, response)
            await http.send_data(conn, stream, answer.body)
            await http.send(conn, stream, h11.EndOfMessage())
            return True
        head = [("content-type", "text/event-stream"), ("cache-control", "no-cache")]
        await http.send(conn, stream, h11.Response(status_code=200, headers=head))
        pieces = list(answer.pieces)
        if answer.end == "hold":
            # This call's events: a `reset` for the next call must not see this one's end.
            held, gone, release = self.held, self.gone, self.release
            for piece in pieces[: answer.hold_after]:
                await http.send_data(conn, stream, piece)
            held.set()
            if not await http.hold(stream, release):
                gone.set()
                return False
            pieces = pieces[answer.hold_after :]
        for piece in pieces:
            await http.send_data(conn, stream, piece)
        if answer.end == "cut":
            return False
        await http.send(conn, stream, h11.EndOfMessage())
        return True


@asynccontextmanager
async def open_model_endpoint() -> AsyncGenerator[ModelEndpoint, None]:
    """A `ModelEndpoint` on an ephemeral port of 127.0.0.1 until the block ends."""
    endpoint = ModelEndpoint()
    async with http.serving(endpoint.handle) as endpoint.port:
        try:
            yield endpoint
        finally:
            endpoint.release.set()


async def refused_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens: a port bound, then freed."""
    sock = trio.socket.socket()
    with sock:
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
