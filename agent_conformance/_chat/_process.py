"""One run of a chat command (`trio-agents chat`, or a variant of it), driven over pipes as a
person types: lines in, text out, Ctrl-C as SIGINT, end of input as a closed stdin. What it
writes is kept whole, so a rule waits for text to appear after a point of its own."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import trio

from .._acp._procs import Proc, alive, descendants, kill_all

__all__ = ["ChatProcess"]


class ChatProcess:
    """The chat `argv` in `cwd` with `env`: its output so far (`output`), its stderr's tail,
    its exit status once it exited. `run` serves it until cancelled, then kills what is
    left of its process group."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> None:
        self.argv = tuple(argv)
        self.env = dict(env)
        self.cwd = cwd
        self.output = ""
        self.stderr = ""
        self.returncode: int | None = None
        self.seen: dict[tuple[int, int], Proc] = {}
        self._process: trio.Process | None = None
        self._changed = trio.Event()
        self._exited = trio.Event()
        self._stdin_closed = False

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    @property
    def exited(self) -> bool:
        return self._exited.is_set()

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        process = await trio.lowlevel.open_process(
            list(self.argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=self.cwd,
            env=self.env,
            start_new_session=True,  # its own group: Ctrl-C goes to it alone
        )
        self._process = process
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._read, process.stdout, False)
                nursery.start_soon(self._read, process.stderr, True)
                task_status.started()
                self.returncode = await process.wait()
                self._exited.set()
                self._wake()
        finally:
            self._kill_now()  # synchronous: no checkpoint a cancel could stop
            kill_all(self.left_behind())

    async def _read(self, stream: trio.abc.ReceiveStream | None, errors: bool) -> None:
        assert stream is not None
        async for data in stream:
            text = data.decode("utf-8", "replace")
            if errors:
                self.stderr = (self.stderr + text)[-4000:]
            else:
                self.output += text
            self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def _kill_now(self) -> None:
        if self._process is not None and self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._process.pid, signal.SIGKILL)

    async def expect(self, text: str, after: int, seconds: float) -> int | None:
        """Wait (at most `seconds`) until `text` appears in the output after offset `after`;
        the offset just past it, or None if it did not (the chat exited, or time ran out)."""
        with trio.move_on_after(seconds):
            while True:
                found = self.output.find(text, after)
                if found >= 0:
                    return found + len(text)
                if self.exited:
                    return None
                await self._changed.wait()
        return None

    async def expect_any(
        self, texts: Sequence[str], after: int, seconds: float
    ) -> tuple[int, int] | None:
        """Like `expect`, for whichever of `texts` appears first: (its index, the offset
        just past it), or None."""
        with trio.move_on_after(seconds):
            while True:
                found = [(self.output.find(text, after), i) for i, text in enumerate(texts)]
                hits = sorted((at, i) for at, i in found if at >= 0)
                if hits:
                    at, index = hits[0]
                    return index, at + len(texts[index])
                if self.exited:
                    return None
                await self._changed.wait()
        return None

    async def type(self, line: str) -> None:
        """Type `line` and Enter."""
        assert self._process is not None
        assert self._process.stdin is not None
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await self._process.stdin.send_all((line + "\n").encode())

    async def end_input(self) -> None:
        """Ctrl-D at an empty line: the end of the chat's input."""
        assert self._process is not None
        assert self._process.stdin is not None
        if not self._stdin_closed:
            self._stdin_closed = True
            await self._process.stdin.aclose()

    def send_signal(self, signum: int) -> None:
        self.snapshot()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signum)

    async def wait_exit(self, seconds: float) -> int | None:
        """The exit status, once it exited within `seconds`; None if it is still running."""
        with trio.move_on_after(seconds if seconds >= 0 else math.inf):
            await self._exited.wait()
        return self.returncode

    def snapshot(self) -> None:
        """Note the processes the chat has started (its commands), to find any left later."""
        if self._process is not None and not self.exited:
            for proc in descendants(self._process.pid):
                self.seen[(proc.pid, proc.start)] = proc

    def left_behind(self) -> list[Proc]:
        return [proc for proc in self.seen.values() if alive(proc)]
