"""Opening a SQLite session store's file: read-only, or writable (created and initialised
in one write transaction, then switched to WAL). Runs in the store's thread; blocking here
blocks no event loop.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from .._errors import StoreNotFoundError
from ._errors import on_read_only_fs
from ._sqlite_rows import FORMAT_VERSION, SCHEMA, check_format, rollback, text_or_bytes

__all__ = ["BUSY_TIMEOUT", "open_read_only", "open_writable"]

BUSY_TIMEOUT: Final = 10.0  # seconds another process may hold the write lock at open


def open_read_only(path: Path) -> sqlite3.Connection:
    """A connection that only reads the store at `path`, which must exist and be one."""
    if not path.exists():
        raise StoreNotFoundError(
            f"no session store at {path}; open it without readonly=True to create it"
        )
    uri = f"{path.resolve().as_uri()}?mode=ro"
    if on_read_only_fs(path):
        # WAL needs its shared-memory file next to the database, which cannot be made on a
        # read-only mount; nothing can write there, so reading it as is is safe.
        uri += "&immutable=1"
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
    try:
        conn.text_factory = text_or_bytes
        check_format(conn, path, allow_empty=False)
    except BaseException:
        conn.close()
        raise
    return conn


def open_writable(path: Path, *, wait_ms: int) -> sqlite3.Connection:
    """A connection that writes the store at `path`, creating and initialising it if need
    be: WAL, `synchronous=NORMAL`, no automatic checkpoint (the store's thread runs them,
    D355), and SQLite's own wait for another process's lock set to `wait_ms`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(
        path, check_same_thread=False, isolation_level=None, timeout=BUSY_TIMEOUT
    )
    try:
        conn.text_factory = text_or_bytes
        # Check and initialise in one write transaction: two processes opening a new file at
        # once must not see each other's half-made schema. Writing reads the header first:
        # this is where a non-SQLite file shows.
        conn.execute("BEGIN IMMEDIATE")
        try:
            check_format(conn, path, allow_empty=True)
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version={FORMAT_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            rollback(conn)
            raise
        _when_unlocked(lambda: conn.execute("PRAGMA journal_mode=WAL"))
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA wal_autocheckpoint=0")
        conn.execute(f"PRAGMA busy_timeout={wait_ms}")
    except BaseException:
        conn.close()
        raise
    return conn


def _when_unlocked(statement: Callable[[], Any]) -> None:
    """Run `statement()`, retrying while another process holds the lock it needs: switching
    the journal mode fails at once with "database is locked" instead of waiting for the busy
    timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT
    while True:
        try:
            statement()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.005)
