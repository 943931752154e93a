"""Claims of PostgreSQL sessions and their fencing tokens, as synchronous statements. No trio
import: the store runs them in the event loop's thread (claiming is synchronous, D321) or in
a worker thread (re-taking claims after a reconnect).

A claim is two things. A session-level advisory lock on the store's claims connection says
who has the session live now; the server drops it when that connection ends. And a fencing
token: each claim sets the session's `epoch` to a new value of a database-wide sequence, and
every write of the session's records is conditioned on the epoch still being the writer's
token, in the write's own transaction (design D490). The lock alone cannot stop a holder
whose claims connection was cut while its process lives: the server dropped the lock, a
second process took it, and the first one's writer still writes. The token can.
"""

from __future__ import annotations

import contextlib
import hashlib
from typing import Any, Final

__all__ = ["lock_key", "retake", "try_claim", "unlock"]

# A claim's new epoch: the session's row gets it, or, a session not stored yet, it is the
# epoch its header will be inserted with. A sequence value is never handed out twice, so
# two claimers of one unstored id never hold the same token (D490).
_BUMP: Final = (
    "WITH bumped AS (UPDATE trio_agents_sessions SET epoch = nextval('trio_agents_claim_epochs') "
    "WHERE id = %s RETURNING epoch) "
    "SELECT coalesce((SELECT epoch FROM bumped), nextval('trio_agents_claim_epochs'))"
)


def lock_key(namespace: str, session_id: str) -> int:
    """The advisory lock key of a session: 64 bits of a hash of its id, and of the schema
    the store's tables are in, so that stores in two schemas of one database never claim
    each other's sessions. A collision (about 2**-64 per pair) only refuses a resume."""
    digest = hashlib.sha256(f"{namespace}\0{session_id}".encode("utf-8", "surrogatepass"))
    return int.from_bytes(digest.digest()[:8], "big", signed=True)


def try_claim(conn: Any, key: int, session_id: str) -> int | None:
    """Lock `key` on `conn` (autocommit) without waiting and take a new fencing token for
    `session_id`; the token, or None if another connection holds the lock. Raises the
    driver's error (the lock given back) if the token cannot be taken: the bump waits for
    a write of the session under way elsewhere, bounded by the connection's lock_timeout."""
    row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
    if row is None or not row[0]:
        return None
    try:
        bumped = conn.execute(_BUMP, (session_id,)).fetchone()
    except BaseException:
        unlock(conn, key)
        raise
    assert bumped is not None
    return int(bumped[0])


def retake(conn: Any, key: int, session_id: str, token: int) -> bool:
    """After the claims connection was lost: lock `key` again on the new `conn`, and keep
    it only if nobody claimed the session meanwhile (its epoch is still `token`, or it is
    still not stored). False: the session is someone else's now."""
    row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
    if row is None or not row[0]:
        return False
    found = conn.execute(
        "SELECT epoch FROM trio_agents_sessions WHERE id = %s", (session_id,)
    ).fetchone()
    if found is None or int(found[0]) == token:
        return True
    unlock(conn, key)
    return False


def unlock(conn: Any, key: int) -> None:
    """Give up the lock on `key`. Never raises: it runs as a session detaches, and a
    connection that failed holds no lock any more (the server dropped them all)."""
    with contextlib.suppress(Exception):
        conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
