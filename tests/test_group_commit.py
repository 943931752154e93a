"""Group commit in SqliteStore (issue 20): one thread per store commits every session's
queued records in one transaction, wakes trio only for the flushes a commit completes, fails
exactly the flushes still waiting when a commit fails, and is joined on every way out of
`running()`.

Transactions are counted by SQLite itself (a trace callback on the store's connection sees
every COMMIT it runs), records are read back by a connection of the test's own, and the
thread is found among the process's threads by its name.
"""

from __future__ import annotations

import contextlib
import pathlib
import signal
import sqlite3
import subprocess
import sys
import threading
from typing import Any

import pytest
import trio

from trio_agents import SqliteStore, StoreBrokenError
from trio_agents._store._session import Session

from .support.store_probe import message, on_disk, wait_until

pytestmark = pytest.mark.realtime


class TracedStore(SqliteStore):
    """Counts the COMMITs SQLite runs on the store's connection, and the trips the store's
    thread makes to trio to wake parked flushes."""

    def __init__(self, path: pathlib.Path, **options: Any) -> None:
        super().__init__(path, **options)
        self.statements: list[str] = []
        self.wakes = 0
        # These tests are of the thread's commits; a flush's own commit in trio's thread,
        # when the thread is idle, has its tests in test_commit_in_trio.py.
        self._commit_in_trio = False

    def _connect(self) -> sqlite3.Connection:
        conn = super()._connect()
        conn.set_trace_callback(self.statements.append)
        return conn

    def transactions(self) -> int:
        return sum(1 for statement in self.statements if statement == "COMMIT")

    def _wake_waiters(self, *, everyone: bool = False) -> None:
        self.wakes += 1
        super()._wake_waiters(everyone=everyone)


def store_threads(path: pathlib.Path) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"trio-agents store {path.name}"]


async def test_every_sessions_queued_records_share_one_transaction(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "many.sqlite3"
    store = TracedStore(path)
    async with store.running():
        sessions = [Session(f"s{index}") for index in range(100)]
        for session in sessions:
            store.enter(session)
            for index in range(2):  # 200 records: under the batch cap, which would commit
                message(session, index)
        before = store.transactions()
        await store.flush(sessions[0])  # one session asks; every session's records go
        assert store.transactions() == before + 1
        assert on_disk(path) == {session.id: 2 for session in sessions}
        for session in sessions[1:]:
            await store.flush(session)  # already committed: no transaction, no wait
        assert store.transactions() == before + 1
        assert len(store_threads(path)) == 1


async def test_a_flush_returns_only_once_its_records_are_on_disk(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "wait.sqlite3"
    store = TracedStore(path)
    seen: list[dict[str, int]] = []
    async with store.running():
        session = Session("s")
        store.enter(session)
        await store.flush(session)
        holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock: no commit can land
        for index in range(5):
            message(session, index)

        async def flusher() -> None:
            await store.flush(session)
            seen.append(on_disk(path))  # at once, before anything else can commit

        async with trio.open_nursery() as nursery:
            nursery.start_soon(flusher)
            retries = store._busy_retries  # pyright: ignore[reportPrivateUsage]
            await wait_until(
                lambda: store._busy_retries >= retries + 3,  # pyright: ignore[reportPrivateUsage]
                "three refused commits",
            )
            assert seen == []
            holder.rollback()
            holder.close()
    assert seen == [{"s": 5}]


async def test_only_a_commit_someone_waits_for_wakes_trio(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "wakes.sqlite3"
    store = TracedStore(path)
    async with store.running():
        quiet, waited = Session("quiet"), Session("waited")
        store.enter(quiet)
        store.enter(waited)
        quiet.append("turn/start", {"turn": 1})  # a trigger: committed, nobody waiting
        await wait_until(lambda: on_disk(path).get("quiet") == 1, "the trigger's commit")
        assert store.wakes == 0
        message(waited, 0)
        await store.flush(waited)
        assert store.wakes == 1
        await store.flush(waited)  # nothing left to commit: no wait, no wake
        assert store.wakes == 1


async def test_a_commit_that_completes_no_waiting_flush_does_not_wake_trio(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "unsatisfied.sqlite3"
    store = GatedStore(path)
    async with store.running():
        first, second = Session("first"), Session("second")
        store.enter(first)
        store.enter(second)
        await store.flush(first)  # the header rows
        store.gate.clear()
        wakes = store.wakes
        first.append("turn/start", {"turn": 1})
        await wait_until(store.entered.is_set, "a commit of first's record to begin")
        message(second, 0)  # after that commit took its batch: it is not in it

        async def flush_second() -> None:
            await store.flush(second)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(flush_second)
            await wait_until(lambda: len(store._waiters) == 1, "the flush to park")  # pyright: ignore[reportPrivateUsage]
            store.gate.set()
        # The commit of first's record completed nobody's flush; the next one did.
        assert store.wakes == wakes + 1
        assert on_disk(path) == {"first": 1, "second": 1}


class GatedStore(TracedStore):
    """Its thread's commits wait at `gate` (open unless cleared), saying when one began."""

    def __init__(self, path: pathlib.Path) -> None:
        super().__init__(path)
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()

    def _write_batch(self, headers: Any, batch: Any) -> None:
        if not self.gate.is_set():
            self.entered.set()
            self.gate.wait(20)
        super()._write_batch(headers, batch)


async def test_a_failed_commit_fails_exactly_the_flushes_still_waiting(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "fail.sqlite3"
    store = TracedStore(path)
    outcomes: dict[str, BaseException | None] = {}
    done = Session("done")

    async def flush(session: Session) -> None:
        try:
            await store.flush(session)
            outcomes[session.id] = None
        except StoreBrokenError as exc:
            outcomes[session.id] = exc

    async def run() -> None:
        async with store.running():
            b, c = Session("b"), Session("c")
            for session in (done, b, c):
                store.enter(session)
            message(done, 0)
            await store.flush(done)
            # Another writer of the file took b's first place: the batch that carries b's
            # record (and c's, queued with it) cannot commit.
            other = sqlite3.connect(path)
            other.execute("INSERT INTO records VALUES ('b', 0, 'context/message', '{}')")
            other.commit()
            other.close()
            message(b, 0)
            message(c, 0)
            async with trio.open_nursery() as nursery:
                for session in (b, c, done):
                    nursery.start_soon(flush, session)

    with pytest.raises(sqlite3.IntegrityError) as leaving:
        await run()
    assert outcomes["done"] is None  # committed before: it still is, and says so
    for sid in ("b", "c"):
        error = outcomes[sid]
        assert isinstance(error, StoreBrokenError), outcomes
        assert error.__cause__ is leaving.value
        assert "UNIQUE constraint failed" in str(error)
    assert on_disk(path) == {"done": 1, "b": 1}  # the other writer's row; nothing torn
    assert store_threads(path) == []


async def test_the_thread_is_joined_when_the_block_is_cancelled(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "cancel.sqlite3"
    store = SqliteStore(path, close_grace=0.2)
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    threads: list[threading.Thread] = []
    with trio.CancelScope() as scope:
        async with store.running():
            session = Session("s")
            store.enter(session)
            message(session, 0)
            holder.execute("BEGIN IMMEDIATE")
            threads.extend(store_threads(path))
            assert len(threads) == 1
            scope.cancel()
            await store.flush(session)  # parked on the held lock, then cancelled
    holder.rollback()
    holder.close()
    assert scope.cancelled_caught
    assert not threads[0].is_alive()
    assert store_threads(path) == []


async def test_the_thread_is_joined_when_the_block_raises(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "raise.sqlite3"
    store = SqliteStore(path)
    threads: list[threading.Thread] = []

    async def run() -> None:
        async with store.running():
            session = Session("s")
            store.enter(session)
            message(session, 0)
            threads.extend(store_threads(path))
            _ = 1 / 0

    with pytest.raises(ZeroDivisionError):
        await run()
    assert not threads[0].is_alive()
    assert on_disk(path) == {"s": 1}  # leaving still committed what was queued


def test_no_trio_thread_pool_call_per_commit(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(*args: object, **kwargs: object) -> object:
        raise AssertionError("a commit went through trio.to_thread")

    async def main() -> None:
        store = SqliteStore(tmp_path / "pool.sqlite3")
        async with store.running():
            session = Session("s")
            store.enter(session)
            for turn in range(1, 20):
                session.append("turn/start", {"turn": turn})
                await store.flush(session)

    monkeypatch.setattr(trio.to_thread, "run_sync", refused)
    trio.run(main)
    assert on_disk(tmp_path / "pool.sqlite3") == {"s": 19}


SIGNALLED = """
import faulthandler, signal, sys, threading, trio
faulthandler.register(signal.SIGUSR1, all_threads=True)  # where it hangs, should it
# An ignored SIGINT is inherited across exec, and Python then keeps it ignored (so trio
# installs no handler): run from a shell's background job (`cmd &`), it would hang here.
signal.signal(signal.SIGINT, signal.default_int_handler)
from trio_agents import SqliteStore
from trio_agents._store._session import Session

async def main(path):
    store = SqliteStore(path)
    async with store.running():
        session = Session("s")
        store.enter(session)
        session.append("context/message", {"id": "m", "content": "c"})
        print("ready", flush=True)
        await trio.sleep_forever()

try:
    trio.run(main, sys.argv[1])
except KeyboardInterrupt:
    print("threads", sorted(t.name for t in threading.enumerate()), flush=True)
"""


@pytest.mark.subprocess
def test_the_thread_is_joined_when_a_signal_stops_the_process(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "signal.sqlite3"
    with subprocess.Popen(
        [sys.executable, "-c", SIGNALLED, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == "ready\n"
            child.send_signal(signal.SIGINT)
            out, _ = child.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGUSR1)  # its threads' stacks, on its stderr
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.communicate(timeout=5)  # a hung process does not exit: read meanwhile
            child.kill()
            _, stacks = child.communicate()  # what the first call read, and the rest
            pytest.fail(f"the process did not exit within 30 s of SIGINT:\n{stacks}")
        finally:
            child.kill()
            child.wait()
    assert out == "threads ['MainThread']\n"
    assert on_disk(path) == {"s": 1}
