"""HTTP/1.1 on a trio stream through h11, for the suite's scripted endpoints on 127.0.0.1:
the ACP mode's model endpoint (`_acp/_endpoint`) and the model machine's (`_model_endpoint`).

Only what a scripted server needs: read one request whole (method, target, headers, JSON
body), answer JSON or send a response piece by piece, and wait for a release or for the
client to go away.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import h11
import trio

__all__ = [
    "MAX_BODY",
    "Request",
    "hold",
    "read_request",
    "send",
    "send_data",
    "send_json",
    "serve_connection",
    "serving",
]

MAX_BODY = 32 * 1024 * 1024


@dataclass(frozen=True)
class Request:
    """One request as the server read it.

    method: `GET`, `POST`, ...
    target: the path and query string, as sent.
    headers: the header names in lower case, with their values.
    body: the parsed JSON body; None when there was none or it was not JSON.
    """

    method: str
    target: str
    headers: tuple[tuple[str, str], ...]
    body: Any

    @property
    def path(self) -> str:
        """The target without its query string."""
        return self.target.split("?", 1)[0]

    def header(self, name: str) -> str | None:
        """The value of header `name` (the last one sent), or None."""
        found = [value for key, value in self.headers if key == name.lower()]
        return found[-1] if found else None


async def read_request(conn: h11.Connection, stream: trio.SocketStream) -> Request | None:
    """The next request, read whole; None at the end of the connection, on a request that is
    not HTTP, or on a body past `MAX_BODY`."""
    head: h11.Request | None = None
    body = bytearray()
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError:
            return None
        if event is h11.NEED_DATA:
            data = await stream.receive_some(65536)
            conn.receive_data(data)
            continue
        if isinstance(event, h11.Request):
            head = event
        elif isinstance(event, h11.Data):
            body += event.data
            if len(body) > MAX_BODY:
                return None
        elif isinstance(event, h11.EndOfMessage) and head is not None:
            try:
                parsed: Any = json.loads(bytes(body)) if body else None
            except ValueError:
                parsed = None
            headers = tuple(
                (key.decode("latin-1").lower(), value.decode("latin-1"))
                for key, value in head.headers
            )
            return Request(head.method.decode(), head.target.decode("latin-1"), headers, parsed)
        elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
            return None


async def send(
    conn: h11.Connection,
    stream: trio.SocketStream,
    event: h11.Response | h11.Data | h11.EndOfMessage,
) -> None:
    """Send one h11 event."""
    data = conn.send(event)
    if data:
        await stream.send_all(data)


async def send_data(conn: h11.Connection, stream: trio.SocketStream, data: bytes) -> None:
    """Send `data` as one piece of the body (one chunk of a chunked one)."""
    await send(conn, stream, h11.Data(data=data))


async def send_json(
    conn: h11.Connection,
    stream: trio.SocketStream,
    status: int,
    payload: object,
    headers: tuple[tuple[str, str], ...] = (),
) -> None:
    """A whole JSON answer with status `status`."""
    data = json.dumps(payload).encode()
    head = [("content-type", "application/json"), ("content-length", str(len(data))), *headers]
    await send(conn, stream, h11.Response(status_code=status, headers=head))
    await send_data(conn, stream, data)
    await send(conn, stream, h11.EndOfMessage())


async def hold(stream: trio.SocketStream, released: trio.Event) -> bool:
    """Wait for `released`; False if the client closed the connection first."""
    result = False
    async with trio.open_nursery() as nursery:

        async def release() -> None:
            nonlocal result
            await released.wait()
            result = True
            nursery.cancel_scope.cancel()

        async def watch() -> None:
            with contextlib.suppress(trio.BrokenResourceError):
                while await stream.receive_some(4096):
                    pass  # a client sends nothing during a response; b"" is its close
            nursery.cancel_scope.cancel()

        nursery.start_soon(release)
        nursery.start_soon(watch)
    return result


@asynccontextmanager
async def serving(handle: Callable[[trio.SocketStream], Awaitable[None]]) -> AsyncGenerator[int]:
    """Serve each connection to an ephemeral port of 127.0.0.1 with `handle` until the block
    ends; yields the port."""
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, handle, 0, host="127.0.0.1")
        )
        try:
            yield listeners[0].socket.getsockname()[1]
        finally:
            nursery.cancel_scope.cancel()


async def serve_connection(
    stream: trio.SocketStream,
    respond: Callable[[h11.Connection, trio.SocketStream, Request], Awaitable[bool]],
) -> None:
    """Answer the requests of one keep-alive connection with `respond` (False: close the
    connection after this answer) until the client closes it or breaks the protocol."""
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=64 * 1024)
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        async with stream:
            while True:
                request = await read_request(conn, stream)
                if request is None or not await respond(conn, stream, request):
                    return
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return
                conn.start_next_cycle()
