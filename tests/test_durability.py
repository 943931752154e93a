"""Durability against a real process death: a child (tests/support/crash_child.py) is SIGKILLed and
the parent reopens its SQLite file.

- After `handle.aclose()` returns, the closing `turn/end` is durable: the child prints a
  marker right after it, stops its event loop and is killed at once. The child slows its
  disk down while closing, so a close that did not wait for the write would lose it.
- Killed at any point of running turns, the file holds whole records only, structurally
  valid up to a possibly open last turn; `resume` closes that turn (rule L6) and the agent
  runs a new turn.

The parent waits on the child's output lines, never on time. Kill timing varies from run to
run; every assertion holds for whatever state the kill left.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest
import trio

from agent_conformance._history import history_problems
from trio_agents import Record, SqliteStore, open_runtime
from trio_agents.testing import ScriptedModel

from .support.crash_points import (
    HELD_CALLS,
    RECORD_POINTS,
    SESSION,
    TURN_TYPES,
    check_resume,
    check_stored,
    load,
    open_turn,
    spawn,
    unanswered_calls,
)


def integrity(db: Path) -> str:
    conn = sqlite3.connect(db)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


@pytest.mark.subprocess
async def test_a_closed_agents_turn_end_survives_sigkill_right_after_aclose(
    tmp_path: Path,
) -> None:
    db = tmp_path / "close.sqlite3"
    child = await spawn("close", db)
    try:
        assert await child.line() == "CLOSED"
    finally:
        with trio.CancelScope(shield=True):
            await child.kill()

    assert await trio.to_thread.run_sync(integrity, db) == "ok"
    store = SqliteStore(db)
    async with store.running():
        records = (await store.load(SESSION)).records
        [info] = await store.list_sessions()
    assert [rec.type for rec in records] == [
        "turn/start",
        "user/message",
        "step/start",
        "step/end",
        "turn/end",
    ]
    assert dict(records[-1].data) == {"turn": 1, "reason": {"kind": "closed"}}
    assert history_problems(records, allow_open_turn=False) == []
    assert (info.id, info.turns, info.last_end) == (SESSION, 1, "closed")

    # A closed session needs no repair: resuming it appends nothing.
    async with open_runtime(db) as rt:
        handle = await rt.agents.resume(SESSION, model=ScriptedModel())
        assert handle.agent.session.records == records
        await handle.aclose()


async def crash_at(db: Path, hold: str | None, marker: str) -> tuple[str, Sequence[Record]]:
    """Run a crash child, SIGKILL it right after the line starting with `marker` and
    return that line and the records its file holds (no repair)."""
    child = await spawn("crash", db, *([hold] if hold is not None else []))
    try:
        assert await child.line() == "READY"
        line = await child.wait_for(marker)
    finally:
        with trio.CancelScope(shield=True):
            await child.kill()
    assert await trio.to_thread.run_sync(integrity, db) == "ok"
    return line, await load(db)


@pytest.mark.subprocess
async def test_sigkill_at_20_points_leaves_whole_records_and_resume_repairs_them(
    tmp_path: Path,
) -> None:
    assert len(RECORD_POINTS) + len(HELD_CALLS) == 20
    open_turns = 0
    killed_after: set[str] = set()
    for k in RECORD_POINTS:
        db = tmp_path / f"record-{k}.sqlite3"
        line, stored = await crash_at(db, None, f"RECORD {k} ")
        # The loop's records come in a fixed order of types.
        killed_after.add(line.split()[2])
        assert line.split()[2] == TURN_TYPES[(k - 1) % len(TURN_TYPES)]
        check_stored(stored)
        open_turns += open_turn(stored) is not None
        await check_resume(db, stored)
    for call_id in HELD_CALLS:
        db = tmp_path / f"held-{call_id}.sqlite3"
        _, stored = await crash_at(db, call_id, f"HELD {call_id}")
        check_stored(stored)
        # Killed inside a running tool whose call was durable: the repair must answer it.
        assert open_turn(stored) is not None
        assert call_id in unanswered_calls(stored)
        open_turns += 1
        await check_resume(db, stored)
    # The record points cover every phase of a turn...
    assert killed_after == set(TURN_TYPES)
    # ...and enough kills caught a turn open on disk that the repair was really exercised.
    assert open_turns >= 5, f"only {open_turns} of 20 kills left an open turn"
