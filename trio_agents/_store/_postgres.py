"""Sessions in a PostgreSQL database, shared by processes on any number of hosts.

The write path is SqliteStore's: an append only queues the record, and one writer task
commits queued records in batches, in a worker thread, at the same boundaries (a turn
starts, a step ends, a turn ends, a prompt is queued or dropped, someone flushes, or the
queue grows past a cap). Each batch is one transaction, so a crash never leaves a torn
record; it can leave the last turn open, which `restore` repairs with the shared closers.

Live-session ownership: a session live in a store is a session-level advisory lock held on
that store's claims connection (one per store, autocommit). The server drops the lock when
the connection ends, so a holder that dies (a SIGKILL, a host that vanishes: the connection
asks the server for TCP keepalives) frees its sessions without anyone cleaning up. The lock
is taken with `pg_try_advisory_lock`, which answers at once and never waits for the holder:
entering a session stays synchronous, as the runtime's publication needs (design D321).

A claim also carries a fencing token (`_pg_claims`): if the claims connection is cut while
its process lives, the server drops the lock and another process may take the session; the
first one's writes of it are then refused in their own transaction, and that one session
is given up here with SessionClaimLostError while the store's others go on (design D490).
A lost connection is re-established, with backoff, for `reconnect_timeout` seconds: the
writer's queued records stay queued, and the claims are taken again, each kept only if no
one claimed its session meanwhile (D491).

A store opened with `readonly=True` (what `trio-agents sessions` opens) has one connection,
whose transactions the server itself keeps read-only, and never creates the tables: a
database without them reads as holding no sessions (design D363).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

import trio

from .._errors import (
    AlreadyRunningError,
    ReadOnlyStoreError,
    SessionClaimLostError,
    SessionLiveElsewhereError,
    StoreBrokenError,
    StoreClosedError,
    StoreConnectionError,
    StoreLockedError,
)
from .._nursery import service_nursery
from ._base import SessionInfo, SessionStore, StoredSession
from ._pg_claims import lock_key, retake, try_claim, unlock
from ._pg_connect import (
    close_all,
    describe_dsn,
    is_postgres_url,
    psycopg_module,
    until_lost,
    without_password,
)
from ._pg_rows import append_fenced, delete_fenced, list_sync, read_sync, write_batch
from ._pg_schema import migrate, readable
from ._records import Record
from ._session import Session
from ._sqlite import COMMIT_TRIGGERS, MAX_BATCH

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresStore", "is_postgres_url"]

# The server notices a vanished client host after idle + interval * count seconds of
# silence (a killed process closes its socket, which the server sees at once).
KEEPALIVE: Final = "-c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 -c tcp_keepalives_count=3"
# A read-only store's connection: the server refuses any write in it, ours or a bug's.
READ_ONLY: Final = "-c default_transaction_read_only=on"
# The claims connection's bound on waiting for a row lock: a claim's bump waits for a write
# of the session under way elsewhere, in the event loop's thread (D490).
CLAIM_LOCK_TIMEOUT: Final = "-c lock_timeout=2000"
# Waits between attempts to reconnect: doubling from the first to the last (D491).
BACKOFF: Final = (0.05, 2.0)


class PostgresStore(SessionStore):
    """Sessions in a PostgreSQL database. Use inside `running()` (the runtime does this).

    dsn: a libpq connection string or URL (`postgresql://user@host:5432/db`).
    where: the database, as messages name it (the DSN without its password).
    readonly: whether the store was opened for reading only.
    close_grace: seconds leaving `running()` waits for queued records to be committed.
    reconnect_timeout: seconds a lost connection is retried (with backoff) before the store
        gives up: the writer then fails (StoreBrokenError), and each claimed session is
        given up (SessionClaimLostError).

    Any number of stores, in processes on any hosts, may share the database: a session live
    in one cannot be entered or restored in another (SessionLiveElsewhereError, a
    DuplicateSessionError), and a holder whose connection ends frees its sessions. A store
    whose claim on a session was cut and taken by another store gives up that session only.
    """

    def __init__(
        self,
        dsn: str,
        *,
        readonly: bool = False,
        close_grace: float = 5.0,
        connect_timeout: float = 10.0,
        reconnect_timeout: float = 30.0,
    ) -> None:
        """`readonly=True` only reads: nothing is created, migrated or written, a database
        without the tables holds no sessions, and sessions cannot be entered or restored.
        `close_grace`, `connect_timeout` and `reconnect_timeout` must be positive finite
        numbers of seconds (ValueError). Raises StoreConnectionError if psycopg is not
        installed. Nothing is connected until `running()`."""
        super().__init__()
        for name, value in (
            ("close_grace", close_grace),
            ("connect_timeout", connect_timeout),
            ("reconnect_timeout", reconnect_timeout),
        ):
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(
                    f"{name} must be a positive finite number of seconds, got {value!r}"
                )
        self.dsn = dsn
        self.where, self._password = describe_dsn(dsn)
        self.readonly = readonly
        self.close_grace = close_grace
        self.connect_timeout = connect_timeout
        self.reconnect_timeout = reconnect_timeout
        self._conn: psycopg.Connection[Any] | None = None
        self._claims_conn: psycopg.Connection[Any] | None = None
        self._namespace = ""
        self._lock = trio.Lock()
        self._pending: list[tuple[Session, int, Record]] = []
        self._headers: dict[str, Mapping[str, Any]] = {}  # sessions whose row is not written
        self._persisting: set[str] = set()
        self._rows: set[str] = set()  # sessions read here that have their row
        self._committed: dict[str, int] = {}  # session id -> records durable
        self._wake = trio.Event()
        self._progress = trio.lowlevel.ParkingLot()
        self._writer_error: BaseException | None = None
        self._claims: dict[str, int] = {}  # session id -> advisory lock key held
        # Session id -> the fencing token of its latest claim here; kept past a release
        # while records of the session are still queued, which are written under it.
        self._tokens: dict[str, int] = {}
        self._lost: dict[str, str] = {}  # session id -> why its claim was lost (D490)
        self._claims_back = trio.Event()  # set while the claims connection is up

    def __repr__(self) -> str:
        return f"<PostgresStore {self.where!r}>"

    # -- running ------------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncGenerator[None, None]:
        """Connect (two connections: one for records, one holding the claims), create or
        migrate the schema, and run the writer for the block (read-only: one connection,
        and nothing created). Leaving commits every queued record, shielded and bounded by
        `close_grace`, then closes the connections, which releases every claim.

        Entering and leaving are checkpoints. Raises AlreadyRunningError if the store is
        already running, StoreConnectionError if the server cannot be reached (naming the
        database, never the password), UnknownStoreVersionError for a schema newer than
        this version reads. A lost connection is re-established for `reconnect_timeout`
        seconds. A failure of the writer does not cancel the block: `flush` raises
        StoreBrokenError from then on, and leaving raises the writer's error.
        """
        if self._conn is not None:
            raise AlreadyRunningError(f"{self!r} is already running; one runtime at a time")
        conn, claims = await trio.to_thread.run_sync(self._connect_both)
        self._conn, self._claims_conn = conn, claims
        try:
            async with service_nursery() as nursery:
                nursery.start_soon(self._writer)
                if claims is not None:
                    self._claims_back.set()
                    nursery.start_soon(self._keep_claims)
                try:
                    yield
                finally:
                    with trio.CancelScope(shield=True):
                        await self._drain()
                    nursery.cancel_scope.cancel(reason="store closing")
            if self._writer_error is not None:
                raise self._writer_error
            if self._pending:
                raise self._not_stored()
        finally:
            conn, claims = self._conn, self._claims_conn
            self._conn = self._claims_conn = None
            self._claims.clear()  # closing the claims connection releases them all
            self._progress.unpark_all()
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(close_all, conn, claims)

    def _connect_both(self) -> tuple[psycopg.Connection[Any], psycopg.Connection[Any] | None]:
        conn = self._connect()
        try:
            if self.readonly:
                readable(conn, self.where)
                return conn, None
            migrate(conn, self.where)
            row = conn.execute("SELECT current_schema()").fetchone()
            assert row is not None
            self._namespace = str(row[0])
            claims = self._connect(CLAIM_LOCK_TIMEOUT)
        except BaseException:
            conn.close()
            raise
        return conn, claims

    def _connect(self, extra: str = "") -> psycopg.Connection[Any]:
        psycopg = psycopg_module()
        try:
            given = psycopg.conninfo.conninfo_to_dict(self.dsn).get("options")
            ours = f"{KEEPALIVE} {READ_ONLY}" if self.readonly else KEEPALIVE
            ours = f"{ours} {extra}" if extra else ours
            return psycopg.connect(  # type: ignore[no-any-return]
                self.dsn,
                autocommit=True,
                connect_timeout=max(1, round(self.connect_timeout)),
                # The DSN's own options (a search_path, say) stay; ours come first.
                options=f"{ours} {given}" if given else ours,
            )
        except psycopg.Error as exc:
            raise self._connection_error("connect to", exc) from exc

    def _connection_error(self, doing: str, exc: BaseException) -> StoreConnectionError:
        reason = without_password(" ".join(str(exc).split()), self.dsn, self.where, self._password)
        return StoreConnectionError(
            f"cannot {doing} {self.where}: {reason}; check that the server is running and "
            "the DSN names it"
        )

    def _not_stored(self) -> StoreLockedError:
        ids = sorted({session.id for session, _, _ in self._pending})
        shown = ", ".join(repr(sid) for sid in ids[:5]) + (", ..." if len(ids) > 5 else "")
        return StoreLockedError(
            f"{len(self._pending)} records of {len(ids)} session(s) ({shown}) were not stored "
            f"in {self.where}: they could not be committed within close_grace="
            f"{self.close_grace}s; give a longer close_grace"
        )

    def _check_open(self) -> None:
        if self._conn is None:
            raise StoreClosedError(
                f"{self!r} is not running; use it inside `async with store.running()`"
            )

    def _check_running(self) -> None:
        self._check_open()
        if self.readonly:
            raise ReadOnlyStoreError(
                f"{self!r} is read-only; open it without readonly=True to write"
            )

    async def _db(self, fn: Callable[..., Any], *args: Any, doing: str = "read") -> Any:
        """`fn(conn, *args)` in a worker thread, one at a time; a driver error about the
        connection comes out as StoreConnectionError naming the database. A connection
        found lost (a server restart) is replaced first, once per call (D491)."""
        self._check_open()
        async with self._lock:
            conn = self._conn
            if conn is None:
                raise StoreClosedError(f"{self!r} closed while waiting to {doing}")
            psycopg = psycopg_module()
            if conn.broken:
                fresh = await trio.to_thread.run_sync(self._connect)
                if self._conn is None:  # closed meanwhile: its closing closes only the old
                    fresh.close()
                    raise StoreClosedError(f"{self!r} closed while waiting to {doing}")
                self._conn = conn = fresh
            try:
                return await trio.to_thread.run_sync(fn, conn, *args)
            except psycopg.OperationalError as exc:
                raise self._connection_error(doing, exc) from exc

    async def _backoff(self, started: float, delay: float) -> float:
        """Wait before the next attempt to reconnect; the next delay. Raises TooSlowError
        once `reconnect_timeout` has passed since `started`."""
        left = started + self.reconnect_timeout - trio.current_time()
        if left <= 0:
            raise trio.TooSlowError
        await trio.sleep(min(delay, left))
        return min(delay * 2, BACKOFF[1])

    # -- claims -------------------------------------------------------------------------

    def _claim(self, session_id: str) -> None:
        """A session-level advisory lock on the claims connection, held while the session
        is live here, and a new fencing token for its writes. `pg_try_advisory_lock` never
        waits for another holder: two round trips to the server, made in the caller's
        thread because entering is synchronous."""
        if session_id in self._claims:
            return
        if self.readonly:
            # Only `restore` claims here (entering is refused first), and it is for resuming.
            raise ReadOnlyStoreError(
                f"{self!r} is read-only: a session cannot be restored in it; load it to read it"
            )
        conn = self._claims_conn
        if conn is None:
            raise StoreClosedError(
                f"{self!r} is not running; use it inside `async with store.running()`"
            )
        key = lock_key(self._namespace, session_id)
        psycopg = psycopg_module()
        try:
            if not self._claims_back.is_set():
                raise psycopg.OperationalError("the connection holding claims is being re-made")
            token = try_claim(conn, key, session_id)
        except psycopg.errors.LockNotAvailable:
            raise SessionLiveElsewhereError(
                f"session {session_id!r} is still being written by another connection to "
                f"{self.where}; close it there first, or try again"
            ) from None
        except psycopg.Error as exc:
            raise self._connection_error("claim a session in", exc) from exc
        if token is None:
            raise SessionLiveElsewhereError(
                f"session {session_id!r} is live on another connection to {self.where}; "
                "close it there first"
            )
        self._claims[session_id] = key
        self._tokens[session_id] = token
        self._lost.pop(session_id, None)

    def _release(self, session_id: str) -> None:
        key = self._claims.pop(session_id, None)
        conn = self._claims_conn
        if key is not None and conn is not None:
            unlock(conn, key)

    def _lose(self, session_id: str, why: str) -> None:
        """Give up one session: its claim is someone else's now, or cannot be re-taken.
        Its queued records are dropped by the writer, and its flushes raise."""
        if session_id in self._lost:
            return
        self._lost[session_id] = why
        key = self._claims.pop(session_id, None)
        conn = self._claims_conn
        if key is not None and conn is not None and self._claims_back.is_set():
            unlock(conn, key)
        self._wake.set()  # the writer drops the session's queued records
        self._progress.unpark_all()

    def _taken(self, session_id: str) -> str:
        return (
            f"session {session_id!r} was taken by another connection to {self.where} after "
            "this process lost its claim on it (the connection holding the claim was cut); "
            "its records since its last commit were not stored here; resume it where it is "
            "live now"
        )

    async def _keep_claims(self) -> None:
        """Watch the claims connection; when it is lost, connect again (with backoff) and
        take every claim again, each only if nobody claimed its session meanwhile (D491)."""
        psycopg = psycopg_module()
        while True:
            conn = self._claims_conn
            assert conn is not None
            await until_lost(conn, psycopg)
            self._claims_back = trio.Event()
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(close_all, conn)
            fresh = await self._reconnect_claims()
            held = dict(self._claims)
            try:
                kept: list[str] = await trio.to_thread.run_sync(self._retake_all, fresh, held)
            except BaseException:
                # The store closing (or the retake failing) before the new connection is
                # its claims connection: nobody else would close it.
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(close_all, fresh)
                raise
            self._claims_conn = fresh
            self._claims_back.set()
            for sid, key in held.items():
                if sid not in kept:
                    self._lose(sid, self._taken(sid))
                elif self._claims.get(sid) != key:  # released while it was being re-taken
                    unlock(fresh, key)

    async def _reconnect_claims(self) -> psycopg.Connection[Any]:
        started, delay = trio.current_time(), BACKOFF[0]
        while True:
            try:
                return await trio.to_thread.run_sync(self._connect, CLAIM_LOCK_TIMEOUT)
            except StoreConnectionError as exc:
                try:
                    delay = await self._backoff(started, delay)
                except trio.TooSlowError:
                    # Each claimed session is given up; the store still tries to connect
                    # again, for the sessions entered later.
                    for sid in list(self._claims):
                        self._lose(sid, self._unreachable(sid, exc))
                    started = trio.current_time()

    def _unreachable(self, session_id: str, exc: StoreConnectionError) -> str:
        return (
            f"session {session_id!r} lost its claim in {self.where}: the connection holding "
            f"it could not be made again within reconnect_timeout={self.reconnect_timeout}s "
            f"({exc}); resume it once the server is back"
        )

    def _retake_all(self, conn: psycopg.Connection[Any], held: Mapping[str, int]) -> list[str]:
        psycopg = psycopg_module()
        kept: list[str] = []
        for sid, key in held.items():
            token = self._tokens.get(sid)
            with contextlib.suppress(psycopg.Error):
                if token is not None and retake(conn, key, sid, token):
                    kept.append(sid)
        return kept

    # -- the write path -----------------------------------------------------------------

    def _attach(self, session: Session) -> None:
        self._committed.setdefault(session.id, len(session))
        if len(session) == 0 and session.id not in self._rows:
            self._headers[session.id] = session.header

    def _detached(self, session: Session) -> None:
        self._rows.discard(session.id)
        self._lost.pop(session.id, None)
        if not any(pending is session for pending, _, _ in self._pending):
            self._headers.pop(session.id, None)
            self._committed.pop(session.id, None)
            self._tokens.pop(session.id, None)

    def _appended(self, session: Session, record: Record) -> None:
        self._pending.append((session, len(session) - 1, record))
        if record.type in COMMIT_TRIGGERS or len(self._pending) >= MAX_BATCH:
            self._wake.set()

    def _committed_all(self, session: Session) -> bool:
        # A lost session is never committed: its flush raises SessionClaimLostError.
        if session.id in self._lost:
            return False
        return self._committed.get(session.id, len(session)) >= len(session)

    def _raise_if_broken(self, session_id: str | None = None) -> None:
        why = self._lost.get(session_id) if session_id is not None else None
        if why is not None:
            raise SessionClaimLostError(why)
        if self._writer_error is not None:
            raise StoreBrokenError(
                f"the store cannot write any more: {self._writer_error}"
            ) from self._writer_error
        self._check_running()

    async def _persist(self, session: Session) -> None:
        while session.id in self._headers:
            self._raise_if_broken(session.id)
            self._persisting.add(session.id)
            self._wake.set()
            await self._progress.park()
        await self.flush(session)

    async def flush(self, session: Session) -> None:
        """Have the writer commit now, and return once every record appended to `session`
        so far is committed. Always a checkpoint. Raises SessionClaimLostError if the
        store lost its claim on the session (another process took it). While records
        remain to commit, raises StoreBrokenError (chained to the writer's error) if the
        writer has failed, and StoreClosedError if the store is not running."""
        target = len(session)
        while session.id in self._lost or self._committed.get(session.id, target) < target:
            self._raise_if_broken(session.id)
            self._wake.set()
            await self._progress.park()
        await trio.lowlevel.checkpoint()

    async def _drain(self) -> None:
        with trio.move_on_after(self.close_grace):
            while self._pending and self._writer_error is None:
                self._wake.set()
                await self._progress.park()

    async def _writer(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            started: float | None = None
            delay = BACKOFF[0]
            while True:
                if self._lost:  # records of a session given up are never written (D490)
                    self._pending = [p for p in self._pending if p[0].id not in self._lost]
                    self._persisting -= self._lost.keys()
                    self._progress.unpark_all()
                if not (self._pending or self._persisting):
                    break
                batch = list(self._pending)
                wanted = {s.id for s, _, _ in batch} | self._persisting
                headers = {sid: self._headers[sid] for sid in wanted if sid in self._headers}
                tokens = {sid: self._tokens[sid] for sid in wanted if sid in self._tokens}
                try:
                    lost = await self._db(write_batch, headers, batch, tokens, doing="write to")
                except StoreConnectionError as exc:
                    # A lost connection (a server restart): the records stay queued and the
                    # batch is tried again, with whatever was appended since (D491).
                    started = trio.current_time() if started is None else started
                    try:
                        delay = await self._backoff(started, delay)
                        continue
                    except trio.TooSlowError:
                        self._fail(exc)
                        return
                except Exception as exc:
                    self._fail(exc)
                    return
                del self._pending[: len(batch)]
                for sid in headers:
                    self._headers.pop(sid, None)
                self._persisting.difference_update(wanted)
                for session, seq, _ in batch:
                    if session.id not in lost:
                        done = self._committed.get(session.id, 0)
                        self._committed[session.id] = max(done, seq + 1)
                for sid in lost:
                    self._lose(sid, self._taken(sid))
                self._progress.unpark_all()
                # One batch per wake-up, as SqliteStore: records appended during this commit
                # wait for their own trigger, so both stores commit at the same boundaries.
                if not lost:
                    break

    def _fail(self, exc: BaseException) -> None:
        # Reported by every flush and by leaving `running()`, not raised here where it
        # would cancel whatever the store's owner is doing.
        self._writer_error = exc
        self._progress.unpark_all()

    # -- reads --------------------------------------------------------------------------

    async def _read(self, session_id: str) -> StoredSession | None:
        stored: StoredSession | None = await self._db(read_sync, session_id, self.readonly)
        if stored is not None and not stored.records:
            self._rows.add(session_id)
        return stored

    async def _append_durably(self, stored: StoredSession, records: Sequence[Record]) -> None:
        token = self._tokens.get(stored.id, -1)
        if not await self._db(append_fenced, stored, records, token, doing="write to"):
            raise SessionClaimLostError(self._taken(stored.id))

    async def _settle(self, session_id: str) -> None:
        # The writer commits them (or drops them, if the claim they were taken under is
        # gone), before the delete's claim takes a new token.
        while any(s.id == session_id for s, _, _ in self._pending):
            self._raise_if_broken()
            self._wake.set()
            await self._progress.park()
        await trio.lowlevel.checkpoint()

    async def _delete(self, session_id: str) -> bool:
        token = self._tokens.get(session_id, -1)
        deleted: bool | None = await self._db(delete_fenced, session_id, token, doing="write to")
        if deleted is None:
            raise SessionClaimLostError(self._taken(session_id))
        self._rows.discard(session_id)
        return deleted

    async def list_sessions(self) -> list[SessionInfo]:
        """Every stored session, oldest first (by creation time, then id), read in one
        snapshot in a worker thread. Always a checkpoint. A damaged session is listed with
        its `damage`. Raises StoreClosedError unless the store is running."""
        return await self._db(list_sync, self.readonly)  # type: ignore[no-any-return]
