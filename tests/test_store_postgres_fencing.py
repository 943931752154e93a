"""Fenced PostgreSQL claims (design D490-D492): a claim whose connection is cut while its
owner lives, and a server restart under a running runtime, on a real server.

- The claims connection of a runtime is terminated from an admin connection while one of
  its agents is mid-turn, and another store resumes that session before the owner can
  connect again. The owner's write of the session is refused by the fencing token: that
  agent alone closes with one SessionClaimLostError, the owner's other session goes on,
  and the database holds every record the owner acknowledged, then the taker's, with
  nothing the owner wrote after losing the claim.
- The server is stopped (immediate: every connection cut) and started again: the runtime
  connects again, takes its claims again, and both its sessions go on.

Waiting is on events and agent states; only the claims taken again after the restart
(a separate server process) are polled, with a bound.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, Final

import psycopg
import pytest
import trio
import trio.testing
from psycopg import sql

from trio_agents import (
    PostgresStore,
    SessionClaimLostError,
    SessionLiveElsewhereError,
    open_runtime,
)
from trio_agents.testing import ScriptedModel, reply

from .support.postgres import PgServer, start_server

pytestmark = pytest.mark.realtime

# The claims are taken again this soon after the server accepts connections (backoff: at
# most 2 s between attempts); the bound leaves room for a loaded machine.
RETAKEN_WITHIN: Final = 30.0


def _dbname(dsn: str) -> str:
    return dsn.split("@/", 1)[1].split("?", 1)[0]


def _records(dsn: str, session_id: str) -> list[tuple[str, dict[str, Any]]]:
    import json

    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT seq, type, data FROM trio_agents_records WHERE session_id = %s ORDER BY seq",
            (session_id,),
        ).fetchall()
    assert [seq for seq, _, _ in rows] == list(range(len(rows)))
    return [(str(kind), json.loads(data)) for _, kind, data in rows]


def _texts(records: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [str(data.get("content")) for kind, data in records if kind == "assistant/message"]


def _claim_holders(admin: psycopg.Connection[Any], dbname: str) -> list[int]:
    rows = admin.execute(
        "SELECT DISTINCT pid FROM pg_locks JOIN pg_database d ON d.oid = pg_locks.database "
        "WHERE locktype = 'advisory' AND granted AND d.datname = %s",
        (dbname,),
    ).fetchall()
    return [int(row[0]) for row in rows]


async def _held(model: ScriptedModel) -> None:
    while model.held == 0:
        await trio.testing.wait_all_tasks_blocked()


async def test_a_cut_claim_taken_elsewhere_ends_that_session_alone_and_loses_no_record(
    postgres_server: PgServer,
) -> None:
    dsn = postgres_server.new_database()
    admin = psycopg.connect(postgres_server.dsn(), autocommit=True)
    model = ScriptedModel([reply("one"), reply("stale", hold=True)])
    async with open_runtime(store=dsn) as owner, open_runtime(store=dsn) as taker:
        s1 = await owner.agents.create(model=model, session_id="s1")
        s2 = await owner.agents.create(model=ScriptedModel(), session_id="s2")
        s1.agent.send("first")
        await s1.agent.wait_idle()  # acknowledged: every record so far is durable (L7)
        acknowledged = len(s1.agent.session)
        s1.agent.send("second")
        await _held(model)

        # Nobody may connect to the database now, so the owner cannot take its claim again
        # before the taker has taken the session; the taker is connected already.
        allow = sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS {}")
        admin.execute(allow.format(sql.Identifier(_dbname(dsn)), sql.SQL("false")))
        holders = _claim_holders(admin, _dbname(dsn))
        assert len(holders) == 1  # the owner's claims connection, holding s1 and s2
        row = admin.execute("SELECT pg_terminate_backend(%s, 10000)", holders).fetchone()
        assert row == (True,)
        resumed = await taker.agents.resume("s1", model=ScriptedModel())
        admin.execute(allow.format(sql.Identifier(_dbname(dsn)), sql.SQL("true")))

        # The owner's turn goes on and reaches the store: refused, its agent alone closes.
        model.release()
        await s1.agent.wait_idle()
        with pytest.raises(ExceptionGroup) as caught:
            await s1.aclose()
        errors = caught.value.exceptions
        assert len(errors) == 1, errors
        assert isinstance(errors[0], SessionClaimLostError)
        message = str(errors[0])
        assert "'s1'" in message
        assert "taken by another connection" in message
        assert "\n" not in message

        # The taker resumes; the owner's other session goes on.
        resumed.agent.send("third")
        await resumed.agent.wait_idle()
        s2.agent.send("hello")
        await s2.agent.wait_idle()
        await resumed.aclose()
        await s2.aclose()
    admin.close()

    stored = await trio.to_thread.run_sync(_records, dsn, "s1")
    own = list(s1.agent.session.records)[:acknowledged]
    assert [(kind, data) for kind, data in stored[:acknowledged]] == [
        (r.type, dict(r.data)) for r in own
    ]
    assert "stale" not in " ".join(_texts(stored))  # the owner's write after the loss
    assert _texts(stored) == ["one", "echo: third"]
    ends = [data["reason"]["kind"] for kind, data in stored if kind == "turn/end"]
    assert ends == ["completed", "interrupted", "completed"]
    assert _texts(await trio.to_thread.run_sync(_records, dsn, "s2")) == ["echo: hello"]


@pytest.fixture
def own_server() -> Iterator[PgServer]:
    """A server of this test's own, since it is restarted under the test."""
    server = start_server()
    try:
        yield server
    finally:
        server.stop()


def _advisory_locks(admin: psycopg.Connection[Any], dbname: str) -> int:
    row = admin.execute(
        "SELECT count(*) FROM pg_locks JOIN pg_database d ON d.oid = pg_locks.database "
        "WHERE locktype = 'advisory' AND granted AND d.datname = %s",
        (dbname,),
    ).fetchone()
    assert row is not None
    return int(row[0])


async def test_after_a_server_restart_the_runtime_reconnects_and_its_sessions_go_on(
    own_server: PgServer,
) -> None:
    dsn = own_server.new_database()
    store = PostgresStore(dsn)
    async with open_runtime(store=store) as rt:
        handles = [
            await rt.agents.create(model=ScriptedModel(), session_id=sid) for sid in ("s1", "s2")
        ]
        for handle in handles:
            handle.agent.send("before")
            await handle.agent.wait_idle()
        started = time.monotonic()
        await trio.to_thread.run_sync(own_server.restart)
        for handle in handles:  # the writer connects again and commits the turn
            handle.agent.send("after")
            await handle.agent.wait_idle()
        print(f"turns committed {time.monotonic() - started:.2f} s after the restart began")

        admin = psycopg.connect(own_server.dsn(), autocommit=True)
        with trio.fail_after(RETAKEN_WITHIN):
            # The store's own reconnect, against a real server process: nothing to wait on.
            while _advisory_locks(admin, _dbname(dsn)) < 2:  # noqa: ASYNC110
                await trio.sleep(0.05)
        admin.close()
        other = PostgresStore(dsn)
        async with other.running():
            with pytest.raises(SessionLiveElsewhereError):
                await other.restore("s1")
        for handle in handles:
            await handle.aclose()
    for sid in ("s1", "s2"):
        texts = _texts(await trio.to_thread.run_sync(_records, dsn, sid))
        assert texts == ["echo: before", "echo: after"]
