"""The PostgreSQL store's reads and fenced writes, as synchronous functions of a psycopg
connection that the store runs in a worker thread. No trio import.

Every write of a session's rows is conditioned on its claim's fencing token (design D490):
one UPDATE of the sessions' rows, `WHERE epoch = token`, both locks those rows for the
transaction (a claimer's bump waits for the commit) and says which sessions are still the
writer's. Records of the others are not written, and the caller gives those sessions up.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final

from .._errors import CorruptSessionError
from ._base import SessionInfo, StoredSession, summarize
from ._pg_schema import has_tables
from ._records import TURN_START, Record
from ._session import Session
from ._stored_rows import stored_session

__all__ = ["append_fenced", "delete_fenced", "list_sync", "read_sync", "write_batch"]

# The sessions of a batch still held with the writer's tokens, each with the number of
# records it has stored: a batch retried after a lost connection may have been committed
# before the connection went, and its records then are not written twice (D491).
_FENCE: Final = (
    "UPDATE trio_agents_sessions AS s SET updated_at = %s "
    "FROM unnest(%s::text[], %s::bigint[]) AS f(id, epoch) "
    "WHERE s.id = f.id AND s.epoch = f.epoch "
    "RETURNING s.id, coalesce((SELECT max(r.seq) + 1 FROM trio_agents_records AS r "
    "WHERE r.session_id = s.id), 0)"
)
_INSERT: Final = (
    "INSERT INTO trio_agents_records (session_id, seq, type, data) VALUES (%s, %s, %s, %s)"
)


def write_batch(
    conn: Any,
    headers: Mapping[str, Mapping[str, Any]],
    batch: Sequence[tuple[Session, int, Record]],
    tokens: Mapping[str, int],
) -> set[str]:
    """Commit `headers` (sessions whose row is not written yet) and `batch` in one
    transaction, each session's only while its epoch is its token in `tokens`; the ids of
    the sessions fenced out (claimed by someone else since), whose rows were not touched."""
    now = time.time()
    ids = sorted({s.id for s, _, _ in batch} | set(headers))
    with conn.transaction(), conn.cursor() as cur:
        if headers:
            # A row that exists already is another claimer's (the fence below then leaves
            # this session out), or ours, from a commit whose answer the connection lost.
            cur.executemany(
                "INSERT INTO trio_agents_sessions (id, header, created_at, updated_at, epoch) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                [
                    (sid, json.dumps(dict(h)), float(h.get("created_at", 0.0)), now, tokens[sid])
                    for sid, h in headers.items()
                ],
            )
        cur.execute(_FENCE, (now, ids, [tokens.get(sid, -1) for sid in ids]))
        stored: dict[str, int] = {str(sid): int(n) for sid, n in cur.fetchall()}
        rows = [
            (s.id, seq, r.type, r.data_json())
            for s, seq, r in batch
            if s.id in stored and seq >= stored[s.id]
        ]
        if rows:
            cur.executemany(_INSERT, rows)
    return set(ids) - set(stored)


def append_fenced(conn: Any, stored: StoredSession, records: Sequence[Record], token: int) -> bool:
    """Append `records` after `stored`'s (the repair `restore` makes) while the session's
    epoch is `token`; False, writing nothing, if it is not."""
    start = len(stored.records)
    with conn.transaction(), conn.cursor() as cur:
        cur.execute(_FENCE, (time.time(), [stored.id], [token]))
        if not cur.fetchall():
            return False
        cur.executemany(
            _INSERT,
            [(stored.id, start + i, r.type, r.data_json()) for i, r in enumerate(records)],
        )
    return True


def delete_fenced(conn: Any, session_id: str, token: int) -> bool | None:
    """Remove the session's records and row while its epoch is `token`: True if removed,
    False if it is not stored, None (nothing removed) if its epoch is another claimer's."""
    with conn.transaction(), conn.cursor() as cur:
        cur.execute(
            "SELECT epoch FROM trio_agents_sessions WHERE id = %s FOR UPDATE", (session_id,)
        )
        row = cur.fetchone()
        if row is None:
            return False
        if int(row[0]) != token:
            return None
        cur.execute("DELETE FROM trio_agents_records WHERE session_id = %s", (session_id,))
        cur.execute("DELETE FROM trio_agents_sessions WHERE id = %s", (session_id,))
    return True


def read_sync(conn: Any, session_id: str, maybe_bare: bool) -> StoredSession | None:
    """`maybe_bare`: the store did not create the tables, which may not exist yet (or may
    have been created since the store opened)."""
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        if maybe_bare and not has_tables(conn):
            return None
        return _read_in(conn, session_id)


def _read_in(conn: Any, session_id: str) -> StoredSession | None:
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


def list_sync(conn: Any, maybe_bare: bool) -> list[SessionInfo]:
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
