"""Connecting to PostgreSQL for the store: the optional driver, the DSN as messages name
it (never its password), and noticing that an idle connection was lost. Each function is
synchronous except `until_lost`, which waits for the socket in the event loop's thread.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import trio

from .._errors import StoreConnectionError

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "close_all",
    "describe_dsn",
    "is_postgres_url",
    "psycopg_module",
    "until_lost",
    "without_password",
]


def is_postgres_url(text: str) -> bool:
    """Whether `text` names a PostgreSQL database (`postgresql://...` or `postgres://...`)."""
    return text.startswith(("postgresql://", "postgres://"))


def psycopg_module() -> Any:
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


def describe_dsn(dsn: str) -> tuple[str, str]:
    """The database a DSN names, without its password, and the password (to keep it out of
    messages). A DSN that cannot be parsed is named by its scheme only."""
    conninfo = psycopg_module().conninfo
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


async def until_lost(conn: psycopg.Connection[Any], psycopg: Any) -> None:
    """Return once the server closed `conn` (idle in autocommit: anything it sends
    unasked is a notice, or the end). Reads without blocking, in the event loop's thread,
    which also claims on it synchronously: a wake-up whose input a claim already took
    finds nothing to read."""
    ok = psycopg.pq.ConnStatus.OK
    while True:
        try:
            fd = conn.fileno()
        except psycopg.Error:
            return
        await trio.lowlevel.wait_readable(fd)
        try:
            conn.pgconn.consume_input()
            conn.pgconn.is_busy()  # parses what came, which may end the connection
        except psycopg.Error:
            return
        if conn.broken or conn.closed or conn.pgconn.status != ok:
            return


def close_all(*conns: psycopg.Connection[Any] | None) -> None:
    for conn in conns:
        if conn is not None:
            conn.close()
