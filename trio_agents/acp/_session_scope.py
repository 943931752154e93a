"""What owns one ACP session: a fiber of the runtime that holds the session's MCP servers and
its agent, so closing the session is closing that fiber.

    runtime fiber
      └─ "acp session <id>" fiber   (opened before the MCP servers, closed last)
           ├─ open_mcp_tools(...)    entered and exited by a task of this fiber
           └─ the agent              created in this fiber, after the servers answered

The servers are connected before the agent exists: a server that does not start fails the
request before anything is created or stored, and the agent's tools are the live `McpTools`
from its first step on. The fiber unwinds its disposers newest first, so on every close path
(end of input, SIGTERM, a failed request's rollback, the runtime's close) the agent stops
first, its turn ending while its servers still answer, and then the servers are closed in
the task that opened them.
"""

from __future__ import annotations

from collections.abc import Sequence

import trio

from .._errors import McpConfigError, McpServerError
from .._fiber import Fiber
from .._mcp._config import McpServer
from .._runtime import Runtime
from .._tool._seam import Tool
from ._jsonrpc import JsonRpcError

__all__ = ["MCP_CLOSE_GRACE", "MCP_START_FAILED", "SessionScope", "open_session_scope"]

MCP_CLOSE_GRACE = 2.0
"""Seconds a session's stdio MCP server has between SIGTERM and SIGKILL when it closes."""

MCP_START_FAILED = -32603
"""The JSON-RPC code of a session/new or session/load whose MCP server did not start: the
params were well formed, and the agent could not carry the request out (design D262)."""


class SessionScope:
    """One session's fiber, the MCP servers the client named for it, and the tools its
    agent gets: the base tools, then every MCP server's (a live sequence that follows
    `tools/list_changed`)."""

    __slots__ = ("fiber", "servers", "tools")

    def __init__(
        self, fiber: Fiber, tools: Sequence[Tool], servers: Sequence[McpServer] = ()
    ) -> None:
        self.fiber = fiber
        self.tools = tools
        self.servers = tuple(servers)

    async def aclose(self) -> None:
        """Close the session's agent, then its MCP servers. Shielded and bounded (the agent's
        `close_grace`, then each server's close grace); always a checkpoint. Raises the
        ExceptionGroup of what failed; everything is closed regardless."""
        await self.fiber.aclose()


async def open_session_scope(
    runtime: Runtime,
    session_id: str,
    servers: Sequence[McpServer],
    *,
    base: Sequence[Tool],
    cwd: str,
    start_timeout: float,
) -> SessionScope:
    """Open a session's fiber and connect its MCP servers in it (none: the agent gets
    `base`). Always a checkpoint.

    Raises JsonRpcError (`MCP_START_FAILED`) naming the server and the reason when one does
    not start, exits at once or does not answer `initialize` within `start_timeout` seconds,
    and (invalid params) for two servers of one name; whatever was started is closed first,
    and the fiber too.
    """
    fiber = await runtime.open_child(f"acp session {session_id}")
    try:
        if not servers:
            return SessionScope(fiber, base)
        # Imported here: the SDK costs the server a second of start-up, and most sessions
        # have no MCP server.
        from .._mcp._tools import open_mcp_tools

        tools = await fiber.enter_async_context(
            open_mcp_tools(
                servers,
                base=base,
                cwd=cwd,
                start_timeout=start_timeout,
                close_grace=MCP_CLOSE_GRACE,
            )
        )
    except (McpServerError, McpConfigError) as exc:
        with trio.CancelScope(shield=True):
            await fiber.aclose()
        if isinstance(exc, McpConfigError):  # two servers of one name: the client's params
            raise JsonRpcError.invalid_params(str(exc)) from None
        raise JsonRpcError(MCP_START_FAILED, str(exc)) from None
    except BaseException:
        with trio.CancelScope(shield=True):
            await fiber.aclose()
        raise
    return SessionScope(fiber, tools, servers)
