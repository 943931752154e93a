"""Processes sharing one SQLite store: a session live in one cannot be resumed in another
(its turns would interleave in the file), and a new store file can be opened by many at once."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import threading

import pytest
import trio

from trio_agents import DuplicateSessionError, SqliteStore, open_runtime
from trio_agents.testing import ScriptedModel

pytestmark = pytest.mark.subprocess

HOLDER = """
import sys, trio
from trio_agents import open_runtime
from trio_agents.testing import ScriptedModel

async def main(path):
    async with open_runtime(path) as rt:
        handle = await rt.agents.create(model=ScriptedModel(), session_id="shared")
        handle.agent.send("hello")
        await handle.agent.wait_idle()
        await rt.sessions.flush(handle.agent.session)
        print("ready", flush=True)
        await trio.to_thread.run_sync(sys.stdin.read)  # until the test closes our stdin

trio.run(main, sys.argv[1])
"""


async def test_a_session_live_in_another_process_cannot_be_resumed(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "s.sqlite3"
    holder = await trio.lowlevel.open_process(
        [sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout is not None
        assert holder.stdin is not None
        output = b""
        while not output.endswith(b"\n"):
            output += await holder.stdout.receive_some()
        assert output == b"ready\n"
        async with open_runtime(path) as rt:
            with pytest.raises(DuplicateSessionError, match="another process"):
                await rt.agents.resume("shared", model=ScriptedModel())
            assert rt.agents.list() == []
            await holder.stdin.aclose()
            assert await holder.wait() == 0
            # Its process is gone, and with it the claim: now it can be resumed here.
            handle = await rt.agents.resume("shared", model=ScriptedModel())
            assert [r.type for r in handle.agent.session.records][-1] == "turn/end"
    finally:
        holder.kill()
        await holder.wait()


def open_at_once(path: pathlib.Path, count: int) -> list[BaseException]:
    """Open a new store at `path` from `count` threads released together."""
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    async def open_store() -> None:
        async with SqliteStore(path).running():
            pass

    def opener() -> None:
        barrier.wait()
        try:
            trio.run(open_store)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_opening_a_new_store_from_many_threads_at_once_works(tmp_path: pathlib.Path) -> None:
    """Each thread stands for a process opening the file (SQLite locks the same way)."""
    for trial in range(10):
        assert open_at_once(tmp_path / f"fresh-{trial}.sqlite3", 8) == []
