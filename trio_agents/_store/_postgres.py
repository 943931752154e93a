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

Records are also fenced by their key: `(session_id, seq)` is the primary key, so if two
stores ever wrote one session (a claims connection lost while its session stayed live),
the second write of a seq fails rather than interleaving two histories.

A store opened with `readonly=True` (what `trio-agents sessions` opens) has one connection,
whose transactions the server itself keeps read-only, and never creates the tables: a
database without them reads as holding no sessions (design D363).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

import trio

from .._errors import (
    AlreadyRunningError,
    CorruptSessionError,
    ReadOnlyStoreError,
    SessionLiveElsewhereError,
    StoreBrokenError,
    StoreClosedError,
    StoreConnectionError,
    StoreLockedError,
)
from .._nursery import service_nursery
from ._base import SessionInfo, SessionStore, StoredSession, summarize
from ._pg_schema import has_tables, migrate, readable
from ._records import TURN_START, Record
from ._session import Session
from ._sqlite import COMMIT_TRIGGERS, MAX_BATCH
from ._stored_rows import stored_session

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresStore", "is_postgres_url"]

# The server notices a vanished client host after idle + interval * count seconds of
# silence (a killed process closes its socket, which the server sees at once).
KEEPALIVE: Final = "-c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 -c tcp_keepalives_count=3"
# A read-only store's connection: the server refuses any write in it, ours or a bug's.
READ_ONLY: Final = "-c default_transaction_read_only=on"


def is_postgres_url(text: str) -> bool:
    """Whether `text` names a PostgreSQL database (`postgresql://...` or `postgres://...`)."""
    return text.startswith(("postgresql://", "postgres://"))


def _psycopg() -> Any:
    try:
        # Imported when a PostgresStore is made: the driver is an optional extra, and a
        # program on SQLite should neither need it nor pay for importing it.
        import psycopg
    except ImportError as exc:
        raise StoreConnectionError(
            "PostgresStore needs the psycopg driver, which is not installed; "
            "install it with: pip install 'trio-agents[postgres]'"
        ) from exc
    return psycopg


def _describe(dsn: str) -> tuple[str, str]:
    """The database a DSN names, without its password, and the password (to keep it out of
    messages). A DSN that cannot be parsed is named by its scheme only."""
    conninfo = _psycopg().conninfo
    try:
        parts: dict[str, Any] = conninfo.conninfo_to_dict(dsn)
    except Exception:
        return "a PostgreSQL database (its DSN cannot be parsed)", ""
    host = str(parts.get("host") or "localhost")
    port = str(parts.get("port") or "5432")
    user = parts.get("user")
    who = f"{user}@" if user else ""
    return f"postgresql://{who}{host}:{port}/{parts.get('dbname') or user or ''}", str(
        parts.get("password") or ""
    )


_URL_SECRET = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^\s/@:]*:)[^\s@]*@", re.IGNORECASE)
_KEYWORD_SECRET = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def without_password(text: str, dsn: str, where: str, password: str) -> str:
    """`text` (a driver's message) with the DSN named by `where` and the password of any
    connection string in it masked. The password's bare text is masked too when it is long
    enough (8 characters) not to occur by chance: masking a short one everywhere mangled
    the message (a password `e` in `connection`) and showed which letters it holds."""
    text = text.replace(dsn, where) if dsn else text
    text = _URL_SECRET.sub(r"\1***@", text)
    text = _KEYWORD_SECRET.sub(r"\1***", text)
    return text.replace(password, "***") if len(password) >= 8 else text


def lock_key(namespace: str, session_id: str) -> int:
    """The advisory lock key of a session: 64 bits of a hash of its id, and of the schema
    the store's tables are in, so that stores in two schemas of one database never claim
    each other's sessions. A collision (about 2**-64 per pair) only refuses a resume."""
    digest = hashlib.sha256(f"{namespace}\0{session_id}".encode("utf-8", "surrogatepass"))
    return int.from_bytes(digest.digest()[:8], "big", signed=True)


class PostgresStore(SessionStore):
    """Sessions in a PostgreSQL database. Use inside `running()` (the runtime does this).

    dsn: a libpq connection string or URL (`postgresql://user@host:5432/db`).
    where: the database, as messages name it (the DSN without its password).
    readonly: whether the store was opened for reading only.
    close_grace: seconds leaving `running()` waits for queued records to be committed.

    Any number of stores, in processes on any hosts, may share the database: a session live
    in one cannot be entered or restored in another (SessionLiveElsewhereError, a
    DuplicateSessionError), and a holder whose connection ends frees its sessions.
    """

    def __init__(
        self,
        dsn: str,
        *,
        readonly: bool = False,
        close_grace: float = 5.0,
        connect_timeout: float = 10.0,
    ) -> None:
        """`readonly=True` only reads: nothing is created, migrated or written, a database
        without the tables holds no sessions, and sessions cannot be entered or restored.
        `close_grace` and `connect_timeout` must be positive finite numbers of seconds
        (ValueError). Raises StoreConnectionError if psycopg is not installed. Nothing is
        connected until `running()`."""
        super().__init__()
        for name, value in (("close_grace", close_grace), ("connect_timeout", connect_timeout)):
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(
                    f"{name} must be a positive finite number of seconds, got {value!r}"
                )
        self.dsn = dsn
        self.where, self._password = _describe(dsn)
        self.readonly = readonly
        self.close_grace = close_grace
        self.connect_timeout = connect_timeout
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
        this version reads. A failure of the writer does not cancel the block: `flush`
        raises StoreBrokenError from then on, and leaving raises the writer's error.
        """
        if self._conn is not None:
            raise AlreadyRunningError(f"{self!r} is already running; one runtime at a time")
        conn, claims = await trio.to_thread.run_sync(self._connect_both)
        self._conn, self._claims_conn = conn, claims
        try:
            async with service_nursery() as nursery:
                nursery.start_soon(self._writer)
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
            self._conn = self._claims_conn = None
            self._claims.clear()  # closing the claims connection releases them all
            self._progress.unpark_all()
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(_close_both, conn, claims)

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
            claims = self._connect()
        except BaseException:
            conn.close()
            raise
        return conn, claims

    def _connect(self) -> psycopg.Connection[Any]:
        psycopg = _psycopg()
        try:
            given = psycopg.conninfo.conninfo_to_dict(self.dsn).get("options")
            ours = f"{KEEPALIVE} {READ_ONLY}" if self.readonly else KEEPALIVE
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
        connection comes out as StoreConnectionError naming the database."""
        self._check_open()
        async with self._lock:
            conn = self._conn
            if conn is None:
                raise StoreClosedError(f"{self!r} closed while waiting to {doing}")
            psycopg = _psycopg()
            try:
                return await trio.to_thread.run_sync(fn, conn, *args)
            except psycopg.OperationalError as exc:
                raise self._connection_error(doing, exc) from exc

    # -- claims -------------------------------------------------------------------------

    def _claim(self, session_id: str) -> None:
        """A session-level advisory lock on the claims connection, held while the session
        is live here. `pg_try_advisory_lock` never waits for another holder: one round trip
        to the server, made in the caller's thread because entering is synchronous."""
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
        psycopg = _psycopg()
        try:
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
        except psycopg.Error as exc:
            raise self._connection_error("claim a session in", exc) from exc
        if row is None or not row[0]:
            raise SessionLiveElsewhereError(
                f"session {session_id!r} is live on another connection to {self.where}; "
                "close it there first"
            )
        self._claims[session_id] = key

    def _release(self, session_id: str) -> None:
        key = self._claims.pop(session_id, None)
        conn = self._claims_conn
        if key is None or conn is None:
            return
        psycopg = _psycopg()
        # A connection that failed holds no lock any more: the server dropped them all.
        with contextlib.suppress(psycopg.Error):
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    # -- the write path -----------------------------------------------------------------

    def _attach(self, session: Session) -> None:
        self._committed.setdefault(session.id, len(session))
        if len(session) == 0 and session.id not in self._rows:
            self._headers[session.id] = session.header

    def _detached(self, session: Session) -> None:
        self._rows.discard(session.id)
        if not any(pending is session for pending, _, _ in self._pending):
            self._headers.pop(session.id, None)
            self._committed.pop(session.id, None)

    def _appended(self, session: Session, record: Record) -> None:
        self._pending.append((session, len(session) - 1, record))
        if record.type in COMMIT_TRIGGERS or len(self._pending) >= MAX_BATCH:
            self._wake.set()

    def _committed_all(self, session: Session) -> bool:
        return self._committed.get(session.id, len(session)) >= len(session)

    def _raise_if_broken(self) -> None:
        if self._writer_error is not None:
            raise StoreBrokenError(
                f"the store cannot write any more: {self._writer_error}"
            ) from self._writer_error
        self._check_running()

    async def _persist(self, session: Session) -> None:
        while session.id in self._headers:
            self._raise_if_broken()
            self._persisting.add(session.id)
            self._wake.set()
            await self._progress.park()
        await self.flush(session)

    async def flush(self, session: Session) -> None:
        """Have the writer commit now, and return once every record appended to `session`
        so far is committed. Always a checkpoint. While records remain to commit, raises
        StoreBrokenError (chained to the writer's error) if the writer has failed, and
        StoreClosedError if the store is not running."""
        target = len(session)
        while self._committed.get(session.id, target) < target:
            self._raise_if_broken()
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
            while self._pending or self._persisting:
                batch = list(self._pending)
                wanted = {s.id for s, _, _ in batch} | self._persisting
                headers = {sid: self._headers[sid] for sid in wanted if sid in self._headers}
                try:
                    await self._db(_write_batch, headers, batch, doing="write to")
                except Exception as exc:
                    # Reported by every flush and by leaving `running()`, not raised here
                    # where it would cancel whatever the store's owner is doing.
                    self._writer_error = exc
                    self._progress.unpark_all()
                    return
                del self._pending[: len(batch)]
                for sid in headers:
                    self._headers.pop(sid, None)
                self._persisting.difference_update(wanted)
                for session, seq, _ in batch:
                    self._committed[session.id] = max(self._committed.get(session.id, 0), seq + 1)
                self._progress.unpark_all()
                # One batch per wake-up, as SqliteStore: records appended during this commit
                # wait for their own trigger, so both stores commit at the same boundaries.
                break

    # -- reads --------------------------------------------------------------------------

    async def _read(self, session_id: str) -> StoredSession | None:
        stored: StoredSession | None = await self._db(_read_sync, session_id, self.readonly)
        if stored is not None and not stored.records:
            self._rows.add(session_id)
        return stored

    async def _append_durably(self, stored: StoredSession, records: Sequence[Record]) -> None:
        await self._db(_append_sync, stored, records, doing="write to")

    async def list_sessions(self) -> list[SessionInfo]:
        """Every stored session, oldest first (by creation time, then id), read in one
        snapshot in a worker thread. Always a checkpoint. A damaged session is listed with
        its `damage`. Raises StoreClosedError unless the store is running."""
        return await self._db(_list_sync, self.readonly)  # type: ignore[no-any-return]


def _close_both(*conns: psycopg.Connection[Any] | None) -> None:
    for conn in conns:
        if conn is not None:
            conn.close()


def _write_batch(
    conn: psycopg.Connection[Any],
    headers: Mapping[str, Mapping[str, Any]],
    batch: Sequence[tuple[Session, int, Record]],
) -> None:
    now = time.time()
    with conn.pipeline(), conn.transaction(), conn.cursor() as cur:
        if headers:
            cur.executemany(
                "INSERT INTO trio_agents_sessions (id, header, created_at, updated_at) "
                "VALUES (%s, %s, %s, %s)",
                [
                    (sid, json.dumps(dict(h)), float(h.get("created_at", 0.0)), now)
                    for sid, h in headers.items()
                ],
            )
        if batch:
            cur.executemany(
                "INSERT INTO trio_agents_records (session_id, seq, type, data) "
                "VALUES (%s, %s, %s, %s)",
                [(s.id, seq, r.type, r.data_json()) for s, seq, r in batch],
            )
            cur.execute(
                "UPDATE trio_agents_sessions SET updated_at = %s WHERE id = ANY(%s)",
                (now, sorted({s.id for s, _, _ in batch})),
            )


def _append_sync(
    conn: psycopg.Connection[Any], stored: StoredSession, records: Sequence[Record]
) -> None:
    start = len(stored.records)
    with conn.pipeline(), conn.transaction(), conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO trio_agents_records (session_id, seq, type, data) VALUES (%s, %s, %s, %s)",
            [(stored.id, start + i, r.type, r.data_json()) for i, r in enumerate(records)],
        )
        cur.execute(
            "UPDATE trio_agents_sessions SET updated_at = %s WHERE id = %s",
            (time.time(), stored.id),
        )


def _read_sync(
    conn: psycopg.Connection[Any], session_id: str, maybe_bare: bool
) -> StoredSession | None:
    """`maybe_bare`: the store did not create the tables, which may not exist yet (or may
    have been created since the store opened)."""
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        if maybe_bare and not has_tables(conn):
            return None
        return _read_in(conn, session_id)


def _read_in(conn: psycopg.Connection[Any], session_id: str) -> StoredSession | None:
    row = conn.execute(
        "SELECT header FROM trio_agents_sessions WHERE id = %s", (session_id,)
    ).fetchone()
    if row is None:
        return None
    rows = conn.execute(
        "SELECT seq, type, data FROM trio_agents_records WHERE session_id = %s ORDER BY seq",
        (session_id,),
    ).fetchall()
    return stored_session(session_id, row[0], rows, "database")


def _list_sync(conn: psycopg.Connection[Any], maybe_bare: bool) -> list[SessionInfo]:
    infos: list[SessionInfo] = []
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        if maybe_bare and not has_tables(conn):
            return infos
        rows = conn.execute(
            "SELECT id, created_at, updated_at FROM trio_agents_sessions ORDER BY created_at, id"
        ).fetchall()
        for sid, created_at, updated_at in rows:
            try:
                stored = _read_in(conn, sid)
            except CorruptSessionError as exc:
                counted = conn.execute(
                    "SELECT COUNT(*), COUNT(*) FILTER (WHERE type = %s) FROM trio_agents_records "
                    "WHERE session_id = %s",
                    (TURN_START, sid),
                ).fetchone()
                assert counted is not None
                count, turns = counted
                infos.append(
                    SessionInfo(
                        sid, float(created_at), count, turns, None, str(exc), updated_at=updated_at
                    )
                )
                continue
            assert stored is not None
            infos.append(summarize(sid, stored.header, stored.records, float(updated_at)))
    return infos
