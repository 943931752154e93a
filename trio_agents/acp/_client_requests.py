"""Requests the ACP server sends its client (`session/request_permission`, later the
client's file system), and the table that routes the client's answers back to their waiters.

JSON-RPC lets both peers send requests over the same pair of streams; each side numbers its
own, so the server's ids (`"agent-1"`, `"agent-2"`, ...) are strings in a namespace the
client's integer ids never meet. A waiter owns its table entry: however its wait ends
(an answer, a cancel of the turn it serves, the end of the connection) the entry goes, so
an answer that arrives after it finds no waiter and is dropped with a log line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import trio

from . import _jsonrpc as rpc
from ._jsonrpc import ClientRequestError

__all__ = ["ClientRequestError", "ClientRequests"]

logger = logging.getLogger("trio_agents.acp")


class _Waiter:
    __slots__ = ("answered", "error", "method", "result")

    def __init__(self, method: str) -> None:
        self.method = method
        self.answered = trio.Event()
        self.result: Any = None
        self.error: ClientRequestError | None = None


class ClientRequests:
    """The server's requests in flight. `send` queues one frame for the writer (never
    blocks). Used from one trio run."""

    def __init__(self, send: Callable[[bytes], None]) -> None:
        self._send = send
        self._waiting: dict[str, _Waiter] = {}
        self._abandoned: set[str] = set()  # ids whose waiter left: their answer is expected
        self._count = 0
        self._closed = False

    @property
    def pending(self) -> int:
        """How many requests wait for an answer."""
        return len(self._waiting)

    async def request(self, method: str, params: Mapping[str, Any]) -> Any:
        """Send `method` with `params` and return the client's result.

        Always a checkpoint; cancellable while it waits (the request is then abandoned: a
        later answer is ignored). Raises ClientRequestError for an error answer, or when the
        connection ends (or has ended) before the answer.
        """
        if self._closed:
            await trio.lowlevel.checkpoint()
            raise ClientRequestError(
                method, None, "the connection to the client has ended", answered=False
            )
        self._count += 1
        request_id = f"agent-{self._count}"
        waiter = _Waiter(method)
        self._waiting[request_id] = waiter
        try:
            self._send(rpc.encode_request(request_id, method, params))
            await waiter.answered.wait()
        finally:
            if self._waiting.pop(request_id, None) is not None:
                self._abandoned.add(request_id)  # left before any answer
        if waiter.error is not None:
            raise waiter.error
        return waiter.result

    def resolve(self, response: rpc.Response) -> None:
        """Hand the client's answer to its waiter; an answer nobody waits for is logged and
        dropped. Never blocks."""
        key = response.id if isinstance(response.id, str) else None
        waiter = self._waiting.pop(key, None) if key is not None else None
        if waiter is None:
            if key is not None and key in self._abandoned:
                self._abandoned.discard(key)
                logger.info("a late answer to abandoned request %s was ignored", key)
            else:
                logger.warning("a response to nothing was ignored (id %r)", response.id)
            return
        if response.error is not None:
            code = response.error.get("code")
            message = response.error.get("message")
            waiter.error = ClientRequestError(
                waiter.method,
                code if isinstance(code, int) and not isinstance(code, bool) else None,
                str(message) if message is not None else "an error without a message",
                answered=True,
            )
        else:
            waiter.result = response.result
        waiter.answered.set()

    def close(self) -> None:
        """The client's input ended: every waiter gets a ClientRequestError, and later
        requests fail at once. Never blocks; idempotent."""
        self._closed = True
        waiting = list(self._waiting.values())
        self._waiting.clear()
        for waiter in waiting:
            waiter.error = ClientRequestError(
                waiter.method,
                None,
                "the connection to the client ended before it answered",
                answered=False,
            )
            waiter.answered.set()
