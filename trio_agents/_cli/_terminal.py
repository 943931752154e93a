"""The chat's terminal: lines from one file descriptor, text to another, without blocking
the event loop (`StdioTerminal`), and the `Terminal` protocol the chat loop is written
against, so tests drive the loop with a fake one."""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import AsyncGenerator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Final, Protocol

import trio

from .._batches import write_in_batches
from .._nursery import service_nursery

__all__ = ["DRAIN_SECONDS", "READ_SIZE", "StdioTerminal", "Terminal", "open_stdio_terminal"]


class Terminal(Protocol):
    """What the chat loop needs of a terminal."""

    async def readline(self) -> str | None:
        """The next line without its newline, or None at end of input."""
        ...

    def write(self, text: str) -> None:
        """Queue `text` for the output, in order; never blocks, never raises."""
        ...

    def error(self, text: str) -> None:
        """Report an error line (on stderr)."""
        ...


READ_SIZE: Final = 65536
DRAIN_SECONDS: Final = 5.0


class StdioTerminal:
    """Lines from a file descriptor, text to another, without blocking the event loop.

    One reader task reads the input (`os.read` in a worker thread) and hands out one line
    at a time; `readline` takes the next one. So a `readline` that is cancelled (the chat's
    prompt, or its question before a command runs, when Ctrl-C cancels it) loses nothing:
    the line goes to whoever reads next. The descriptor stays blocking, so the terminal's
    stdout (often the same open file as its stdin) never turns non-blocking under the other
    writers of the terminal, and there is no `sys.stdin` buffer lock for an abandoned read
    to hold at exit. The read is only abandoned when the chat leaves. Writes are queued and
    written in order by one writer task, each burst with one `os.write` loop in a worker
    thread, so a slow or paused terminal never stalls the loop (nor the Ctrl-C handler).
    Both tasks run while `running()` is entered."""

    def __init__(self, in_fd: int = 0, out_fd: int = 1) -> None:
        self._in_fd = in_fd
        self._out_fd = out_fd
        self._send, self._receive = trio.open_memory_channel[bytes](math.inf)
        # Unbuffered: the reader holds at most one line and one read ahead of its readers.
        self._give_line, self._lines = trio.open_memory_channel[str](0)

    async def readline(self) -> str | None:
        try:
            return await self._lines.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            return None

    def write(self, text: str) -> None:
        if text:
            with contextlib.suppress(trio.ClosedResourceError):
                self._send.send_nowait(text.encode("utf-8", "replace"))

    def error(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            print(text, file=sys.stderr, flush=True)

    @asynccontextmanager
    async def running(self) -> AsyncGenerator[StdioTerminal]:
        """This terminal with its reader and writer running for the block
        (`open_stdio_terminal`)."""
        async with service_nursery() as nursery:
            reading = trio.CancelScope()
            nursery.start_soon(self._read_all, reading)
            nursery.start_soon(self._write_all)
            try:
                yield self
            finally:
                reading.cancel(reason="the terminal is closed")
                self._send.close()
                nursery.cancel_scope.deadline = trio.current_time() + DRAIN_SECONDS

    async def _read_all(self, scope: trio.CancelScope) -> None:
        buffer = b""
        with scope, self._give_line:
            while True:
                while b"\n" in buffer:
                    line, _, buffer = buffer.partition(b"\n")
                    await self._give_line.send(line.decode("utf-8", "replace"))
                try:
                    data = await trio.to_thread.run_sync(
                        os.read, self._in_fd, READ_SIZE, abandon_on_cancel=True
                    )
                except OSError:
                    data = b""  # a broken input is an end of input
                if not data:
                    break
                buffer += data
            if buffer:
                await self._give_line.send(buffer.decode("utf-8", "replace"))

    async def _write_all(self) -> None:
        await write_in_batches(self._receive, self._write)

    async def _write(self, chunks: list[bytes]) -> bool:
        try:
            await trio.to_thread.run_sync(
                _write_fully, self._out_fd, b"".join(chunks), abandon_on_cancel=True
            )
        except OSError:
            return False
        return True


def _write_fully(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def open_stdio_terminal(
    in_fd: int = 0, out_fd: int = 1
) -> AbstractAsyncContextManager[StdioTerminal]:
    """A `StdioTerminal` whose writer runs for the block; leaving it writes what is queued
    (for at most `DRAIN_SECONDS`, in case the terminal is paused)."""
    return StdioTerminal(in_fd, out_fd).running()
