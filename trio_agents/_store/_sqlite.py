"""The default session store: one SQLite file, WAL mode, written behind by a single writer.

Appends happen synchronously in the agent's task and only queue the record. A batch is
committed when a turn starts, a step ends or a turn ends, when a prompt is queued or dropped,
when someone flushes (the agent does before its tools start and before it goes idle), or when
the queue grows past a cap. A batch takes every record queued by then, of every session
(group commit), and is one transaction, so a crash never leaves a torn record; it can leave
the last turn open, which `restore` repairs. The store's one thread (`_store/_thread`) commits
the batches nobody waits for, and wakes only the flushes a commit completes. A flush that
finds the thread idle and a small batch commits it in trio's own thread (D355): a WAL commit
under `synchronous=NORMAL` is a write to the page cache, and it waits for no lock there (a
lock held elsewhere sends the batch to the thread). The fsyncs, which WAL checkpoints make,
stay in the thread.

Under pressure: another process may hold the file's write lock (a long transaction in
another client). SQLite's own wait is kept short, and the writer retries a busy batch with
backoff (in its thread) for as long as the store runs; the records stay queued meanwhile,
and a later batch includes those appended since. `flush` returns only once its records are
committed, so its caller's deadline (an agent's `close_grace`) bounds the wait. Closing the
store waits for the queue for `close_grace` seconds, then raises StoreLockedError naming
what was not stored. A
full disk, a read-only file or an I/O error is not retried: the writer fails with a
StoreFileError that names the file and the cause.

Durability: WAL with `synchronous=NORMAL` survives the process being killed at any point (a
committed transaction is in the WAL file before `commit` returns); it may lose the last
transactions on a power failure, which is the usual trade for an interactive tool.
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from pathlib import Path
from typing import Any, Final

import trio

from .._errors import (
    AlreadyRunningError,
    ReadOnlyStoreError,
    StoreBrokenError,
    StoreClosedError,
    StoreLockedError,
)
from ._base import SessionInfo, SessionStore, StoredSession
from ._claims import claim, release
from ._errors import file_error, is_file_error
from ._records import PROMPT_DROPPED, PROMPT_QUEUED, STEP_END, TURN_END, TURN_START, Record
from ._session import Session
from ._sqlite_open import BUSY_TIMEOUT, open_read_only, open_writable
from ._sqlite_rows import (
    append_records,
    delete_session,
    list_rows,
    read_session,
    write_batch,
)
from ._thread import StoreThread

__all__ = ["SqliteStore", "default_store_path"]

# A queued or dropped prompt may wait behind a long tool: its record must not wait with it.
COMMIT_TRIGGERS: Final = frozenset({TURN_START, STEP_END, TURN_END, PROMPT_QUEUED, PROMPT_DROPPED})
MAX_BATCH: Final = 256
# Seconds a trigger's commit may wait for more records when nobody waits for it yet: a quick
# turn's records then share the one commit its flush waits for, not one commit each.
COMMIT_DEFER: Final = 0.005
# SQLite's own wait for the lock once open, per attempt, in the store's thread: short, so the
# retries (and their backoff) happen between attempts, where a closing store can stop them.
ATTEMPT_TIMEOUT_MS: Final = 50
RETRY_FIRST: Final = 0.01  # seconds before the first retry of a busy write; then doubled
RETRY_MAX: Final = 0.2  # so a released lock is taken within about a quarter second
# The most records a flush commits in trio's own thread (D355): a bigger batch goes to the
# store's thread, so the event loop is never held by a long write.
INLINE_MAX: Final = 64
# Commits between two WAL checkpoints, which the store's thread runs (SQLite's automatic one
# would fsync in whichever thread commits, trio's included); about SQLite's default of 1,000
# pages for our small batches.
CHECKPOINT_EVERY: Final = 250

# What a waiting flush waits for, checked under the thread's lock after every commit.
Wanted = Callable[[], bool]


def default_store_path() -> Path:
    """`$XDG_DATA_HOME/trio-agents/sessions.sqlite3`, by default under ~/.local/share."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share"
    )
    return Path(base) / "trio-agents" / "sessions.sqlite3"


class SqliteStore(SessionStore):
    """Sessions in one SQLite file. Use inside `running()` (the runtime does this).

    path: the SQLite file.
    readonly: whether the store was opened for reading only.
    close_grace: seconds leaving `running()` waits for queued records to be committed (the
        write lock may be held by another process) before it gives up on them.

    Two processes may share the file: a session live in one cannot be entered or restored
    in the other (DuplicateSessionError).
    """

    def __init__(
        self, path: str | os.PathLike[str], *, readonly: bool = False, close_grace: float = 5.0
    ) -> None:
        """`readonly=True` opens an existing store for reading only (nothing is created,
        initialised or written); sessions cannot be entered. `close_grace` must be a
        positive finite number (ValueError)."""
        super().__init__()
        if not (close_grace > 0 and math.isfinite(close_grace)):
            raise ValueError(
                f"close_grace must be a positive finite number of seconds, got {close_grace!r}"
            )
        self.path = Path(path)
        self.readonly = readonly
        self.close_grace = close_grace
        self._conn: sqlite3.Connection | None = None
        self._thread: StoreThread | None = None
        # Shared with the thread's commit step, under the thread's lock: the queue, the rows
        # to write, the commit counts, the waiters, the writer's error and retry state.
        self._pending: list[tuple[Session, int, Record]] = []
        self._headers: dict[str, Mapping[str, Any]] = {}  # sessions whose row is not written
        self._persisting: set[str] = set()  # sessions whose row is wanted without records
        self._committed: dict[str, int] = {}  # session id -> records durable
        self._waiters: dict[trio.lowlevel.Task, Wanted] = {}  # parked flushes
        self._wake_sent = False  # a wake of the waiters is on its way to trio
        self._writer_error: BaseException | None = None
        self._killed = False  # simulate_kill: leaving running() then only joins the thread
        self._busy: StoreLockedError | None = None  # the last busy attempt, while retrying
        self._busy_retries = 0  # write attempts that found the lock held, since the start
        self._delay = RETRY_FIRST
        self._unchecked = 0  # commits since the last WAL checkpoint
        # Whoever holds the connection (the thread, or trio while lent): its busy timeout now.
        self._wait_ms = ATTEMPT_TIMEOUT_MS
        # Tests of the thread's own commits turn this off (the commit then always goes there).
        self._commit_in_trio = True
        # Trio's only.
        self._rows: set[str] = set()  # sessions read here that have their row
        self._claims: dict[str, int] = {}  # session id -> locked descriptor

    def __repr__(self) -> str:
        return f"<SqliteStore {str(self.path)!r}>"

    async def _in_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        # Every call into SQLite but the commits goes through this, to the store's thread.
        assert self._thread is not None
        return await self._thread.call(fn, *args)

    def _guarded(self) -> AbstractContextManager[Any]:
        # The thread's lock; none when the store is not running, as nothing else runs then.
        return self._thread.lock if self._thread is not None else nullcontext()

    # -- running ------------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncGenerator[None, None]:
        """Open the file (creating and initialising it unless read-only) and run the writer
        for the block. Leaving commits every queued record, shielded and bounded by
        `close_grace`, then closes the file.

        Entering and leaving are checkpoints. Raises TrioAgentsError if the store is already
        running, if the file is not a trio-agents session store of this format, if a
        read-only store has no file, or if the file cannot be opened (StoreFileError naming
        the cause; StoreLockedError if another process held its write lock for
        BUSY_TIMEOUT). A failure of the writer (StoreFileError: a full disk, a read-only
        file) does not cancel the block: `flush` raises StoreBrokenError from then on, and
        leaving raises the writer's error. Leaving raises StoreLockedError when records could
        not be committed within `close_grace` because the lock stayed held.
        """
        if self._thread is not None:
            raise AlreadyRunningError(f"{self!r} is already running; one runtime at a time")
        if self._killed:
            raise StoreClosedError(
                f"{self!r} was killed (simulate_kill); open a new SqliteStore on its file"
            )
        thread = StoreThread(
            f"trio-agents store {self.path.name}", self._commit_step, defer=COMMIT_DEFER
        )
        thread.start()
        self._thread = thread
        try:
            opened: sqlite3.Connection = await self._in_thread(self._connect)
            self._conn = opened
            try:
                try:
                    yield
                finally:
                    if not self._killed:
                        with trio.CancelScope(shield=True):
                            await self._drain()
                            # Between two commits: none runs after this, so what is still
                            # queued now is exactly what was not committed.
                            await self._in_thread(thread.halt_commits)
                # Reached only when nothing raised. A killed process reports nothing.
                if self._writer_error is not None and not self._killed:
                    raise self._writer_error
                if self._pending and not self._killed:
                    raise self._not_stored()
            finally:
                self._conn = None
                self._wake_waiters(everyone=True)  # a flush still waiting sees the store closed
                if not self._killed:
                    with trio.CancelScope(shield=True):
                        await self._in_thread(opened.close)
        finally:
            await thread.stop()
            self._thread = None

    def _not_stored(self) -> StoreLockedError:
        ids = sorted({session.id for session, _, _ in self._pending})
        shown = ", ".join(repr(sid) for sid in ids[:5]) + (", ..." if len(ids) > 5 else "")
        cause = f" ({self._busy})" if self._busy is not None else ""
        return StoreLockedError(
            f"{len(self._pending)} records of {len(ids)} session(s) ({shown}) were not stored "
            f"in {self.path}: they could not be committed within close_grace="
            f"{self.close_grace}s{cause}; close the process holding the lock, or give a "
            "longer close_grace"
        )

    def _connect(self) -> sqlite3.Connection:
        try:
            if self.readonly:
                return open_read_only(self.path)
            conn = open_writable(self.path, wait_ms=ATTEMPT_TIMEOUT_MS)
            self._wait_ms = ATTEMPT_TIMEOUT_MS
            return conn
        except (OSError, sqlite3.Error) as exc:
            if not is_file_error(exc):
                raise
            raise file_error(self.path, exc, "open", reading=self.readonly) from exc

    def _check_running(self) -> None:
        if self._conn is None:
            raise StoreClosedError(
                f"{self!r} is not running; use it inside `async with store.running()`"
            )
        if self.readonly:
            raise ReadOnlyStoreError(
                f"{self!r} is read-only; open it without readonly=True to write"
            )

    async def _db(self, fn: Any, *args: Any, doing: str = "read") -> Any:
        """`fn(*args)` in the store's thread, in turn with its commits; an SQLite or OS error
        about the file comes out as the library error that names the file and the cause of
        failing to `doing` it."""
        if self._conn is None:
            raise StoreClosedError(
                f"{self!r} is not running; use it inside `async with store.running()`"
            )

        def in_thread() -> Any:
            self._wait_at_most(ATTEMPT_TIMEOUT_MS)
            return fn(*args)

        try:
            return await self._in_thread(in_thread)
        except (OSError, sqlite3.Error) as exc:
            if not is_file_error(exc):
                raise
            raise file_error(self.path, exc, doing, reading=self.readonly) from exc

    # -- the write path -----------------------------------------------------------------

    def _attach(self, session: Session) -> None:
        with self._guarded():
            self._committed.setdefault(session.id, len(session))
            # A persisted session resumed before its first record has no records but a row.
            if len(session) == 0 and session.id not in self._rows:
                self._headers[session.id] = session.header

    # -- claims against other processes -------------------------------------------------

    def _claim(self, session_id: str) -> None:
        """An exclusive `flock` on a file per session next to the store, held while the
        session is live here, and removed when it is released (see `_store/_claims`)."""
        if session_id not in self._claims:
            self._claims[session_id] = claim(self.path, session_id)

    def _release(self, session_id: str) -> None:
        fd = self._claims.pop(session_id, None)
        if fd is not None:
            release(self.path, session_id, fd)

    def _detached(self, session: Session) -> None:
        self._rows.discard(session.id)
        with self._guarded():
            # Records still queued (a flush that timed out) need their header row and their
            # commit count: forget them only once nothing of this session is pending.
            if not any(pending is session for pending, _, _ in self._pending):
                self._headers.pop(session.id, None)
                self._committed.pop(session.id, None)

    def _appended(self, session: Session, record: Record) -> None:
        """Queue `record` for the writer, and kick it for a commit trigger (or a full
        batch). Never blocks.

        Seam: a store double may queue a record without the kick (one whose commit waits)."""
        thread = self._thread
        with self._guarded():
            self._pending.append((session, len(session) - 1, record))
            if thread is not None and (
                record.type in COMMIT_TRIGGERS or len(self._pending) >= MAX_BATCH
            ):
                thread.kick(waited=False)

    def _committed_all(self, session: Session) -> bool:
        """Whether the writer has committed every record of `session`. Never blocks.

        Seam: a store double may answer True early (one that says queued is committed)."""
        with self._guarded():
            return self._committed.get(session.id, len(session)) >= len(session)

    async def _persist(self, session: Session) -> None:
        """The writer writes the header row in its next batch, records or not; a busy lock
        is retried there as for any batch."""
        sid = session.id
        with self._guarded():
            if sid in self._headers:
                self._persisting.add(sid)
        await self._wait_for(lambda: sid not in self._headers)
        await self.flush(session)

    async def flush(self, session: Session) -> None:
        """Have the writer commit now, and return once every record appended to `session`
        so far is committed. Always a checkpoint. While another process holds the write
        lock it keeps waiting (the writer retries): bound it with a deadline. While records
        remain to commit, raises TrioAgentsError if the writer has failed (StoreBrokenError
        chained to its error, whose message it repeats), or if the store is not running or
        is read-only."""
        sid, target = session.id, len(session)
        await self._wait_for(lambda: self._committed.get(sid, target) >= target)
        await trio.lowlevel.checkpoint()

    async def simulate_kill(self) -> None:
        """Leave this store as a kill -9 of its process would (a seam for crash tests, such
        as the durable machine's): its thread refuses every call from now on, flushes parked
        and to come fail with `StoreClosedError`, the session claims go, and the connection
        closes without committing, so an open transaction rolls back as SQLite's recovery
        would. Nothing is written or flushed. The store is of no further use (leaving
        `running()` then only joins its thread, and raises nothing); the file is what the
        next process finds. Always a checkpoint."""
        self._killed = True
        thread = self._thread
        if thread is not None:
            # Not inside SQLite after this returns, nor entering it later: closing a
            # connection under a thread that is using it crashes the process.
            await thread.call(thread.refuse_calls)
        else:
            await trio.lowlevel.checkpoint()
        self._writer_error = StoreClosedError("the process was killed (simulate_kill)")
        self._wake_waiters(everyone=True)
        for session_id in list(self._claims):
            self._release(session_id)
        if self._conn is not None:
            self._conn.close()

    async def _wait_for(self, wanted: Wanted) -> None:
        """Park until `wanted()` holds after a commit (checked under the thread's lock), and
        have the thread commit meanwhile. Raises as `flush` says."""
        task = trio.lowlevel.current_task()
        tried_here = False
        while True:
            with self._guarded():
                if wanted():
                    return
                if self._writer_error is not None:
                    raise StoreBrokenError(
                        f"the store cannot write any more: {self._writer_error}"
                    ) from self._writer_error
                self._check_running()
                assert self._thread is not None
                lent = not tried_here and self._lend()
                if not lent:
                    self._waiters[task] = wanted
                    self._thread.kick(waited=True)
            if lent:
                # Once only: what this commit could not do (a lock another process holds)
                # the thread does, with its retries.
                tried_here = True
                self._commit_lent()
                continue

            def abort(_: Any) -> trio.lowlevel.Abort:
                with self._guarded():
                    self._waiters.pop(task, None)
                return trio.lowlevel.Abort.SUCCEEDED

            await trio.lowlevel.wait_task_rescheduled(abort)

    async def _drain(self) -> None:
        """Wait, bounded by `close_grace`, until the writer has persisted everything queued.
        Seam: a double may change what closing waits for."""
        with trio.move_on_after(self.close_grace):
            # Leaving `running()` raises the writer's own error.
            with contextlib.suppress(StoreBrokenError):
                await self._wait_for(lambda: not self._pending and not self._persisting)

    def _lend(self) -> bool:
        """Under the thread's lock: whether this flush may commit in trio's thread (D355):
        a small batch, with the store's thread asleep and nothing to retry."""
        assert self._thread is not None
        return (
            self._commit_in_trio
            and self._conn is not None
            and len(self._pending) <= INLINE_MAX
            and self._thread.lend()
        )

    def _commit_lent(self) -> None:
        """In trio, holding the connection `_lend` lent: commit what is queued, waiting for
        no lock (another process's write lock sends the batch to the thread instead)."""
        thread = self._thread
        assert thread is not None
        try:
            self._wait_at_most(0)
            with contextlib.suppress(StoreLockedError):
                self._commit_queued(in_trio=True)
        finally:
            with thread.lock:
                settled = not self._pending and not self._persisting
            thread.give_back(settled=settled)
        if self._unchecked >= CHECKPOINT_EVERY:
            thread.kick(waited=False)  # the thread checkpoints in its next commit step
        if self._waiters:
            self._wake_waiters()  # other flushes this commit completed

    def _wait_at_most(self, ms: int) -> None:
        """By whoever holds the connection: SQLite's own wait for another process's write
        lock, changed only when it differs (a PRAGMA costs as much as a small insert)."""
        if self._wait_ms != ms and self._conn is not None:
            self._conn.execute(f"PRAGMA busy_timeout={ms}")
            self._wait_ms = ms

    def _wake_waiters(self, *, everyone: bool = False) -> None:
        """In trio: reschedule the parked flushes whose wait is over (all of them when the
        writer failed or the store closes); each checks again what it waits for."""
        with self._guarded():
            self._wake_sent = False
            everyone = everyone or self._writer_error is not None
            done = [task for task, wanted in self._waiters.items() if everyone or wanted()]
            for task in done:
                del self._waiters[task]
        for task in done:
            trio.lowlevel.reschedule(task)

    def _wake_if_waited(self) -> None:
        # In the thread, under its lock, after a commit: one trip to trio, and only if a
        # parked flush can go on.
        if self._wake_sent or not self._waiters:
            return
        if self._writer_error is None and not any(w() for w in self._waiters.values()):
            return
        assert self._thread is not None
        self._wake_sent = True
        self._thread.wake(self._wake_waiters)

    def _commit_step(self) -> float | None:
        """In the thread: commit everything queued, of every session, in one transaction,
        and checkpoint the WAL when it is due. None when done; the seconds to wait before
        trying again while the lock is held."""
        assert self._thread is not None
        self._wait_at_most(ATTEMPT_TIMEOUT_MS)
        try:
            self._commit_queued(in_trio=False)
        except StoreLockedError as exc:
            with self._thread.lock:
                self._busy = exc
                self._busy_retries += 1
                delay, self._delay = self._delay, min(self._delay * 2, RETRY_MAX)
            return delay
        if self._unchecked >= CHECKPOINT_EVERY:
            self._unchecked = 0
            self._checkpoint()
        return None

    def _checkpoint(self) -> None:
        """In the thread: copy the WAL into the database, so the WAL stays small. PASSIVE
        waits for no reader or writer; what it cannot copy now, the next one does. A failure
        loses nothing (the WAL keeps it all) and is not the writer's error."""
        assert self._conn is not None
        with contextlib.suppress(sqlite3.Error):
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def _commit_queued(self, *, in_trio: bool) -> None:
        """By whoever holds the connection: commit everything queued in one transaction.
        Raises StoreLockedError, with nothing changed, when another process holds the
        write lock; any other failure is the writer's error, which every flush reports."""
        assert self._thread is not None
        lock = self._thread.lock
        with lock:
            if self._writer_error is not None or not (self._pending or self._persisting):
                return
            # Records stay queued until their batch commits: one the lock refused is tried
            # again, with every record appended meanwhile.
            batch = list(self._pending)
            wanted = {s.id for s, _, _ in batch} | self._persisting
            headers = {sid: self._headers[sid] for sid in wanted if sid in self._headers}
        try:
            try:
                self._write_batch(headers, batch)
            except (OSError, sqlite3.Error) as exc:
                if not is_file_error(exc):
                    raise
                raise file_error(self.path, exc, "write") from exc
        except StoreLockedError:
            raise
        except Exception as exc:
            # Not raised here, where nobody would see it: every flush reports it, and so
            # does leaving `running()`.
            with lock:
                self._writer_error = exc
                if not in_trio:
                    self._wake_if_waited()
            return
        with lock:
            self._busy, self._delay = None, RETRY_FIRST
            self._unchecked += 1
            del self._pending[: len(batch)]
            for sid in headers:
                self._headers.pop(sid, None)
            self._persisting.difference_update(wanted)
            for session, seq, _ in batch:
                self._committed[session.id] = max(self._committed.get(session.id, 0), seq + 1)
            if not in_trio:
                self._wake_if_waited()

    def _write_batch(
        self,
        headers: Mapping[str, Mapping[str, Any]],
        batch: Sequence[tuple[Session, int, Record]],
    ) -> None:
        """Write one batch of headers and records in one transaction (the writer thread). Seam:
        a double may change the batch's transaction."""
        assert self._conn is not None
        write_batch(self._conn, headers, batch)

    # -- reads --------------------------------------------------------------------------

    async def _read(self, session_id: str) -> StoredSession | None:
        stored: StoredSession | None = await self._db(self._read_sync, session_id)
        if stored is not None and not stored.records:
            self._rows.add(session_id)  # see `_attach`
        return stored

    async def _append_durably(self, stored: StoredSession, records: Sequence[Record]) -> None:
        await self._write_waiting(self._append_sync, stored, records)

    async def _settle(self, session_id: str) -> None:
        await self._wait_for(lambda: all(s.id != session_id for s, _, _ in self._pending))

    async def _delete(self, session_id: str) -> bool:
        deleted: bool = await self._write_waiting(self._delete_sync, session_id)
        self._rows.discard(session_id)
        return deleted

    async def _write_waiting(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` in the store's thread, a write someone waits for (a repair, a
        delete): a busy lock is retried as opening the file does, for BUSY_TIMEOUT."""
        deadline = trio.current_time() + BUSY_TIMEOUT
        delay = RETRY_FIRST
        while True:
            try:
                return await self._db(fn, *args, doing="write")
            except StoreLockedError:
                self._busy_retries += 1
                if trio.current_time() + delay > deadline:
                    raise
                await trio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX)

    def _read_sync(self, session_id: str) -> StoredSession | None:
        assert self._conn is not None
        return read_session(self._conn, session_id)

    def _delete_sync(self, session_id: str) -> bool:
        assert self._conn is not None
        return delete_session(self._conn, session_id)

    def _append_sync(self, stored: StoredSession, records: Sequence[Record]) -> None:
        """Append `records` to a stored session, durably (the database thread). Seam: a double
        may change the write."""
        assert self._conn is not None
        append_records(self._conn, stored.id, len(stored.records), records)

    async def list_sessions(self) -> list[SessionInfo]:
        """Every stored session, oldest first (by creation time, then id), read in a worker
        thread. Always a checkpoint. A damaged session is listed too, with `damage` saying
        what is wrong (what `load` would raise as CorruptSessionError). Raises
        TrioAgentsError unless the store is running."""
        return await self._db(self._list_sync)  # type: ignore[no-any-return]

    def _list_sync(self) -> list[SessionInfo]:
        assert self._conn is not None
        return list_rows(self._conn)
