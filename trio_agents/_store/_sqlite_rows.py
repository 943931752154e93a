"""The rows of a SQLite session store: its schema, and reading and writing them on a
connection. No trio import: the store calls these in its thread (`_store/_thread`).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from .._errors import CorruptSessionError, NotAStoreError, UnknownStoreVersionError
from ._base import SessionInfo, StoredSession, summarize
from ._records import TURN_START, Record
from ._stored_rows import stored_session

if TYPE_CHECKING:
    from ._session import Session

__all__ = [
    "FORMAT_VERSION",
    "SCHEMA",
    "TOUCH",
    "append_records",
    "check_format",
    "delete_session",
    "list_rows",
    "read_session",
    "rollback",
    "text_or_bytes",
    "write_batch",
]

FORMAT_VERSION: Final = 1

logger = logging.getLogger(__name__)

SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    header TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS updates (
    session_id TEXT PRIMARY KEY REFERENCES sessions(id),
    at REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS records (
    session_id TEXT NOT NULL REFERENCES sessions(id),
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
"""


# When the store last wrote a session. Records carry no time; the store keeps its own, in a
# table of its own, so that a file written before it existed is the same format (the table is
# created at the next writable open; a session not written since reads as created then).
TOUCH: Final = (
    "INSERT INTO updates (session_id, at) VALUES (?, ?) "
    "ON CONFLICT (session_id) DO UPDATE SET at = excluded.at"
)


def check_format(conn: sqlite3.Connection, path: Path, *, allow_empty: bool) -> None:
    """Refuse a file that is not a trio-agents store (or is of another version), rather
    than adding our tables to someone else's database."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    if version == FORMAT_VERSION and {"sessions", "records"} <= tables:
        return
    if version == 0 and not tables and allow_empty:
        return  # a new file: ours to initialise
    if {"sessions", "records"} <= tables:
        raise UnknownStoreVersionError(
            f"{path} is a trio-agents session store of format {version}, but this "
            f"version reads format {FORMAT_VERSION}; use the trio-agents that wrote it, "
            "or another path"
        )
    raise NotAStoreError(
        f"{path} is not a trio-agents session store (user_version {version}, "
        f"tables {sorted(tables)}); use another path"
    )


def write_batch(
    conn: sqlite3.Connection,
    headers: Mapping[str, Mapping[str, Any]],
    batch: Sequence[tuple[Session, int, Record]],
) -> None:
    """One transaction: the header rows, the records, and the sessions' update times."""
    now = time.time()
    conn.execute("BEGIN IMMEDIATE")
    try:
        for sid, header in headers.items():
            conn.execute(
                "INSERT INTO sessions (id, header, created_at) VALUES (?, ?, ?)",
                (sid, json.dumps(dict(header)), float(header.get("created_at", 0.0))),
            )
        conn.executemany(
            "INSERT INTO records (session_id, seq, type, data) VALUES (?, ?, ?, ?)",
            [(s.id, seq, rec.type, rec.data_json()) for s, seq, rec in batch],
        )
        conn.executemany(TOUCH, [(sid, now) for sid in {*headers, *(s.id for s, _, _ in batch)}])
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise


def append_records(
    conn: sqlite3.Connection, session_id: str, start: int, records: Sequence[Record]
) -> None:
    """One transaction: `records` after the first `start` of the session."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany(
            "INSERT INTO records (session_id, seq, type, data) VALUES (?, ?, ?, ?)",
            [(session_id, start + i, rec.type, rec.data_json()) for i, rec in enumerate(records)],
        )
        conn.execute(TOUCH, (session_id, time.time()))
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise


def delete_session(conn: sqlite3.Connection, session_id: str) -> bool:
    """One transaction: the session's records, update time and row; whether it had a row."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("DELETE FROM records WHERE session_id = ?", (session_id,))
        conn.execute("DELETE FROM updates WHERE session_id = ?", (session_id,))
        gone = conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise
    return gone > 0


def read_session(conn: sqlite3.Connection, session_id: str) -> StoredSession | None:
    """The session as stored, or None; CorruptSessionError naming what is damaged."""
    row = conn.execute("SELECT header FROM sessions WHERE id = ?", (session_id,)).fetchone()
    if row is None:
        return None
    rows = conn.execute(
        "SELECT seq, type, data FROM records WHERE session_id = ? ORDER BY seq", (session_id,)
    ).fetchall()
    return stored_session(session_id, row[0], rows, "store file")


def list_rows(conn: sqlite3.Connection) -> list[SessionInfo]:
    """Every stored session, oldest first, damaged ones too (with `damage` said)."""
    infos: list[SessionInfo] = []
    # A read-only store written before update times were kept has no `updates` table.
    query = (
        "SELECT id, created_at, at FROM sessions LEFT JOIN updates ON session_id = id"
        if has_updates(conn)
        else "SELECT id, created_at, NULL FROM sessions"
    )
    rows = conn.execute(f"{query} ORDER BY created_at, id").fetchall()
    for sid, created_at, updated_at in rows:
        try:
            stored = read_session(conn, sid)
        except CorruptSessionError as exc:
            count, turns = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(type = ?), 0) FROM records WHERE session_id = ?",
                (TURN_START, sid),
            ).fetchone()
            last = float(updated_at if updated_at is not None else created_at)
            infos.append(
                SessionInfo(sid, float(created_at), count, turns, None, str(exc), updated_at=last)
            )
            continue
        assert stored is not None
        when = None if updated_at is None else float(updated_at)
        infos.append(summarize(sid, stored.header, stored.records, when))
    return infos


def has_updates(conn: sqlite3.Connection) -> bool:
    query = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'updates'"
    return conn.execute(query).fetchone() is not None


def text_or_bytes(raw: bytes) -> str | bytes:
    """Text columns as str, or as the bytes themselves when they are not UTF-8 (damage that
    decoding the record then reports, rather than the whole query failing)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def rollback(conn: sqlite3.Connection) -> None:
    """Roll back the open transaction, if there still is one: SQLite ends a transaction by
    itself on some errors (a full disk), and a ROLLBACK then would raise "no transaction is
    active" in place of the error that says what happened."""
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            logger.exception("rolling back a failed transaction on %s failed", conn)
