"""The PostgreSQL store's tables, created and migrated idempotently. No trio import.

The tables carry a `trio_agents_` prefix, so a database that holds other applications'
tables can hold ours too. `trio_agents_schema` records which migrations ran: `migrate` runs,
in one transaction under a transaction-level advisory lock (so two stores opening a new
database at once never both create it), each step past the recorded version, and refuses a
database written by a newer version rather than guessing at its tables.
"""

from __future__ import annotations

from typing import Any, Final

from ._errors import UnknownStoreVersionError

__all__ = ["FORMAT_VERSION", "MIGRATE_LOCK", "migrate"]

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
)
FORMAT_VERSION: Final = len(STEPS)


def migrate(conn: Any, where: str) -> int:
    """Create or bring up to date the tables in `conn`'s database (a psycopg connection in
    autocommit mode); the version it was at before. Raises UnknownStoreVersionError for a
    database of a newer format."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS trio_agents_schema (version INTEGER NOT NULL)")
        row = conn.execute("SELECT max(version) FROM trio_agents_schema").fetchone()
        found = 0 if row is None or row[0] is None else int(row[0])
        if found > FORMAT_VERSION:
            raise UnknownStoreVersionError(
                f"{where} holds a trio-agents session store of format {found}, but this "
                f"version reads format {FORMAT_VERSION}; use the trio-agents that wrote it, "
                "or another database"
            )
        for version in range(found, FORMAT_VERSION):
            for statement in STEPS[version]:
                conn.execute(statement)
            conn.execute("INSERT INTO trio_agents_schema (version) VALUES (%s)", (version + 1,))
    return found
