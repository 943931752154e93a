"""Two hosts simulated on one PostgreSQL database (rules L13-L15): runtimes in separate
processes, a real server the fixtures start, real SIGKILLs.

- A session live in a child process cannot be resumed here (SessionLiveElsewhereError);
  once the child is SIGKILLed the server drops its connection, and with it the claim,
  within FREED_WITHIN seconds; the resume here then repairs the open turn.
- 20 kill points, as in tests/test_durability.py but on PostgreSQL: whatever the kill
  interrupted, the database holds whole records only, and every open turn is repaired.

The parent waits on the child's output lines and polls for the claim with a deadline,
never on time.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Final

import pytest
import trio

from trio_agents import PostgresStore, SessionLiveElsewhereError

from .support.crash_points import (
    HELD_CALLS,
    RECORD_POINTS,
    TURN_TYPES,
    check_resume,
    check_stored,
    load,
    open_turn,
    spawn,
    unanswered_calls,
)
from .support.postgres import PgServer

SESSION: Final = "s1"
# The claim must be free this soon after the SIGKILL: the server sees the socket close at
# once; the bound leaves room for a loaded machine (measured: tens of milliseconds).
FREED_WITHIN: Final = 5.0

pytestmark = pytest.mark.subprocess


async def _refused(dsn: str) -> str:
    store = PostgresStore(dsn)
    async with store.running():
        with pytest.raises(SessionLiveElsewhereError) as caught:
            await store.restore(SESSION)
    return str(caught.value)


async def _claims_freed(dsn: str) -> None:
    """Wait (bounded) until no advisory lock is held in the database at `dsn`: a SIGKILLed
    holder's backend notices its client gone a moment after the kill, and only then frees
    its claims (the test above measures it). Polled: the server has no event for it."""

    def held() -> int:
        import psycopg

        with psycopg.connect(dsn) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_locks AS l JOIN pg_database AS d ON l.database = d.oid "
                "WHERE l.locktype = 'advisory' AND d.datname = current_database()"
            ).fetchone()
        return int(row[0]) if row is not None else 0

    with trio.fail_after(FREED_WITHIN):
        while await trio.to_thread.run_sync(held):  # noqa: ASYNC110 - no event for it
            await trio.sleep(0.01)


async def test_a_session_live_in_another_process_is_refused_until_its_holder_is_killed(
    postgres_dsn: str, tmp_path: Path
) -> None:
    child = await spawn("crash", tmp_path / "holder", "call-3", target=postgres_dsn)
    try:
        assert await child.line() == "READY"
        await child.wait_for("HELD call-3")
        message = await _refused(postgres_dsn)
        assert "'s1'" in message
        assert "another connection" in message
        assert "postgres@" in message  # names the database...
    finally:
        with trio.CancelScope(shield=True):
            await child.kill()
    killed = time.monotonic()
    store = PostgresStore(postgres_dsn)
    async with store.running():
        with trio.fail_after(FREED_WITHIN):
            while True:
                try:
                    restored = await store.restore(SESSION)
                    break
                except SessionLiveElsewhereError:
                    await trio.sleep(0.01)
    freed = time.monotonic() - killed
    print(f"claim freed {freed * 1000:.0f} ms after the SIGKILL")
    records = restored.records
    assert records[-1].type == "turn/end"
    assert dict(records[-1].data)["reason"] == {"kind": "interrupted"}


async def test_sigkill_at_20_points_on_postgres_leaves_whole_records_repaired(
    postgres_server: PgServer, tmp_path: Path
) -> None:
    assert len(RECORD_POINTS) + len(HELD_CALLS) == 20
    open_turns = 0
    for k in RECORD_POINTS:
        dsn = postgres_server.new_database()
        child = await spawn("crash", tmp_path / f"record-{k}", target=dsn)
        try:
            assert await child.line() == "READY"
            line = await child.wait_for(f"RECORD {k} ")
        finally:
            with trio.CancelScope(shield=True):
                await child.kill()
        assert line.split()[2] == TURN_TYPES[(k - 1) % len(TURN_TYPES)]
        stored = await load(dsn)
        check_stored(stored)
        open_turns += open_turn(stored) is not None
        await _claims_freed(dsn)
        await check_resume(dsn, stored)
    for call_id in HELD_CALLS:
        dsn = postgres_server.new_database()
        child = await spawn("crash", tmp_path / f"held-{call_id}", call_id, target=dsn)
        try:
            assert await child.line() == "READY"
            await child.wait_for(f"HELD {call_id}")
        finally:
            with trio.CancelScope(shield=True):
                await child.kill()
        stored = await load(dsn)
        check_stored(stored)
        assert open_turn(stored) is not None
        assert call_id in unanswered_calls(stored)
        open_turns += 1
        await _claims_freed(dsn)
        await check_resume(dsn, stored)
    assert open_turns >= 5, f"only {open_turns} of 20 kills left an open turn"
