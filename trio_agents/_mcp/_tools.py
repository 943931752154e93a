"""The tools of MCP servers, owned by the block that opened them.

`open_mcp_tools` connects every server at once (each in a task of its own nursery), lists
its tools, and yields them as one live sequence. Each client session is entered and left
in the task that opened it: closing the block (normally, by an exception, by a cancel)
tells each task to leave its session, and a stdio server's process group is then ended
(`_mcp/_process`). No cancel scope crosses tasks (D250).
"""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, overload

import anyio
import mcp_types
import trio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types.jsonrpc import CONNECTION_CLOSED

from .._errors import McpConfigError, McpServerError
from .._nursery import service_nursery
from .._tool._seam import Tool
from ._config import McpServer, mcp_tool_name
from ._process import StdioProcess, open_stdio_process
from ._tool import McpTool, reason

__all__ = ["McpTools", "open_mcp_tools"]

_CLIENT = mcp_types.Implementation(name="trio-agents", version="1")
_LIST_CHANGED = "notifications/tools/list_changed"
_EXIT_WAIT = 1.0  # seconds a server whose connection closed has to be seen exited
_CLOSE_BOUND = 5.0  # seconds, past close_grace, that leaving one connection may take

_Streams = tuple[Any, Any]  # the SDK's (ReadStream, WriteStream) pair


class McpTools(Sequence[Tool]):
    """The tools of `base` first, then every server's current tools, in the order of the
    servers. Live: a server's `tools/list_changed` re-lists its tools, and the sequence
    shows the new list from then on (an agent reads it at every step).

    servers: the configured names of the servers, in order.
    """

    def __init__(self, base: Sequence[Tool], connections: Sequence[_Connection]) -> None:
        self._base = tuple(base)
        self._connections = tuple(connections)
        self.servers: tuple[str, ...] = tuple(c.server.name for c in connections)

    def _current(self) -> list[Tool]:
        tools: list[Tool] = list(self._base)
        for connection in self._connections:
            tools.extend(connection.tools)
        return tools

    def __len__(self) -> int:
        """How many tools there are now."""
        return len(self._current())

    @overload
    def __getitem__(self, index: int) -> Tool: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Tool]: ...
    def __getitem__(self, index: int | slice) -> Tool | Sequence[Tool]:
        """The tool at `index` of the current list (a list of them for a slice)."""
        return self._current()[index]

    def __repr__(self) -> str:
        return f"McpTools(servers={self.servers!r}, tools={[t.name for t in self._current()]!r})"


class _Connection:
    """One server's client session, run by `run` in a task of the opener's nursery."""

    def __init__(self, server: McpServer, *, cwd: str | None, timeout: float, grace: float):
        self.server = server
        self.tools: tuple[McpTool, ...] = ()
        self.failure: McpServerError | None = None
        self.ready = trio.Event()  # set once started or failed, on every path
        self._cwd = cwd
        self._timeout = timeout
        self._grace = grace
        self._session: ClientSession | None = None
        self._process: StdioProcess | None = None
        # Announced changes and the ones listed since: `settle` waits for them to meet.
        self._announced = 0
        self._listed = 0
        self._relisted = trio.Event()
        self._wake_send, self._wake = trio.open_memory_channel[None](math.inf)
        # Cancelled only by `abandon`, from the opener: entered and left here, in `run`.
        self._scope = trio.CancelScope()

    def close(self) -> None:
        """Tell `run` to leave the session (it does so in its own task). Never blocks.

        Leaving is bounded: an HTTP transport's goodbye (a DELETE to a server that hangs)
        is cut off after `close_grace` and `_CLOSE_BOUND` more seconds; a stdio server's
        group is ended by a shielded, bounded step of its own (`end_group`)."""
        self._wake_send.close()
        self._scope.deadline = min(
            self._scope.deadline, trio.current_time() + self._grace + _CLOSE_BOUND
        )

    async def call(self, tool: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        if self._session is None:
            raise RuntimeError("the connection is closed")
        try:
            return await self._session.call_tool(tool, arguments)
        except MCPError as exc:
            # A stdio server that died: say how, which is what the user needs to fix it.
            if exc.code != CONNECTION_CLOSED or self._process is None:
                raise
            status = await self._process.exit_status(within=_EXIT_WAIT)
            if status is None:
                raise
            raise ConnectionError(f"the server exited with status {status}") from exc

    async def settle(self) -> None:
        with trio.move_on_after(self._timeout):
            while self._listed < self._announced and self._session is not None:
                await self._relisted.wait()
        await trio.lowlevel.checkpoint()

    def abandon(self) -> None:
        """Stop starting (another server failed): `run` leaves at once. Never blocks."""
        self._scope.cancel()

    async def run(self) -> None:
        try:
            with self._scope:
                await self._run()
        finally:
            self._session = None
            self._relisted.set()
            self.ready.set()

    async def _run(self) -> None:
        try:
            async with self._transport() as (read, write):
                relay_in, relay_out = anyio.create_memory_object_stream[SessionMessage | Exception](
                    0
                )
                async with trio.open_nursery() as relays:
                    relays.start_soon(self._relay, read, relay_in)
                    async with ClientSession(relay_out, write, client_info=_CLIENT) as session:
                        if await self._start(session):
                            self.ready.set()
                            await self._serve(session)
                    relays.cancel_scope.cancel()
                    relay_in.close()
                    relay_out.close()
        except McpServerError as exc:
            self.failure = self.failure or exc
        except Exception as exc:  # reported by the opener, or by each call
            if not self.ready.is_set():
                self.failure = self.failure or await self._start_error(exc)

    def _transport(self) -> AbstractAsyncContextManager[_Streams]:
        server = self.server
        if server.transport == "stdio":
            return self._stdio()
        if server.transport == "sse":
            return sse_client(server.url, headers=dict(server.headers))
        return self._http()

    @asynccontextmanager
    async def _stdio(self) -> AsyncGenerator[_Streams]:
        async with open_stdio_process(self.server, cwd=self._cwd, close_grace=self._grace) as p:
            self._process = p
            yield p.read, p.write

    @asynccontextmanager
    async def _http(self) -> AsyncGenerator[_Streams]:
        async with (
            create_mcp_http_client(headers=dict(self.server.headers)) as client,
            streamable_http_client(self.server.url, http_client=client) as streams,
        ):
            yield streams

    async def _start(self, session: ClientSession) -> bool:
        waiting_for = "initialize"
        try:
            with trio.fail_after(self._timeout):
                await session.initialize()
                waiting_for = "tools/list"
                self.tools = await self._list(session)
        except trio.TooSlowError:
            self.failure = McpServerError(
                f"MCP server {self.server.name!r}: no answer to {waiting_for} within "
                f"{self._timeout:g} s",
                server=self.server.name,
            )
            return False
        except Exception as exc:  # becomes the one-line McpServerError
            self.failure = await self._start_error(exc)
            return False
        self._session = session
        return True

    async def _start_error(self, exc: BaseException) -> McpServerError:
        name = self.server.name
        process = self._process
        if process is not None:
            status = await process.exit_status(within=1.0)
            if status is not None:
                tail = process.stderr_tail()
                said = f"; its stderr ends: {tail}" if tail else ""
                return McpServerError(
                    f"MCP server {name!r} exited with status {status} before it answered "
                    f"initialize{said}",
                    server=name,
                )
        return McpServerError(f"MCP server {name!r}: {reason(exc)}", server=name)

    async def _list(self, session: ClientSession) -> tuple[McpTool, ...]:
        listed: list[mcp_types.Tool] = []
        params: mcp_types.PaginatedRequestParams | None = None
        while True:
            page = await session.list_tools(params=params)
            listed.extend(page.tools)
            if page.next_cursor is None:
                break
            params = mcp_types.PaginatedRequestParams(cursor=page.next_cursor)
        name = self.server.name
        return tuple(
            McpTool(
                name=mcp_tool_name(name, tool.name),
                description=tool.description or "",
                parameters=dict(tool.input_schema),
                server=name,
                tool=tool.name,
                connection=self,
            )
            for tool in listed
        )

    async def _relay(
        self,
        read: MemoryObjectReceiveStream[SessionMessage | Exception],
        sink: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        # Every message passes here in the order it came: a `tools/list_changed` sent before
        # a call's answer is counted before the call ends, so the call can `settle`.
        async with sink:
            try:
                async for item in read:
                    message = item.message if isinstance(item, SessionMessage) else None
                    if isinstance(message, mcp_types.JSONRPCNotification) and (
                        message.method == _LIST_CHANGED
                    ):
                        self._announced += 1
                        self._wake_send.send_nowait(None)
                    await sink.send(item)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, trio.ClosedResourceError):
                return

    async def _serve(self, session: ClientSession) -> None:
        async for _ in self._wake:
            while self._listed < self._announced:
                target = self._announced
                try:
                    with trio.fail_after(self._timeout):
                        self.tools = await self._list(session)
                except Exception:  # the old list stays; the calls report what fails
                    pass
                self._listed = target
                self._relisted.set()
                self._relisted = trio.Event()


@asynccontextmanager
async def open_mcp_tools(
    servers: Sequence[McpServer],
    *,
    base: Sequence[Tool] = (),
    cwd: str | None = None,
    start_timeout: float = 10.0,
    close_grace: float = 2.0,
) -> AsyncGenerator[McpTools]:
    """Connect every server at once, list its tools, and yield `base` and them as one live
    `McpTools` (pass it as an agent's `tools`).

    cwd: where stdio servers run unless their own `cwd` says otherwise.
    start_timeout: seconds a server has to answer `initialize` and `tools/list`; also the
        bound on re-listing after `tools/list_changed`.
    close_grace: seconds a stdio server's process group has between SIGTERM and SIGKILL.

    Raises McpServerError naming the server and the reason if one does not start, exits at
    once, or does not answer within `start_timeout`: the others are closed first, and
    nothing is left running. McpConfigError if two servers have one name.

    Leaving the block, on any path, closes every session in the task that opened it and
    ends every stdio server's process group (SIGTERM, `close_grace`, SIGKILL). Entering and
    leaving are checkpoints. Leaving is bounded, and a cancel does not cut short the ending
    of a stdio server's group.
    """
    names = [server.name for server in servers]
    for name in names:
        if names.count(name) > 1:
            raise McpConfigError(f"MCP server {name!r} is configured twice: give each a name")
    connections = [
        _Connection(server, cwd=cwd, timeout=start_timeout, grace=close_grace) for server in servers
    ]
    failure: McpServerError | None = None
    await trio.lowlevel.checkpoint()
    async with service_nursery() as nursery:
        for connection in connections:
            nursery.start_soon(connection.run)
        try:
            async with trio.open_nursery() as waiters:
                for connection in connections:
                    waiters.start_soon(_started, connection, waiters.cancel_scope)
            failures = [c.failure for c in connections if c.failure is not None]
            if failures:
                # The first failure, in the order of the configuration, is the one raised;
                # the servers still starting are not waited for.
                failure = failures[0]
                for connection in connections:
                    connection.abandon()
            else:
                yield McpTools(base, connections)
        finally:
            for connection in connections:
                connection.close()
    if failure is not None:
        raise failure
    await trio.lowlevel.checkpoint()


async def _started(connection: _Connection, waiting: trio.CancelScope) -> None:
    await connection.ready.wait()
    if connection.failure is not None:
        waiting.cancel()  # one failed: the others are abandoned, not waited for
