"""Driving `trio-agents chat` in tests: in process (a fake terminal, interrupts from a
channel) and as the real command in a pseudo-terminal."""

from __future__ import annotations

import math
import os
import pathlib
import sys
import time
from collections.abc import Callable, Sequence

import pexpect
import trio
import trio.testing

from trio_agents import Model, Record, SessionStore, SqliteStore
from trio_agents._cli._chat import ChatConfig, run_chat
from trio_agents._model._offline import OfflineModel
from trio_agents._store._base import StoredSession

__all__ = [
    "TIMEOUT",
    "ChatRun",
    "FakeTerminal",
    "config",
    "of_type",
    "read_session",
    "spawn_chat",
    "stored",
    "wait_for",
]

TIMEOUT = 30  # seconds, for each expectation in a pseudo-terminal; nothing here sleeps


class FakeTerminal:
    """Lines typed by the test, output kept; `expect` reads on like pexpect does."""

    def __init__(self) -> None:
        self.output = ""
        self.errors: list[str] = []
        self._seen = 0
        self._wrote = trio.Event()
        self._send, self._lines = trio.open_memory_channel[str](math.inf)

    async def readline(self) -> str | None:
        try:
            return await self._lines.receive()
        except trio.EndOfChannel:
            return None

    def write(self, text: str) -> None:
        self.output += text
        self._wrote.set()
        self._wrote = trio.Event()

    def error(self, text: str) -> None:
        self.errors.append(text)

    def type(self, line: str) -> None:
        self._send.send_nowait(line)

    def end_input(self) -> None:
        self._send.close()

    async def expect(self, text: str) -> None:
        """Once everything has settled, `text` is in the output after the last match."""
        await trio.testing.wait_all_tasks_blocked()
        at = self.output.find(text, self._seen)
        assert at >= 0, f"{text!r} not in the new output {self.output[self._seen :]!r}"
        self._seen = at + len(text)

    async def expect_soon(self, text: str, seconds: float = TIMEOUT) -> None:
        """`expect`, for output that waits on a real process: polled for at most `seconds`
        (real clock only: a test marked `subprocess`)."""
        with trio.move_on_after(seconds):
            while self.output.find(text, self._seen) < 0:
                await self._wrote.wait()
        await self.expect(text)  # says what came instead, if it did not come in time


class ChatRun:
    """`run_chat` in the background, with a channel for Ctrl-C."""

    def __init__(self, terminal: FakeTerminal, config: ChatConfig) -> None:
        self.terminal = terminal
        self.config = config
        self.interrupts, self._receive = trio.open_memory_channel[None](math.inf)
        self.code: int | None = None
        self.done = trio.Event()

    async def run(self) -> None:
        self.code = await run_chat(self.terminal, self.config, self._receive)
        self.done.set()

    def ctrl_c(self) -> None:
        self.interrupts.send_nowait(None)

    async def exit_code(self) -> int | None:
        await self.done.wait()
        return self.code


def config(
    store: SessionStore, model: Callable[[], Model] = OfflineModel, **kw: object
) -> ChatConfig:
    fields: dict[str, object] = {"new_session_id": "s1", "cwd": "/", **kw}
    return ChatConfig(store=store, model_factory=model, **fields)  # type: ignore[arg-type]


async def stored(store: SessionStore, sid: str = "s1") -> StoredSession:
    return await store.load(sid)


def of_type(records: Sequence[Record], type: str) -> list[dict[str, object]]:
    return [dict(record.data) for record in records if record.type == type]


def spawn_chat(tmp_path: pathlib.Path, *args: str) -> pexpect.spawn[str]:
    """`trio-agents chat` in a pseudo-terminal, with no model endpoint configured (so the
    offline model), its output echoed to the test's stdout (shown if the test fails)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")  # never the user's store
    child: pexpect.spawn[str] = pexpect.spawn(
        sys.executable,  # with PYTHONPATH inherited: this checkout's code
        ["-m", "trio_agents._cli", "chat", "--store", str(tmp_path / "s.db"), *args],
        cwd=str(tmp_path),
        env=env,
        encoding="utf-8",
        timeout=TIMEOUT,
        dimensions=(40, 200),
    )
    child.logfile_read = sys.stdout
    return child


def wait_for(condition: Callable[[], bool], seconds: float = TIMEOUT) -> None:
    """Poll a real condition (a file a command made) until it holds, for at most `seconds`."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the condition did not come true in time"
        time.sleep(0.01)


def read_session(path: pathlib.Path, sid: str) -> StoredSession:
    """The session as stored, read through a read-only store (looking changes nothing)."""

    async def load() -> StoredSession:
        store = SqliteStore(path, readonly=True)
        async with store.running():
            return await store.load(sid)

    return trio.run(load)
