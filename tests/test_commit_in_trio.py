"""A flush's own commit in trio's thread (rule L19, D355): when the store's thread is idle,
a flush commits the queue itself instead of waking the thread and waiting to be woken (two trips
through the kernel on the answer's path); it never waits there for another process's lock,
never takes a big batch, and never checkpoints the WAL, which stays the thread's.

Where a commit ran is seen by the store's `_write_batch` (which thread called it, and with
what SQLite wait), records are read back by a connection of the test's own.
"""

from __future__ import annotations

import pathlib
import sqlite3
import threading
from typing import Any

import pytest
import trio

from trio_agents import SqliteStore
from trio_agents._store._session import Session
from trio_agents._store._sqlite import CHECKPOINT_EVERY, INLINE_MAX

from .support.store_probe import message, on_disk, wait_until

pytestmark = pytest.mark.realtime


class WhereStore(SqliteStore):
    """Notes, for every commit attempt, the thread it ran in, SQLite's wait for the lock
    then, and whether it committed; and where each WAL checkpoint ran."""

    def __init__(self, path: pathlib.Path, **options: Any) -> None:
        super().__init__(path, **options)
        self.attempts: list[tuple[str, int, bool]] = []
        self.checkpoints: list[str] = []
        self.trips = 0  # the store's thread waking trio for parked flushes

    def _write_batch(self, headers: Any, batch: Any) -> None:
        where = threading.current_thread().name
        try:
            super()._write_batch(headers, batch)
        except BaseException:
            self.attempts.append((where, self._wait_ms, False))
            raise
        self.attempts.append((where, self._wait_ms, True))

    def _checkpoint(self) -> None:
        self.checkpoints.append(threading.current_thread().name)
        super()._checkpoint()

    def _wake_if_waited(self) -> None:
        sent = self._wake_sent
        super()._wake_if_waited()
        self.trips += self._wake_sent and not sent


TRIO = threading.main_thread().name


async def thread_asleep(store: SqliteStore) -> None:
    """Wait until the store's thread sleeps: it lends only then (just after a call it may
    still be on its way to sleep, and the commit then goes to it, which is also correct)."""
    thread = store._thread  # pyright: ignore[reportPrivateUsage]
    assert thread is not None
    await wait_until(lambda: thread._sleeping, "the store's thread to sleep")  # pyright: ignore[reportPrivateUsage]


async def test_a_flush_with_the_thread_idle_commits_in_trio_with_no_trip(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "here.sqlite3"
    store = WhereStore(path)
    async with store.running():
        one, two = Session("one"), Session("two")
        store.enter(one)
        store.enter(two)
        for index in range(3):
            message(one, index)
            message(two, index)
        await thread_asleep(store)
        await store.flush(one)
        # At once on disk, both sessions' records in the one commit, no wait for the lock
        # (another process's lock would be the thread's to wait for), no trip.
        assert on_disk(path) == {"one": 3, "two": 3}
        assert store.attempts == [(TRIO, 0, True)]
        assert store.trips == 0
        await store.flush(two)  # already committed: nothing to do
        assert len(store.attempts) == 1


async def test_a_lock_held_elsewhere_sends_the_commit_to_the_thread(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "locked.sqlite3"
    store = WhereStore(path)
    done: list[dict[str, int]] = []
    async with store.running():
        session = Session("s")
        store.enter(session)
        await store.flush(session)
        holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        holder.execute("BEGIN IMMEDIATE")  # as another process's long transaction would
        for index in range(4):
            message(session, index)
        await thread_asleep(store)

        async def flusher() -> None:
            await store.flush(session)
            done.append(on_disk(path))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(flusher)
            await wait_until(
                lambda: sum(1 for where, _, _ in store.attempts if where != TRIO) >= 2,
                "two refused attempts in the store's thread",
            )
            assert done == []
            holder.rollback()
            holder.close()
    # Trio tried once, without waiting for the lock; the thread waited and retried, and
    # committed once the lock was free.
    assert store.attempts[0] == (TRIO, 0, False)
    later = store.attempts[1:]
    assert all(where != TRIO and wait > 0 for where, wait, _ in later)
    assert [ok for _, _, ok in later][-1] is True
    assert done == [{"s": 4}]


async def test_a_big_batch_is_committed_by_the_thread(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "big.sqlite3"
    store = WhereStore(path)
    async with store.running():
        session = Session("s")
        store.enter(session)
        for index in range(INLINE_MAX + 1):
            message(session, index)
        await store.flush(session)
        assert on_disk(path) == {"s": INLINE_MAX + 1}
        assert [where for where, _, _ in store.attempts] == [f"trio-agents store {path.name}"]
        assert store.trips == 1


async def test_the_wal_is_checkpointed_by_the_thread_not_by_a_commit(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "wal.sqlite3"
    store = WhereStore(path)
    async with store.running():
        assert store._conn is not None  # pyright: ignore[reportPrivateUsage]
        autocheckpoint = store._conn.execute("PRAGMA wal_autocheckpoint").fetchone()  # pyright: ignore[reportPrivateUsage]
        assert autocheckpoint == (0,)  # SQLite's own would run in whoever commits
        session = Session("s")
        store.enter(session)
        for index in range(CHECKPOINT_EVERY):
            message(session, index)
            await thread_asleep(store)
            await store.flush(session)
        assert all(where == TRIO for where, _, _ in store.attempts)
        await wait_until(lambda: bool(store.checkpoints), "the thread's checkpoint")
        assert store.checkpoints == [f"trio-agents store {path.name}"]
    assert on_disk(path) == {"s": CHECKPOINT_EVERY}


async def test_the_thread_lends_unless_it_runs_something(tmp_path: pathlib.Path) -> None:
    """D366: not only a sleeping thread lends. One awake with nothing to run (a linger that
    timed out, on its way back to sleep) sees the loan before it runs anything; only a
    thread running a call or a commit step refuses."""
    store = WhereStore(tmp_path / "lend.sqlite3")
    async with store.running():
        await thread_asleep(store)
        thread = store._thread  # pyright: ignore[reportPrivateUsage]
        assert thread is not None
        with thread.lock:  # the thread cannot move meanwhile
            # The instant after its wait returned, before it looks at its queue again.
            thread._sleeping = False  # pyright: ignore[reportPrivateUsage]
            try:
                lent = thread.lend()
            finally:
                thread._sleeping = True  # pyright: ignore[reportPrivateUsage]
            if lent:
                thread.give_back(settled=True)
        assert lent
        entered, go_on = threading.Event(), threading.Event()

        def blocking_call() -> None:
            entered.set()
            go_on.wait()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(thread.call, blocking_call)
            await trio.to_thread.run_sync(entered.wait)
            assert not thread.lend()  # running a call: the connection is the thread's
            session = Session("s")
            store.enter(session)
            message(session, 0)
            nursery.start_soon(store.flush, session)
            await wait_until(lambda: bool(store._waiters), "the flush to park")  # pyright: ignore[reportPrivateUsage]
            go_on.set()
    # The flush found the thread working: the thread committed it.
    assert [where != TRIO for where, _, _ in store.attempts] == [True]
