"""One store contract, run against MemoryStore, SqliteStore and PostgresStore (rules L3,
L6, L12, L13-L14): the same tests, parametrised by `store_factory`.

`store_factory()` opens another store object on the same backing (the same SQLite file, the
same database); for MemoryStore it is the same object, since nothing else can share it.
Tests that need two stores sharing a backing take `shared_factory`, which has no memory case.
The PostgreSQL cases run against a real server the fixtures start (tests/support/postgres.py).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import psycopg
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from agent_conformance._history import history_problems
from agent_conformance._lifecycle_machine import LifecycleMachine
from agent_conformance._machine import machine_for
from trio_agents import (
    CorruptSessionError,
    MemoryStore,
    PostgresStore,
    ReadOnlyStoreError,
    Session,
    SessionLiveElsewhereError,
    SessionLiveError,
    SessionNotFoundError,
    SessionStore,
    SqliteStore,
    StoreClosedError,
    StoredSession,
    UnknownStoreVersionError,
    open_runtime,
)
from trio_agents.testing import ScriptedModel, TrioHost, WallClock

from .support.postgres import PgServer, user_tables

StoreFactory = Callable[[], SessionStore]

pytestmark = pytest.mark.realtime


def _factory(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    if kind == "memory":
        store = MemoryStore()
        return lambda: store
    if kind == "sqlite":
        return lambda: SqliteStore(tmp_path / "sessions.sqlite3")
    dsn: str = request.getfixturevalue("postgres_dsn")
    return lambda: PostgresStore(dsn)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    return _factory(request.param, request, tmp_path)


@pytest.fixture(params=["sqlite", "postgres"])
def shared_factory(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    return _factory(request.param, request, tmp_path)


def _open_turn(session: Session) -> None:
    """A turn a crash left open: started, prompted, a step begun, a tool called."""
    session.append("turn/start", {"turn": 1})
    session.append("user/message", {"id": "m1", "content": "left open"})
    session.append("step/start", {"turn": 1, "step": 1})
    session.append(
        "assistant/message",
        {"content": "", "tool_calls": [{"id": "c1", "name": "t", "arguments": {}}]},
    )
    session.append("tool/call", {"call_id": "c1", "name": "t", "arguments": {}})


async def test_turns_survive_a_reopen_and_are_listed(store_factory: StoreFactory) -> None:
    async with open_runtime(store_factory()) as rt:
        handle = await rt.agents.create(model=ScriptedModel(), session_id="s1", meta={"cwd": "/w"})
        for prompt in ("first prompt", "second"):
            handle.agent.send(prompt)
            await handle.agent.wait_idle()
        written = handle.agent.session.records
        await handle.aclose()
        closed = rt.sessions.get("s1")
    assert closed is None
    store = store_factory()
    async with store.running():
        stored = await store.load("s1")
        [info] = await store.list_sessions()
        assert await store.exists("s1")
        assert not await store.exists("nope")
        with pytest.raises(SessionNotFoundError, match="nope"):
            await store.load("nope")
    assert stored.records[: len(written)] == written
    assert history_problems(stored.records, allow_open_turn=False) == []
    assert stored.header["cwd"] == "/w"
    assert (info.id, info.turns, info.last_end, info.title, info.cwd) == (
        "s1", 2, "completed", "first prompt", "/w",
    )  # fmt: skip
    assert info.updated_at >= info.created_at > 0


async def test_resume_repairs_an_open_turn_once_and_durably(store_factory: StoreFactory) -> None:
    store = store_factory()
    async with store.running():
        session = Session("s1", {"version": 1, "created_at": 1.0})
        detach = store.enter(session)
        _open_turn(session)
        await store.flush(session)
        detach()  # the process died: nobody closed the turn
        # Two resumes at once append the closers once (rule L6).
        results: list[int] = []

        async def restore() -> None:
            results.append(len((await store.restore("s1")).records))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(restore)
            nursery.start_soon(restore)
    assert results == [8, 8]
    store = store_factory()
    async with store.running():
        records = (await store.load("s1")).records
    assert [r.type for r in records[5:]] == ["tool/result", "step/end", "turn/end"]
    assert records[5].data["interrupted"] is True
    assert dict(records[-1].data) == {"turn": 1, "reason": {"kind": "interrupted"}}
    assert history_problems(records, allow_open_turn=False) == []


async def test_a_live_id_cannot_enter_again_until_detached(store_factory: StoreFactory) -> None:
    store = store_factory()
    async with store.running():
        first = Session("s1")
        detach = store.enter(first)
        with pytest.raises(SessionLiveError, match="'s1'"):
            store.enter(Session("s1"))
        detach()
        detach()  # idempotent
        again = store.enter(Session("s1"))
        again()


async def test_a_persisted_empty_session_is_listed_and_resumable(
    store_factory: StoreFactory,
) -> None:
    async with open_runtime(store_factory()) as rt:
        handle = await rt.agents.create(model=ScriptedModel(), session_id="empty")
        await rt.sessions.persist(handle.agent.session)
        await handle.aclose()
    async with open_runtime(store_factory()) as rt:
        [info] = await rt.sessions.list_sessions()
        assert (info.id, info.records, info.title) == ("empty", 0, None)
        handle = await rt.agents.resume("empty", model=ScriptedModel())
        handle.agent.send("now")
        await handle.agent.wait_idle()
        await handle.aclose()
        assert (await rt.sessions.load("empty")).records[-1].type == "turn/end"


async def test_flushed_records_are_visible_to_another_store_at_once(
    shared_factory: StoreFactory,
) -> None:
    writer, reader = shared_factory(), shared_factory()
    async with writer.running(), reader.running():
        session = Session("s1", {"created_at": 2.0})
        detach = writer.enter(session)
        session.append("turn/start", {"turn": 1})
        session.append("user/message", {"id": "m1", "content": "hi"})
        await writer.flush(session)
        assert (await reader.load("s1")).records == session.records
        detach()


async def test_a_session_live_in_one_store_is_refused_by_another(
    shared_factory: StoreFactory,
) -> None:
    one, other = shared_factory(), shared_factory()
    async with one.running(), other.running():
        session = Session("s1")
        detach = one.enter(session)
        session.append("turn/start", {"turn": 1})
        await one.flush(session)
        with pytest.raises(SessionLiveElsewhereError, match="'s1'"):
            other.enter(Session("s1"))
        with pytest.raises(SessionLiveElsewhereError, match="'s1'"):
            await other.restore("s1")
        detach()
        # Released: now the other store has it, and the first is refused.
        stored = await other.restore("s1")
        detach_other = other.enter(Session("s1", stored.header, stored.records))
        with pytest.raises(SessionLiveElsewhereError):
            one.enter(Session("s1"))
        detach_other()


async def test_a_deleted_session_is_gone_and_its_id_free(store_factory: StoreFactory) -> None:
    async with open_runtime(store_factory()) as rt:
        for sid in ("kept", "gone"):
            handle = await rt.agents.create(model=ScriptedModel(), session_id=sid)
            handle.agent.send(f"prompt of {sid}")
            await handle.agent.wait_idle()
            await handle.aclose()
        assert await rt.sessions.delete("gone") is True
        # Deleting what is not stored is no error: the outcome is the one asked for.
        assert await rt.sessions.delete("gone") is False
        assert await rt.sessions.delete("never") is False
    store = store_factory()
    async with store.running():
        assert [info.id for info in await store.list_sessions()] == ["kept"]
        assert not await store.exists("gone")
        with pytest.raises(SessionNotFoundError, match="'gone'"):
            await store.restore("gone")
        assert len((await store.load("kept")).records) > 0
        # The id is free: a new session of that id starts from nothing.
        session = Session("gone", {"created_at": 3.0})
        detach = store.enter(session)
        session.append("turn/start", {"turn": 1})
        await store.flush(session)
        assert (await store.load("gone")).records == session.records
        with pytest.raises(SessionLiveError, match="'gone' is live in this store; close"):
            await store.delete("gone")
        detach()


async def test_a_session_live_in_another_store_is_not_deleted(
    shared_factory: StoreFactory,
) -> None:
    one, other = shared_factory(), shared_factory()
    async with one.running(), other.running():
        session = Session("s1")
        detach = one.enter(session)
        session.append("turn/start", {"turn": 1})
        await one.flush(session)
        with pytest.raises(SessionLiveElsewhereError, match="'s1'"):
            await other.delete("s1")
        assert (await other.load("s1")).records == session.records
        detach()
        assert await other.delete("s1") is True
        assert not await one.exists("s1")


async def test_a_store_not_running_refuses_sessions(shared_factory: StoreFactory) -> None:
    store = shared_factory()
    with pytest.raises(StoreClosedError, match="not running"):
        store.enter(Session("s1"))
    async with store.running():
        pass
    with pytest.raises(StoreClosedError, match="not running"):
        await store.list_sessions()


async def test_a_damaged_session_is_listed_with_its_damage(shared_factory: StoreFactory) -> None:
    store = shared_factory()
    async with store.running():
        session = Session("s1", {"created_at": 1.0})
        detach = store.enter(session)
        session.append("turn/start", {"turn": 1})
        await store.flush(session)
        detach()
    await _damage(store)
    store = shared_factory()
    async with store.running():
        [info] = await store.list_sessions()
        with pytest.raises(CorruptSessionError, match="record 0"):
            await store.load("s1")
    assert info.damage is not None
    assert "record 0" in info.damage
    assert info.records == 1


async def _damage(store: SessionStore) -> None:
    """Overwrite record 0 of session s1 with text that is not JSON, behind the store."""
    if isinstance(store, SqliteStore):
        conn = sqlite3.connect(store.path)
        with conn:
            conn.execute("UPDATE records SET data = '{not json' WHERE session_id = 's1'")
        conn.close()
        return
    assert isinstance(store, PostgresStore)

    def damage() -> None:
        with psycopg.connect(store.dsn, autocommit=True) as conn:
            conn.execute("UPDATE trio_agents_records SET data = '{not json' WHERE seq = 0")

    await trio.to_thread.run_sync(damage)


class _ReadableWhenClosed(PostgresStore):
    """The machine reads closed sessions back after its runtime (and so the store) closed,
    as it can from its in-memory store: here through a reader opened for the read."""

    async def load(self, session_id: str) -> StoredSession:
        if self.live_ids or self._conn is not None:  # pyright: ignore[reportPrivateUsage]
            return await super().load(session_id)
        reader = PostgresStore(self.dsn)
        async with reader.running():
            return await reader.load(session_id)


class PostgresLifecycle(LifecycleMachine):
    """The lifecycle machine (rules L1-L5, F1-F3) over a PostgresStore: a new database per
    example, on the real clock (the store works in threads), settled by flushing every live
    session as the durable machine does (wait_all_tasks_blocked does not wait for threads)."""

    server: ClassVar[PgServer | None] = None  # set by the test before the run

    @staticmethod
    def _new_host() -> TrioHost:
        return TrioHost(WallClock(), call_timeout=30.0, stall_timeout=30.0)

    def _make_store(self) -> SessionStore:
        server = type(self).server
        assert server is not None
        return _ReadableWhenClosed(server.new_database())

    def settle(self) -> None:
        self.host.call(self._quiesce)

    def _stop_service(self) -> None:
        # The runtime's close ends with the store's, in worker threads: wait for the block
        # to have been left, not only for every task to be blocked.
        assert self._stop is not None
        self.host.run_sync(self._stop.set)
        self.host.call(self._stopped.wait)
        self.settle()

    async def _quiesce(self) -> None:
        await trio.testing.wait_all_tasks_blocked()
        for sid in sorted(self.store.live_ids):
            session = self.store.get(sid)
            if session is not None:
                await self.store.flush(session)
        await trio.testing.wait_all_tasks_blocked()


def test_the_lifecycle_machine_passes_over_postgres(postgres_server: PgServer) -> None:
    machine = machine_for(PostgresLifecycle, None)
    machine.server = postgres_server
    budget = settings(
        max_examples=8,
        stateful_step_count=15,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    run_state_machine_as_test(machine, settings=budget)
    assert machine.stats["examples"] >= 8


async def test_stores_opening_a_new_database_at_once_create_the_schema_once(
    postgres_dsn: str,
) -> None:
    stores = [PostgresStore(postgres_dsn) for _ in range(4)]
    async with trio.open_nursery() as nursery:
        for store in stores:

            async def run(store: PostgresStore = store) -> None:
                async with store.running():
                    assert await store.list_sessions() == []

            nursery.start_soon(run)

    def versions() -> list[tuple[int]]:
        with psycopg.connect(postgres_dsn) as conn:
            return conn.execute("SELECT version FROM trio_agents_schema").fetchall()

    assert await trio.to_thread.run_sync(versions) == [(1,), (2,)]


async def test_a_database_of_a_newer_format_is_refused(postgres_dsn: str) -> None:
    def newer() -> None:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE trio_agents_schema (version INTEGER NOT NULL)")
            conn.execute("INSERT INTO trio_agents_schema VALUES (1), (99)")

    await trio.to_thread.run_sync(newer)
    for readonly in (False, True):
        with pytest.raises(UnknownStoreVersionError, match=r"format 99.*reads format 2"):
            async with PostgresStore(postgres_dsn, readonly=readonly).running():
                pass  # pragma: no cover - never entered


async def test_a_read_only_store_creates_nothing_and_reads_a_bare_database_as_empty(
    postgres_dsn: str,
) -> None:
    reader = PostgresStore(postgres_dsn, readonly=True)
    async with reader.running():
        assert await reader.list_sessions() == []
        assert not await reader.exists("s1")
        with pytest.raises(SessionNotFoundError):
            await reader.load("s1")
        with pytest.raises(ReadOnlyStoreError, match="read-only"):
            reader.enter(Session("s1"))
        assert await trio.to_thread.run_sync(user_tables, postgres_dsn) == []
        # A writer creates the tables while the reader runs: the reader sees its session.
        writer = PostgresStore(postgres_dsn)
        async with writer.running():
            session = Session("s1")
            detach = writer.enter(session)
            _open_turn(session)
            await writer.flush(session)
            detach()
        assert [info.id for info in await reader.list_sessions()] == ["s1"]
        assert len((await reader.load("s1")).records) == 5
        # Resuming would append the open turn's closers: refused, and nothing is appended.
        with pytest.raises(ReadOnlyStoreError, match="cannot be restored"):
            await reader.restore("s1")
        assert len((await reader.load("s1")).records) == 5
    assert await trio.to_thread.run_sync(user_tables, postgres_dsn) == [
        "trio_agents_records",
        "trio_agents_schema",
        "trio_agents_sessions",
    ]
