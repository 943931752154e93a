"""A stdio MCP server's process, owned: started in its own process group with a scrubbed
environment, its pipes turned into the streams the SDK's `ClientSession` reads and writes,
and its whole group ended (TERM, grace, KILL) when the block is left, on every path.

The SDK's own `stdio_client` also starts the server in a new session, but its waits are
fixed (2 s after closing stdin, then 2 s after TERM) and its environment is the SDK's
allowlist; this one takes `close_grace` and the shell's environment rules (D251).
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field

import anyio
import mcp_types
import trio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from .._errors import McpServerError
from .._nursery import service_nursery
from .._shell._env import command_environment
from .._shell._group import group_gone, group_has_live_members, signal_group
from ._config import McpServer

__all__ = ["StdioProcess", "open_stdio_process"]

_STDERR_TAIL = 2048  # bytes of the server's stderr kept to explain a failed start
_LINE_LIMIT = 64 * 1024 * 1024  # a longer line is no JSON-RPC message: the stream is broken
_KILL_BOUND = 5.0  # seconds to wait for a SIGKILLed group to be gone; only D-state outlives it


@dataclass(eq=False)
class StdioProcess:
    """The running server: the streams for the SDK's session, and what explains its end."""

    process: trio.Process
    read: MemoryObjectReceiveStream[SessionMessage | Exception]
    write: MemoryObjectSendStream[SessionMessage]
    stderr: bytearray = field(default_factory=bytearray)  # its last bytes, kept by a task

    def stderr_tail(self) -> str:
        """The last line the server wrote on stderr, or ''."""
        lines = bytes(self.stderr).decode("utf-8", "replace").strip().splitlines()
        return lines[-1].strip() if lines else ""

    async def exit_status(self, within: float) -> int | None:
        """The server's exit status, waiting up to `within` seconds for it to exit; None if it
        still runs. A checkpoint."""
        with trio.move_on_after(within):
            return await self.process.wait()
        return self.process.returncode


@asynccontextmanager
async def open_stdio_process(
    server: McpServer, *, cwd: str | None, close_grace: float
) -> AsyncGenerator[StdioProcess]:
    """Start `server` and yield its streams; on leaving, end its process group.

    Raises McpServerError naming the server if the command cannot be started.
    """
    env = command_environment(os.environ, env=server.env)
    try:
        process = await trio.lowlevel.open_process(
            [server.command, *server.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=server.cwd if server.cwd is not None else cwd,
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise McpServerError(
            f"MCP server {server.name!r}: cannot start {server.command!r}: {reason}",
            server=server.name,
        ) from None
    # From here on the group is ours: every path below ends it.
    try:
        read_in, read_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_in, write_out = anyio.create_memory_object_stream[SessionMessage](0)
        running = StdioProcess(process, read_out, write_in)
        async with service_nursery() as nursery:
            nursery.start_soon(_read_stdout, process, read_in)
            nursery.start_soon(_write_stdin, process, write_out, read_in)
            nursery.start_soon(_read_stderr, process, running.stderr)
            try:
                yield running
            finally:
                with trio.CancelScope(shield=True):
                    await end_group(process, close_grace)
                nursery.cancel_scope.cancel()
                for stream in (read_in, read_out, write_in, write_out):
                    stream.close()
    finally:
        with trio.CancelScope(shield=True):
            await end_group(process, close_grace)


async def end_group(process: trio.Process, grace: float) -> None:
    """Close the server's stdin, TERM its process group, wait up to `grace` seconds for the
    group to be gone, then KILL it and reap the server. Bounded; a checkpoint; idempotent."""
    pgid = process.pid  # start_new_session: the leader's pid is the group's id
    if process.stdin is not None:
        with (
            trio.CancelScope(shield=True),
            suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError),
        ):
            await process.stdin.aclose()
    if signal_group(pgid, signal.SIGTERM):
        with trio.move_on_after(grace):
            await group_gone(pgid)
        if group_has_live_members(pgid):
            signal_group(pgid, signal.SIGKILL)
            with trio.move_on_after(_KILL_BOUND):
                await group_gone(pgid)
    with trio.move_on_after(_KILL_BOUND):
        await process.wait()


async def _read_stdout(
    process: trio.Process, sink: MemoryObjectSendStream[SessionMessage | Exception]
) -> None:
    # One JSON-RPC message per line (the MCP stdio transport). The end of stdout, or of the
    # session, closes `sink`: the session sees the connection end, and its pending
    # requests fail at once instead of hanging.
    assert process.stdout is not None
    buffer = b""
    async with sink:
        try:
            while chunk := await process.stdout.receive_some(65536):
                lines = (buffer + chunk).split(b"\n")
                buffer = lines.pop()
                if len(buffer) > _LINE_LIMIT:
                    await sink.send(ValueError("the server wrote a line over 64 MiB"))
                    return
                for line in lines:
                    if line.strip():
                        await sink.send(_parse(line))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return  # the session is gone
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            return  # the pipe is gone: the server's end


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as exc:
        # The session reports a stream's exception; the connection survives one bad line.
        return exc
    return SessionMessage(message)


async def _write_stdin(
    process: trio.Process,
    source: MemoryObjectReceiveStream[SessionMessage],
    reads: MemoryObjectSendStream[SessionMessage | Exception],
) -> None:
    assert process.stdin is not None
    async with source:
        try:
            async for outgoing in source:
                data = outgoing.message.model_dump_json(by_alias=True, exclude_unset=True)
                await process.stdin.send_all(data.encode() + b"\n")
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            # The server stopped reading: end the session's reads too, so that a request
            # fails instead of waiting for an answer that cannot come.
            await reads.aclose()


async def _read_stderr(process: trio.Process, tail: bytearray) -> None:
    # Drained to its end, or a chatty server would block on a full pipe; only a tail is kept.
    assert process.stderr is not None
    try:
        while chunk := await process.stderr.receive_some(65536):
            tail.extend(chunk)
            del tail[:-_STDERR_TAIL]
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        return
