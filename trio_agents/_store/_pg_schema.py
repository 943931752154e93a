"""The PostgreSQL store's tables, created and migrated idempotently. No trio import.

The tables carry a `trio_agents_` prefix, so a database that holds other applications'
tables can hold ours too. `trio_agents_schema` records which migrations ran: `migrate` runs,
in one transaction under a transaction-level advisory lock (so two stores opening a new
database at once never both create it), each step past the recorded version, and refuses a
database written by a newer version rather than guessing at its tables. `readable` is the
read-only store's look at the same table: it creates nothing (design D363).
"""

from __future__ import annotations

from typing import Any, Final

from .._errors import UnknownStoreVersionError

__all__ = ["FORMAT_VERSION", "MIGRATE_LOCK", "has_tables", "migrate", "readable"]

# An arbitrary constant that only our migrations take ("trio-agents" in ASCII, cut to 63 bits).
MIGRATE_LOCK: Final = 0x7472696F2D6167
# Step n brings a database from version n to n + 1. Add steps; never change one that shipped.
STEPS: Final[tuple[tuple[str, ...], ...]] = (
    (
        """CREATE TABLE trio_agents_sessions (
            id TEXT PRIMARY KEY,
            header TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL
        )""",
        # Records are JSON text, not jsonb: they read back exactly as they were written, and
        # damage shows as damage rather than as a failed insert.
        """CREATE TABLE trio_agents_records (
            session_id TEXT NOT NULL REFERENCES trio_agents_sessions (id),
            seq INTEGER NOT NULL,
            type TEXT NOT NULL,
            data TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)
        )""",
    ),
    # Format 2: claims are fenced (design D490). Each claim sets its session's epoch to a
    # new value of the sequence, and a write of the session's records is refused unless the
    # epoch is still the writer's: rows of format 1 start at 0, which no claim hands out.
    (
        "ALTER TABLE trio_agents_sessions ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0",
        "CREATE SEQUENCE trio_agents_claim_epochs",
    ),
)
FORMAT_VERSION: Final = len(STEPS)


def migrate(conn: Any, where: str) -> int:
    """Create or bring up to date the tables in `conn`'s database (a psycopg connection in
    autocommit mode); the version it was at before. Raises UnknownStoreVersionError for a
    database of a newer format."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS trio_agents_schema (version INTEGER NOT NULL)")
        found = _version(conn)
        _refuse_newer(found, where)
        for version in range(found, FORMAT_VERSION):
            for statement in STEPS[version]:
                conn.execute(statement)
            conn.execute("INSERT INTO trio_agents_schema (version) VALUES (%s)", (version + 1,))
    return found


def readable(conn: Any, where: str) -> bool:
    """Whether `conn`'s database holds our tables, for reading them as they are; False for a
    database that never had them (it holds no sessions). Writes nothing. Raises
    UnknownStoreVersionError for a format other than this version's: a newer one, or an
    older one, which only a store opened to write migrates."""
    with conn.transaction():
        found = _version(conn) if has_tables(conn, "trio_agents_schema") else 0
    _refuse_newer(found, where)
    if 0 < found < FORMAT_VERSION:
        raise UnknownStoreVersionError(
            f"{where} holds a trio-agents session store of format {found}, which this "
            f"version migrates to format {FORMAT_VERSION} only when it opens the store to "
            "write; open it once with `trio-agents chat --store` or `trio-agents acp --store` "
            "(or PostgresStore without readonly=True)"
        )
    return found == FORMAT_VERSION


def has_tables(conn: Any, table: str = "trio_agents_sessions") -> bool:
    """Whether `table` is in the schema search path of `conn`'s database, as unqualified
    names in our statements find it."""
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()
    return bool(row is not None and row[0])


def _version(conn: Any) -> int:
    row = conn.execute("SELECT max(version) FROM trio_agents_schema").fetchone()
    return 0 if row is None or row[0] is None else int(row[0])


def _refuse_newer(found: int, where: str) -> None:
    if found > FORMAT_VERSION:
        raise UnknownStoreVersionError(
            f"{where} holds a trio-agents session store of format {found}, but this "
            f"version reads format {FORMAT_VERSION}; use the trio-agents that wrote it, "
            "or another database"
        )
