"""Known-bad openers of MCP tools: each is `open_mcp_tools` with one seeded defect, a mistake
a developer could make."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal
from collections.abc import AsyncGenerator, Callable, Generator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, overload

import trio

from trio_agents._errors import McpServerError
from trio_agents._mcp import _config, _process, _tools
from trio_agents._mcp._config import McpServer
from trio_agents._mcp._tools import open_mcp_tools
from trio_agents._tool._seam import Tool, ToolContext, ToolResult

from ._seeded import Seeded


@asynccontextmanager
async def close_left_to_the_end(
    servers: Sequence[McpServer], **options: Any
) -> AsyncGenerator[Sequence[Tool]]:
    """Leaving the tool set leaves its servers to a background task that closes them when
    the program ends (the shape of Zed #56747: a closed session's servers live on)."""
    send, receive = trio.open_memory_channel[Sequence[Tool]](1)

    async def hold() -> None:
        async with open_mcp_tools(servers, **options) as tools:
            await send.send(tools)
            await trio.sleep_forever()

    trio.lowlevel.spawn_system_task(hold)
    yield await receive.receive()


class _Mapped(Sequence[Tool]):
    """The tools of a live tool set, each handed out through `wrap` (a seeded defect's)."""

    def __init__(self, tools: Sequence[Tool], wrap: Callable[[Tool], Tool]) -> None:
        self._tools = tools
        self._wrap = wrap

    def __len__(self) -> int:
        return len(self._tools)

    @overload
    def __getitem__(self, index: int) -> Tool: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Tool]: ...
    def __getitem__(self, index: int | slice) -> Tool | Sequence[Tool]:
        if isinstance(index, slice):
            return [self._wrap(t) for t in self._tools[index]]
        return self._wrap(self._tools[index])


class _Joined(Sequence[Tool]):
    """Live tool sets, one after the other."""

    def __init__(self, sets: Sequence[Sequence[Tool]]) -> None:
        self._sets = sets

    def _all(self) -> list[Tool]:
        return [tool for tools in self._sets for tool in tools]

    def __len__(self) -> int:
        return len(self._all())

    @overload
    def __getitem__(self, index: int) -> Tool: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Tool]: ...
    def __getitem__(self, index: int | slice) -> Tool | Sequence[Tool]:
        return self._all()[index]


class _AbandonedCall:
    def __init__(self, tool: Tool, nursery: trio.Nursery) -> None:
        self._tool = tool
        self._nursery = nursery
        self.name = tool.name
        self.description = tool.description
        self.parameters = tool.parameters

    async def __call__(
        self, arguments: Mapping[str, Any], context: ToolContext
    ) -> ToolResult | str:
        done = trio.Event()
        answers: list[ToolResult | str] = []

        async def call() -> None:
            answers.append(await self._tool(arguments, context))
            done.set()

        self._nursery.start_soon(call)
        await done.wait()
        return answers[0]


@asynccontextmanager
async def cancel_abandons_the_request(
    servers: Sequence[McpServer], **options: Any
) -> AsyncGenerator[Sequence[Tool]]:
    """A cancelled call stops waiting for its answer but never cancels its request: the
    server goes on running it (the pydantic-ai shape: the call runs in a task of the
    connection's, which the caller's cancel does not reach)."""
    async with open_mcp_tools(servers, **options) as tools, trio.open_nursery() as nursery:
        yield _Mapped(tools, lambda tool: _AbandonedCall(tool, nursery))
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def tools_listed_once(
    servers: Sequence[McpServer], **options: Any
) -> AsyncGenerator[Sequence[Tool]]:
    """The tool set handed out is a list made when the servers started: a tool a server
    adds later (notifications/tools/list_changed) never shows."""
    async with open_mcp_tools(servers, **options) as tools:
        yield list(tools)


class _ErrorAsText:
    """A tool whose error results come back as plain text (`is_error` dropped)."""

    def __init__(self, tool: Tool) -> None:
        self._tool = tool
        self.name = tool.name
        self.description = tool.description
        self.parameters = tool.parameters

    async def __call__(
        self, arguments: Mapping[str, Any], context: ToolContext
    ) -> ToolResult | str:
        answer = await self._tool(arguments, context)
        return answer.content if isinstance(answer, ToolResult) else answer


@asynccontextmanager
async def error_results_as_text(
    servers: Sequence[McpServer], **options: Any
) -> AsyncGenerator[Sequence[Tool]]:
    """A call's result is its text, and only its text: a result the server marks as an
    error (or a failed call) reaches the model as an ordinary one."""
    async with open_mcp_tools(servers, **options) as tools:
        yield _Mapped(tools, _ErrorAsText)


@asynccontextmanager
async def servers_inherit_environment(
    servers: Sequence[McpServer], **options: Any
) -> AsyncGenerator[Sequence[Tool]]:
    """Each stdio server gets this process's whole environment under its configured `env`
    (so a server that needs PYTHONPATH or a token just works)."""
    widened = [
        dataclasses.replace(s, env={**os.environ, **(s.env or {})}) if s.command else s
        for s in servers
    ]
    async with open_mcp_tools(widened, **options) as tools:
        yield tools


@asynccontextmanager
async def failed_start_leaves_servers(
    servers: Sequence[McpServer], **options: Any
) -> AsyncGenerator[Sequence[Tool]]:
    """Each server is connected by a task of its own that the runtime owns, so that one
    slow server does not hold up the others; when one fails, its error is raised at once
    and the servers already started are left to their tasks (the shape of a connection
    pool whose failed warm-up forgets the connections it made)."""
    results = [trio.Event() for _ in servers]
    held: list[Sequence[Tool] | BaseException] = [() for _ in servers]
    release = trio.Event()
    closed = [trio.Event() for _ in servers]

    async def hold(index: int, server: McpServer) -> None:
        try:
            async with open_mcp_tools([server], **options) as tools:
                held[index] = tools
                results[index].set()
                await release.wait()
        except Exception as exc:
            held[index] = exc
            results[index].set()
        finally:
            closed[index].set()

    for index, server in enumerate(servers):
        trio.lowlevel.spawn_system_task(hold, index, server)
    for event in results:
        await event.wait()
    for outcome in held:
        if isinstance(outcome, BaseException):
            raise outcome
    sets = [tools for tools in held if not isinstance(tools, BaseException)]
    try:
        yield _Joined(sets)
    finally:
        release.set()
        with trio.CancelScope(shield=True):
            for event in closed:
                await event.wait()


@contextlib.contextmanager
def _patched(owner: object, name: str, value: object) -> Generator[None]:
    """`owner.name` is `value` inside the block (the opener's own code, with one mistake)."""
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


@asynccontextmanager
async def names_without_dashes(
    servers: Sequence[McpServer], **options: Any
) -> AsyncGenerator[Sequence[Tool]]:
    """A tool's name keeps only letters, digits and `_`: a `-` in a server's or a tool's
    name becomes `_` too (the model APIs' pattern read without its `-`)."""
    with _patched(_config, "_UNSAFE", re.compile(r"[^A-Za-z0-9_]")):
        async with open_mcp_tools(servers, **options) as tools:
            yield tools


@asynccontextmanager
async def server_tools_first(
    servers: Sequence[McpServer], **options: Any
) -> AsyncGenerator[Sequence[Tool]]:
    """The servers' tools come first and the caller's `base` tools after them (read as a
    fallback for names no server gives)."""

    def current(self: _tools.McpTools) -> list[Tool]:
        tools: list[Tool] = [t for c in self._connections for t in c.tools]  # pyright: ignore[reportPrivateUsage]
        return [*tools, *self._base]  # pyright: ignore[reportPrivateUsage]

    with _patched(_tools.McpTools, "_current", current):
        async with open_mcp_tools(servers, **options) as tools:
            yield tools


async def _end_leader(process: trio.Process, grace: float) -> None:
    if process.stdin is not None:
        with trio.CancelScope(shield=True), contextlib.suppress(Exception):
            await process.stdin.aclose()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with trio.move_on_after(grace):
        await process.wait()
    if process.returncode is None:
        os.killpg(process.pid, signal.SIGKILL)
        await process.wait()


@asynccontextmanager
async def group_kill_after_the_leader_only(
    servers: Sequence[McpServer], **options: Any
) -> AsyncGenerator[Sequence[Tool]]:
    """Closing a server TERMs its group but waits for the leader alone, and KILLs the group
    only when the leader outlived the grace: a child that ignores SIGTERM, of a server that
    obeys it, lives on."""
    with _patched(_process, "end_group", _end_leader):
        async with open_mcp_tools(servers, **options) as tools:
            yield tools


async def _start_bounding_initialize(self: Any, session: Any) -> bool:
    try:
        with trio.fail_after(self._timeout):
            await session.initialize()
    except trio.TooSlowError:
        self.failure = McpServerError(
            f"MCP server {self.server.name!r}: no answer to initialize within {self._timeout:g} s",
            server=self.server.name,
        )
        return False
    except Exception as exc:
        self.failure = await self._start_error(exc)
        return False
    self.tools = await self._list(session)
    self._session = session
    return True


@asynccontextmanager
async def start_timeout_bounds_initialize_only(
    servers: Sequence[McpServer], **options: Any
) -> AsyncGenerator[Sequence[Tool]]:
    """`start_timeout` bounds the server's answer to `initialize`, not the first
    `tools/list` after it: a server that never lists its tools holds the block's entry."""
    connection = _tools._Connection  # pyright: ignore[reportPrivateUsage]
    with _patched(connection, "_start", _start_bounding_initialize):
        async with open_mcp_tools(servers, **options) as tools:
            yield tools


SEEDED = (
    Seeded(
        "mcp-failed-start-leaves-servers",
        failed_start_leaves_servers,
        "mcp",
        "mcp-bad-start-leaves-nothing",
    ),
    Seeded("mcp-tools-listed-once", tools_listed_once, "mcp", "mcp-tools-relisted"),
    Seeded("mcp-names-without-dashes", names_without_dashes, "mcp", "mcp-tools-relisted"),
    Seeded("mcp-server-tools-first", server_tools_first, "mcp", "mcp-tools-relisted"),
    Seeded("mcp-error-results-as-text", error_results_as_text, "mcp", "mcp-result-text"),
    Seeded(
        "mcp-servers-inherit-environment",
        servers_inherit_environment,
        "mcp",
        "mcp-server-environment",
    ),
    Seeded("mcp-close-left-to-the-end", close_left_to_the_end, "mcp", "mcp-close-reaps"),
    Seeded(
        "mcp-group-kill-after-the-leader-only",
        group_kill_after_the_leader_only,
        "mcp",
        "mcp-close-reaps",
    ),
    Seeded(
        "mcp-start-timeout-bounds-initialize-only",
        start_timeout_bounds_initialize_only,
        "mcp",
        "mcp-bad-start-leaves-nothing",
    ),
    Seeded(
        "mcp-cancel-abandons-the-request",
        cancel_abandons_the_request,
        "mcp",
        "mcp-cancel-reaches-server",
    ),
)
