"""The reference MCP server (`agent_conformance._mcp_server`) as the tests start it, and
waits on what it records, each bounded by a deadline."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

import trio

from trio_agents import McpServer

__all__ = [
    "SERVER_MODULE",
    "environment",
    "events",
    "http_server",
    "reference",
    "wait_for_event",
]

SERVER_MODULE = "agent_conformance._mcp_server"
_POLL = 0.02  # seconds between looks at a file another process writes
_DEADLINE = 30.0  # seconds: a loaded CI machine starts the SDK's server in several


def reference(name: str, *flags: str) -> McpServer:
    """A stdio `McpServer` running the reference server with `flags`. PYTHONPATH is passed
    explicitly: the server's environment is scrubbed (rule M6), and it must import this
    checkout."""
    return McpServer(
        name,
        command=sys.executable,
        args=("-m", SERVER_MODULE, *flags),
        env={"PYTHONPATH": os.environ.get("PYTHONPATH", "")},
    )


def events(record: pathlib.Path) -> list[dict[str, Any]]:
    """The events the server recorded so far."""
    try:
        text = record.read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.endswith("}")]


def environment(pid: int) -> dict[str, str]:
    """The environment process `pid` started with, as the kernel has it."""
    raw = pathlib.Path(f"/proc/{pid}/environ").read_bytes().decode()
    return dict(item.split("=", 1) for item in raw.split("\0") if "=" in item)


async def wait_for_event(record: pathlib.Path, event: str) -> dict[str, Any]:
    """The first `event` the server records, waiting up to `_DEADLINE` seconds for it."""
    with trio.fail_after(_DEADLINE):
        while True:
            for seen in events(record):
                if seen["event"] == event:
                    return seen
            await trio.sleep(_POLL)


@asynccontextmanager
async def http_server(directory: pathlib.Path, *flags: str) -> AsyncGenerator[tuple[str, int]]:
    """Run the reference server on streamable HTTP (a free port on 127.0.0.1), or on HTTP+SSE
    with the flag `--sse`; yield its URL and pid. Killed when the block is left."""
    port_file = directory / "port"
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", SERVER_MODULE, "--http", str(port_file), *flags],
        stdin=subprocess.DEVNULL,
    )
    try:
        with trio.fail_after(_DEADLINE):
            while not port_file.exists():
                assert process.poll() is None, "the HTTP server exited before it listened"
                await trio.sleep(_POLL)
        port = int(port_file.read_text())
        path = "sse" if "--sse" in flags else "mcp"
        yield f"http://127.0.0.1:{port}/{path}", process.pid
    finally:
        process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()
