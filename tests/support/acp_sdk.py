"""The real Python ACP client (`agent-client-protocol`, asyncio) driving `trio-agents acp`
in a subprocess that runs this checkout's code: a client that records what it is sent and
answers permission requests as a test says, and the helpers to run a scenario."""

from __future__ import annotations

import asyncio
import os
import pathlib
import sys
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar, cast

from acp import PROTOCOL_VERSION, Client, spawn_agent_process, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    PermissionOption,
    RequestPermissionResponse,
)

__all__ = [
    "RecordingClient",
    "choose",
    "guarded",
    "new_session",
    "prompt",
    "read_fifo_line",
    "run",
    "server",
]

T = TypeVar("T")


def choose(options: list[PermissionOption], kind: str) -> RequestPermissionResponse:
    """The answer that selects the option of `kind`."""
    (option,) = [o for o in options if o.kind == kind]
    return RequestPermissionResponse(
        outcome=AllowedOutcome(option_id=option.option_id, outcome="selected")
    )


class RecordingClient:
    """Records every session/update in arrival order, and every permission request (answered
    by `on_permission`: allow once unless a test says otherwise); refuses anything else."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.arrived = asyncio.Event()
        self.init: Any = None  # the answer to `initialize`, which `server()` sends first
        self.capabilities: Any = None  # what `server()` says the client offers
        self.permissions: list[tuple[str, Any, list[PermissionOption]]] = []
        self.on_permission: Callable[[list[PermissionOption]], Awaitable[Any]] = self.allow_once

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self.arrived.set()

    async def allow_once(self, options: list[PermissionOption]) -> Any:
        return choose(options, "allow_once")

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[PermissionOption], **kwargs: Any
    ) -> Any:
        self.permissions.append((session_id, tool_call, options))
        self.arrived.set()
        return await self.on_permission(options)

    def on_connect(self, conn: Any) -> None:
        pass

    def of(self, session_id: str) -> list[Any]:
        return [update for sid, update in self.updates if sid == session_id]

    def text(self, session_id: str) -> str:
        return "".join(
            u.content.text
            for u in self.of(session_id)
            if isinstance(u, AgentMessageChunk) and hasattr(u.content, "text")
        )

    async def wait_for(self, session_id: str, text: str) -> None:
        while text not in self.text(session_id):
            self.arrived.clear()
            await self.arrived.wait()


@asynccontextmanager
async def server(
    client: RecordingClient, store: pathlib.Path, *extra: str
) -> AsyncGenerator[tuple[ClientSideConnection, asyncio.subprocess.Process], None]:
    command = [sys.executable, "-m", "trio_agents._cli", "acp", "--store", str(store), *extra]
    async with (
        spawn_agent_process(
            cast("Client", client),  # implements the part of the protocol the server uses
            command[0],
            *command[1:],
            env=dict(os.environ),
            transport_kwargs={"stderr": None, "shutdown_timeout": 20.0},
        ) as (conn, process)
    ):
        client.init = await conn.initialize(
            protocol_version=PROTOCOL_VERSION, client_capabilities=client.capabilities
        )
        yield conn, process


async def guarded(awaitable: Awaitable[T]) -> T:
    return await asyncio.wait_for(awaitable, 30)


def run(scenario: Awaitable[None]) -> None:
    asyncio.run(guarded(scenario))


async def new_session(conn: ClientSideConnection, cwd: pathlib.Path) -> str:
    return (await conn.new_session(cwd=str(cwd), mcp_servers=[])).session_id


def prompt(text: str) -> list[Any]:
    return [text_block(text)]


async def read_fifo_line(fifo: pathlib.Path) -> str:
    """The first line a sandboxed job writes to `fifo`, awaited on the event loop (so the
    scenario's timeout still applies) rather than in a thread that could wait for ever.
    Opened read-write: a FIFO so opened never blocks at open and never reads end-of-file."""
    loop = asyncio.get_running_loop()
    fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    try:
        data = b""
        while not data.endswith(b"\n"):
            readable = loop.create_future()
            loop.add_reader(fd, readable.set_result, None)
            try:
                await readable
            finally:
                loop.remove_reader(fd)
            data += os.read(fd, 4096)
        return data.decode()
    finally:
        os.close(fd)
