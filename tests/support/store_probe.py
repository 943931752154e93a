"""Looking at a SQLite store from outside it, for the tests of its commits: what is on disk
(read by a connection of the test's own), a record that waits in the queue, and a bounded
poll of a condition another thread or process makes true."""

from __future__ import annotations

import pathlib
import sqlite3
from collections.abc import Callable

import trio

from trio_agents._store._session import Session

__all__ = ["message", "on_disk", "wait_until"]


def on_disk(path: pathlib.Path) -> dict[str, int]:
    """Records per session, as another connection reads the file."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT session_id, COUNT(*) FROM records GROUP BY session_id")
        return dict(rows.fetchall())
    finally:
        conn.close()


def message(session: Session, index: int) -> None:
    """A record that is no commit trigger: it waits in the queue for a flush or a trigger."""
    session.append("context/message", {"id": f"{session.id}-{index}", "content": "c"})


async def wait_until(condition: Callable[[], bool], what: str, seconds: float = 20.0) -> None:
    """Poll a real condition (another thread's, another process's, or the file's), for at
    most `seconds`."""
    with trio.move_on_after(seconds):
        while not condition():  # noqa: ASYNC110 - a condition of another thread or process
            await trio.sleep(0.005)
        return
    raise AssertionError(f"still waiting after {seconds}s for {what}")
