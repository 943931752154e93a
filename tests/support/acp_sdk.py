"""The official Python ACP client (`agent-client-protocol`, asyncio) driving a
`trio-agents acp` process of this checkout over real stdio, for tests that need several
server processes in turn (tests/test_acp_sessions.py)."""

from __future__ import annotations

import asyncio
import os
import pathlib
import sys
from collections.abc import AsyncGenerator, Awaitable
from contextlib import asynccontextmanager
from typing import Any, TypeVar, cast

from acp import PROTOCOL_VERSION, Client, RequestError, spawn_agent_process, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import AgentMessageChunk

__all__ = ["RecordingClient", "guarded", "new_session", "prompt", "server"]

T = TypeVar("T")


class RecordingClient:
    """Records every session/update (parsed by the SDK into `acp.schema` models) in arrival
    order; refuses anything else."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.init: Any = None  # the answer to `initialize`, which `server()` sends first

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError(-32601, "not supported by this test client")

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


@asynccontextmanager
async def server(
    client: RecordingClient, store: pathlib.Path
) -> AsyncGenerator[ClientSideConnection, None]:
    """`trio-agents acp --store STORE` of this checkout, initialized; exits 0 at the end."""
    command = [sys.executable, "-m", "trio_agents._cli", "acp", "--store", str(store)]
    async with (
        spawn_agent_process(
            cast("Client", client),  # implements the part of the protocol the server uses
            command[0],
            *command[1:],
            env=dict(os.environ),
            transport_kwargs={"stderr": None, "shutdown_timeout": 20.0},
        ) as (conn, process)
    ):
        client.init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
        yield conn
    assert process.returncode == 0


async def guarded(awaitable: Awaitable[T]) -> T:
    return await asyncio.wait_for(awaitable, 60)


async def new_session(conn: ClientSideConnection, cwd: pathlib.Path) -> str:
    return (await conn.new_session(cwd=str(cwd), mcp_servers=[])).session_id


def prompt(text: str) -> list[Any]:
    return [text_block(text)]
