"""MCP servers shared by the agents of a runtime: a plugin, owned by its fiber.

`open_mcp_tools` gives one block (an agent's, a session's) its servers. A runtime whose
agents all use the same servers loads `McpServers` instead: its fiber opens them in a task of
its own (`Fiber.enter_async_context`), so closing or reloading the plugin, or closing the
runtime, closes them in that task (rule F2), and the agents keep one live tool sequence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, overload

from .._errors import AlreadyLoadedError
from .._tool._seam import Tool
from ._config import McpServer

if TYPE_CHECKING:
    from .._fiber import Fiber
    from ._tools import McpTools

__all__ = ["McpServers"]


class McpServers:
    """A plugin (`await rt.load(servers)`) connecting MCP servers for every agent of a runtime.

    name: the plugin's name; `Runtime.load` names the plugin's fiber after it.
    servers: the servers it connects, as given.
    tools: a live `Sequence[Tool]` for the agents' `tools`: every server's tools while the
        plugin is loaded (following `tools/list_changed`), none while it is not. The same
        object for the life of the instance, so agents created before a reload see the
        servers of the new load.

    `start_timeout` and `close_grace` are `open_mcp_tools`'s.
    """

    name = "mcp-servers"

    def __init__(
        self,
        servers: Sequence[McpServer],
        *,
        start_timeout: float = 10.0,
        close_grace: float = 2.0,
    ) -> None:
        self.servers = tuple(servers)
        self._start_timeout = start_timeout
        self._close_grace = close_grace
        self._loaded: McpTools | None = None
        self._applying = False
        self.tools: Sequence[Tool] = _Live(lambda: self._loaded)

    async def apply(self, fiber: Fiber) -> None:
        """Connect the servers, owned by `fiber` until it closes. Always a checkpoint. Raises
        McpServerError (as `open_mcp_tools` does, nothing left running) if one does not
        start, and AlreadyLoadedError if this instance is loaded already."""
        # Imported here: the SDK costs seconds to import, and only loading needs it.
        from ._tools import open_mcp_tools

        if self._loaded is not None or self._applying:
            raise AlreadyLoadedError(
                "these McpServers are already loaded in a runtime; use rt.reload() to "
                "connect them again, or make another instance for another runtime"
            )
        self._applying = True
        try:
            opened = open_mcp_tools(
                self.servers, start_timeout=self._start_timeout, close_grace=self._close_grace
            )
            tools = await fiber.enter_async_context(opened)
        finally:
            self._applying = False
        self._loaded = tools
        # Pushed after the servers: runs first, so no agent calls a server being closed.
        fiber.callback(self._unbind)

    def _unbind(self) -> None:
        self._loaded = None


class _Live(Sequence[Tool]):
    """The plugin's current tools, read at each use (an agent reads its tools every step)."""

    def __init__(self, loaded: Callable[[], Sequence[Tool] | None]) -> None:
        self._loaded = loaded

    def _current(self) -> Sequence[Tool]:
        loaded = self._loaded()
        return () if loaded is None else loaded

    def __len__(self) -> int:
        return len(self._current())

    @overload
    def __getitem__(self, index: int) -> Tool: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Tool]: ...
    def __getitem__(self, index: int | slice) -> Tool | Sequence[Tool]:
        return self._current()[index]
