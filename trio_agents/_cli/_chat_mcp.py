"""`trio-agents chat --mcp FILE`: the MCP servers a configuration file names, and the task
that owns their connections while the chat runs.

    --mcp FILE (repeatable) ── read_mcp_files ──► McpServer values, or one line naming the
                                                  file and the entry (exit 2, nothing started)
    Chat.run ── McpHolder.open ──► a task of the chat's nursery: `open_mcp_tools` ... close
                   └─ the agent's tools: bash's, then every server's (a live sequence)

The holder task opens the servers and closes them itself, so the client sessions are closed
by the task that opened them (no cancel scope crosses tasks, D271). The chat sets the
holder's close event as it unwinds, after the agent closed: on every way out (end of input,
Ctrl-C, SIGTERM, SIGHUP, a failed start) the servers close before the runtime does.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import trio

from .._errors import McpConfigError, McpServerError
from .._mcp._config import McpServer, mcp_servers_from_config
from .._tool._seam import Tool
from ._terminal import Terminal

__all__ = ["EXIT_USAGE", "McpHolder", "add_mcp", "read_mcp_files"]

EXIT_USAGE: Final = 2


def add_mcp(parser: argparse.ArgumentParser) -> None:
    """`--mcp FILE` (repeatable): the paths, [] when not given."""
    parser.add_argument(
        "--mcp",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help='give the agent the tools of the MCP servers FILE configures ({"mcpServers": '
        '{"name": {"command": ..., "args": [...], "env": {...}} or {"url": ...}}}); '
        "repeatable; each call is asked like a bash command unless --auto",
    )


def read_mcp_files(paths: Sequence[Path]) -> tuple[McpServer, ...] | str:
    """The servers the files configure, in order; or the one line that says what is wrong
    with which file and entry (a file that cannot be read, is not JSON, has a bad entry, or
    names a server another file named already)."""
    servers: list[McpServer] = []
    named_in: dict[str, Path] = {}
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            return f"--mcp {path}: cannot read it: {exc.strerror or exc}"
        except UnicodeDecodeError:
            return f"--mcp {path}: not UTF-8 text, so not a JSON configuration"
        try:
            data: object = json.loads(text)
        except json.JSONDecodeError as exc:
            return f"--mcp {path}: not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        try:
            found = mcp_servers_from_config(data, source=str(path))
        except McpConfigError as exc:
            return f"--mcp {exc}"  # it names the file, the entry and the field
        for server in found:
            earlier = named_in.get(server.name)
            if earlier is not None:
                return (
                    f"--mcp {path}: mcpServers.{server.name}: {earlier} names a server "
                    f"{server.name!r} already; rename one of them"
                )
            named_in[server.name] = path
            servers.append(server)
    return tuple(servers)


class McpHolder:
    """The chat's MCP servers: `open` starts the task that owns their connections and
    returns the agent's tools (or the exit code after saying why they did not start),
    `close` tells that task to close them. With no servers it starts nothing."""

    START_TIMEOUT: Final = 10.0
    """Seconds a server has to start and answer `initialize`."""
    CLOSE_GRACE: Final = 2.0
    """Seconds between a stdio server's SIGTERM and its SIGKILL."""
    CLOSE_LIMIT: Final = 2 * CLOSE_GRACE + 1.0
    """What closing the servers adds to the bound on a signalled teardown."""

    def __init__(self, servers: Sequence[McpServer]) -> None:
        self.servers = tuple(servers)
        self._closing = trio.Event()

    async def open(
        self, nursery: trio.Nursery, base: Sequence[Tool], cwd: str, terminal: Terminal
    ) -> Sequence[Tool] | int:
        """`base` then every server's tools, once every server answered; EXIT_USAGE after
        one line on the terminal naming the server that did not start and why (nothing of
        any server is left running then). Always a checkpoint; a cancel (Ctrl-C while
        starting) propagates, after the servers started so far are closed."""
        if not self.servers:
            await trio.lowlevel.checkpoint()
            return base
        try:
            tools: Sequence[Tool] = await nursery.start(self._hold, base, cwd)
        except McpServerError as exc:
            terminal.error(f"trio-agents chat: --mcp: {exc}")
            return EXIT_USAGE
        return tools

    def close(self) -> None:
        """Let the holder task close the servers (it does, in its own task). Never blocks."""
        self._closing.set()

    async def _hold(
        self,
        base: Sequence[Tool],
        cwd: str,
        task_status: trio.TaskStatus[Sequence[Tool]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        # Imported here: the SDK takes a second to import, which only a chat with servers
        # should pay (every other command imports this module).
        from .._mcp._tools import open_mcp_tools

        async with open_mcp_tools(
            self.servers,
            base=base,
            cwd=cwd,
            start_timeout=self.START_TIMEOUT,
            close_grace=self.CLOSE_GRACE,
        ) as tools:
            task_status.started(tools)
            await self._closing.wait()
