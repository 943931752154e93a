"""The default session store: one SQLite file, WAL mode, written behind by a single writer.

Appends happen synchronously in the agent's task and only queue the record. One writer task
commits queued records in batches, in a worker thread so the event loop never blocks on the
disk: a batch is committed when a turn starts, a step ends or a turn ends, when a prompt is
queued or dropped, when someone flushes (the agent does before its tools start and before
it goes idle), or when the queue grows past a cap. Each batch is one transaction, so a crash never
leaves a torn record; it can leave the last turn open, which `restore` repairs.

Durability: WAL with `synchronous=NORMAL` survives the process being killed at any point (a
committed transaction is in the WAL file before `commit` returns); it may lose the last
transactions on a power failure, which is the usual trade for an interactive tool.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sqlite3
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import trio

from ._errors import (
    AlreadyRunningError,
    NotAStoreError,
    ReadOnlyStoreError,
    SessionLiveElsewhereError,
    StoreBrokenError,
    StoreClosedError,
    StoreNotFoundError,
    UnknownStoreVersionError,
)
from ._nursery import service_nursery
from ._records import PROMPT_DROPPED, PROMPT_QUEUED, STEP_END, TURN_END, TURN_START, Record
from ._repair import validate
from ._session import Session
from ._store import SessionInfo, SessionStore, StoredSession, summarize

__all__ = ["SqliteStore", "default_store_path"]

FORMAT_VERSION: Final = 1
# A queued or dropped prompt may wait behind a long tool: its record must not wait with it.
COMMIT_TRIGGERS: Final = frozenset({TURN_START, STEP_END, TURN_END, PROMPT_QUEUED, PROMPT_DROPPED})
MAX_BATCH: Final = 256
BUSY_TIMEOUT: Final = 10.0  # seconds another process may hold the write lock

SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    header TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS records (
    session_id TEXT NOT NULL REFERENCES sessions(id),
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
"""


def _when_unlocked(statement: Any) -> None:
    """Run `statement()`, retrying while another process holds the lock it needs: switching
    the journal mode fails at once with "database is locked" instead of waiting for the busy
    timeout. Runs in a worker thread, so sleeping here blocks no event loop."""
    deadline = time.monotonic() + BUSY_TIMEOUT
    while True:
        try:
            statement()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.005)


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

    Two processes may share the file: a session live in one cannot be entered or restored
    in the other (DuplicateSessionError).
    """

    def __init__(self, path: str | os.PathLike[str], *, readonly: bool = False) -> None:
        """`readonly=True` opens an existing store for reading only (nothing is created,
        initialised or written); sessions cannot be entered."""
        super().__init__()
        self.path = Path(path)
        self.readonly = readonly
        self._conn: sqlite3.Connection | None = None
        self._lock = trio.Lock()
        self._pending: list[tuple[Session, int, Record]] = []
        self._headers: dict[str, Mapping[str, Any]] = {}  # sessions whose row is not written
        self._committed: dict[str, int] = {}  # session id -> records durable
        self._wake = trio.Event()
        self._progress = trio.lowlevel.ParkingLot()
        self._flush_wanted = False
        self._writer_error: BaseException | None = None
        self._claims: dict[str, int] = {}  # session id -> locked descriptor

    def __repr__(self) -> str:
        return f"<SqliteStore {str(self.path)!r}>"

    # -- running ------------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncGenerator[None, None]:
        """Open the file (creating and initialising it unless read-only) and run the writer
        for the block. Leaving commits every queued record, shielded, then closes the file.

        Entering and leaving are checkpoints. Raises TrioAgentsError if the store is already
        running, if the file is not a trio-agents session store of this format, or if a
        read-only store has no file; a failure of the writer propagates out of the block.
        """
        if self._conn is not None:
            raise AlreadyRunningError(f"{self!r} is already running; one runtime at a time")
        self._conn = await trio.to_thread.run_sync(self._connect)
        try:
            async with service_nursery() as nursery:
                if not self.readonly:
                    nursery.start_soon(self._writer)
                try:
                    yield
                finally:
                    with trio.CancelScope(shield=True):
                        await self._drain()
                    nursery.cancel_scope.cancel(reason="store closing")
        finally:
            conn, self._conn = self._conn, None
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(conn.close)

    def _connect(self) -> sqlite3.Connection:
        if self.readonly:
            if not self.path.exists():
                raise StoreNotFoundError(
                    f"no session store at {self.path}; open it without readonly=True to create it"
                )
            uri = f"{self.path.resolve().as_uri()}?mode=ro"
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
            try:
                self._check_format(conn, allow_empty=False)
            except BaseException:
                conn.close()
                raise
            return conn
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            self.path, check_same_thread=False, isolation_level=None, timeout=BUSY_TIMEOUT
        )
        try:
            # Check and initialise in one write transaction: two processes opening a new
            # file at once must not see each other's half-made schema.
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.DatabaseError as exc:
                # Writing reads the header first: this is where a non-SQLite file shows.
                if exc.sqlite_errorcode != sqlite3.SQLITE_NOTADB:
                    raise
                raise self._not_sqlite(exc) from exc
            try:
                self._check_format(conn, allow_empty=True)
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version={FORMAT_VERSION}")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            _when_unlocked(lambda: conn.execute("PRAGMA journal_mode=WAL"))
            conn.execute("PRAGMA synchronous=NORMAL")
        except BaseException:
            conn.close()
            raise
        return conn

    def _check_format(self, conn: sqlite3.Connection, *, allow_empty: bool) -> None:
        """Refuse a file that is not a trio-agents store (or is of another version), rather
        than adding our tables to someone else's database."""
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        except sqlite3.DatabaseError as exc:
            raise self._not_sqlite(exc) from exc
        if version == FORMAT_VERSION and {"sessions", "records"} <= tables:
            return
        if version == 0 and not tables and allow_empty:
            return  # a new file: ours to initialise
        if {"sessions", "records"} <= tables:
            raise UnknownStoreVersionError(
                f"{self.path} is a trio-agents session store of format {version}, but this "
                f"version reads format {FORMAT_VERSION}; use the trio-agents that wrote it, "
                "or another path"
            )
        raise NotAStoreError(
            f"{self.path} is not a trio-agents session store (user_version {version}, "
            f"tables {sorted(tables)}); use another path"
        )

    def _not_sqlite(self, exc: sqlite3.DatabaseError) -> NotAStoreError:
        return NotAStoreError(f"{self.path} is not an SQLite database ({exc}); use another path")

    def _check_running(self) -> None:
        if self._conn is None:
            raise StoreClosedError(
                f"{self!r} is not running; use it inside `async with store.running()`"
            )
        if self.readonly:
            raise ReadOnlyStoreError(
                f"{self!r} is read-only; open it without readonly=True to write"
            )

    async def _db(self, fn: Any, *args: Any) -> Any:
        if self._conn is None:
            raise StoreClosedError(
                f"{self!r} is not running; use it inside `async with store.running()`"
            )
        async with self._lock:
            return await trio.to_thread.run_sync(fn, *args)

    # -- the write path -----------------------------------------------------------------

    def _attach(self, session: Session) -> None:
        self._committed.setdefault(session.id, len(session))
        if len(session) == 0:
            self._headers[session.id] = session.header

    # -- claims against other processes -------------------------------------------------

    def _claim(self, session_id: str) -> None:
        """An exclusive `flock` on a file per session next to the store, held while the
        session is live here. The kernel drops it when the process dies, so a crash never
        leaves a session claimed."""
        if session_id in self._claims:
            return
        directory = Path(f"{self.path}.live")
        directory.mkdir(mode=0o700, exist_ok=True)
        name = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
        fd = os.open(directory / name, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise SessionLiveElsewhereError(
                f"session {session_id!r} is live in another process using {self.path}; "
                "close it there first"
            ) from None
        self._claims[session_id] = fd

    def _release(self, session_id: str) -> None:
        fd = self._claims.pop(session_id, None)
        if fd is not None:
            os.close(fd)  # closing the descriptor drops the lock

    def _detached(self, session: Session) -> None:
        # Records still queued (a flush that timed out) need their header row and their
        # commit count: forget them only once nothing of this session is pending.
        if not any(pending is session for pending, _, _ in self._pending):
            self._headers.pop(session.id, None)
            self._committed.pop(session.id, None)

    def _appended(self, session: Session, record: Record) -> None:
        self._pending.append((session, len(session) - 1, record))
        if record.type in COMMIT_TRIGGERS or len(self._pending) >= MAX_BATCH:
            self._wake.set()

    def _committed_all(self, session: Session) -> bool:
        return self._committed.get(session.id, len(session)) >= len(session)

    async def flush(self, session: Session) -> None:
        """Have the writer commit now, and return once every record appended to `session`
        so far is committed. Always a checkpoint. While records remain to commit, raises
        TrioAgentsError if the writer has failed (chained to its error), or if the store is
        not running or is read-only."""
        target = len(session)
        while self._committed.get(session.id, target) < target:
            if self._writer_error is not None:
                raise StoreBrokenError(
                    f"{self!r} cannot write: its writer failed (the cause says why); "
                    "close the runtime and check the file"
                ) from self._writer_error
            self._check_running()
            self._flush_wanted = True
            self._wake.set()
            await self._progress.park()
        await trio.lowlevel.checkpoint()

    async def _drain(self) -> None:
        while self._pending and self._writer_error is None:
            self._flush_wanted = True
            self._wake.set()
            await self._progress.park()

    async def _writer(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            if not self._pending:
                continue
            batch, self._pending = self._pending, []
            self._flush_wanted = False
            headers = {s.id: self._headers.pop(s.id) for s, _, _ in batch if s.id in self._headers}
            try:
                await self._db(self._write_batch, headers, batch)
            except Exception as exc:
                self._writer_error = exc
                self._progress.unpark_all()
                raise
            for session, seq, _ in batch:
                self._committed[session.id] = max(self._committed.get(session.id, 0), seq + 1)
            self._progress.unpark_all()

    def _write_batch(
        self,
        headers: Mapping[str, Mapping[str, Any]],
        batch: Sequence[tuple[Session, int, Record]],
    ) -> None:
        assert self._conn is not None
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            for sid, header in headers.items():
                conn.execute(
                    "INSERT INTO sessions (id, header, created_at) VALUES (?, ?, ?)",
                    (sid, json.dumps(dict(header)), float(header.get("created_at", 0.0))),
                )
            conn.executemany(
                "INSERT INTO records (session_id, seq, type, data) VALUES (?, ?, ?, ?)",
                [(s.id, seq, rec.type, json.dumps(rec.to_json()["data"])) for s, seq, rec in batch],
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    # -- reads --------------------------------------------------------------------------

    async def _read(self, session_id: str) -> StoredSession | None:
        return await self._db(self._read_sync, session_id)  # type: ignore[no-any-return]

    def _read_sync(self, session_id: str) -> StoredSession | None:
        assert self._conn is not None
        row = self._conn.execute(
            "SELECT header FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if row is None:
            return None
        rows = self._conn.execute(
            "SELECT seq, type, data FROM records WHERE session_id = ? ORDER BY seq", (session_id,)
        ).fetchall()
        validate(session_id, [seq for seq, _, _ in rows])
        records = tuple(Record.of(kind, json.loads(data)) for _, kind, data in rows)
        return StoredSession(session_id, json.loads(row[0]), records)

    async def _append_durably(self, stored: StoredSession, records: Sequence[Record]) -> None:
        await self._db(self._append_sync, stored, records)

    def _append_sync(self, stored: StoredSession, records: Sequence[Record]) -> None:
        assert self._conn is not None
        start = len(stored.records)
        with self._conn:
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany(
                "INSERT INTO records (session_id, seq, type, data) VALUES (?, ?, ?, ?)",
                [
                    (stored.id, start + i, rec.type, json.dumps(rec.to_json()["data"]))
                    for i, rec in enumerate(records)
                ],
            )

    async def list_sessions(self) -> list[SessionInfo]:
        """Every stored session, oldest first (by creation time, then id), read in a worker
        thread. Always a checkpoint. Raises TrioAgentsError unless the store is running,
        CorruptSessionError if a session's records are damaged."""
        return await self._db(self._list_sync)  # type: ignore[no-any-return]

    def _list_sync(self) -> list[SessionInfo]:
        assert self._conn is not None
        infos: list[SessionInfo] = []
        rows = self._conn.execute(
            "SELECT id, header FROM sessions ORDER BY created_at, id"
        ).fetchall()
        for sid, header in rows:
            stored = self._read_sync(sid)
            assert stored is not None
            infos.append(summarize(sid, json.loads(header), stored.records))
        return infos
