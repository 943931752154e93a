"""`trio-agents sessions`: look at the sessions stored in a SQLite store file or a database.

`list` prints one line per session, its title (its first prompt) last; `show` prints one
session's records, in order, exactly as stored. Both only read: `show` uses
`SessionStore.load`, not `restore`, so looking at a session a crash left open does not
append the closers that resuming it would. A store path
that does not exist is an error, not an empty store: opening it would create the file, and
a mistyped `--store` should not quietly leave a new database behind. A database is opened
read-only too, and one without the tables holds no sessions: nothing is created in it
(design D363).

`list` lists a damaged session too, marked `damaged` (with why on stderr), and exits 1 when
there is one. Output is written with lone surrogates (which JSON and ACP accept) escaped as
`\\udXXX`, so `--json` lines stay valid JSON. A reader that closes the pipe early (`| head`)
ends the command quietly with status 141, as a process killed by SIGPIPE reports in a shell.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO, TypeVar

import trio

from .._errors import SessionNotFoundError, TrioAgentsError
from .._store._base import SessionInfo, SessionStore, StoredSession
from .._store._errors import non_directory_ancestor
from .._store._postgres import PostgresStore
from .._store._sqlite import SqliteStore, default_store_path
from ._args import add_store

__all__ = ["add_parser", "format_info", "format_record", "run"]

T = TypeVar("T")

EXIT_PIPE_CLOSED = 128 + signal.SIGPIPE


def add_parser(commands: Any) -> None:
    """Add the `sessions` command to the `trio-agents` subcommands (`commands` is what
    `ArgumentParser.add_subparsers` returned)."""
    sessions = commands.add_parser("sessions", help="list and show stored sessions")
    actions = sessions.add_subparsers(dest="action", required=True)

    listing = actions.add_parser("list", help="one line per stored session, oldest first")
    add_store(listing, what="the SQLite store file")

    show = actions.add_parser("show", help="the records of one session, in order")
    show.add_argument("session_id", metavar="SESSION_ID")
    add_store(show, what="the SQLite store file")
    show.add_argument("--json", action="store_true", help="one JSON object per record")


def run(args: argparse.Namespace) -> int:
    """Run `sessions list` or `sessions show`; the exit code."""
    out, err = sys.stdout, sys.stderr
    target: Path | str = args.store if args.store is not None else default_store_path()
    if isinstance(target, str):
        try:
            database = PostgresStore(target, readonly=True)
        except TrioAgentsError as exc:  # no driver installed: before any connection
            print(f"trio-agents sessions: --store: {exc}", file=err)
            return 2
        return _run_on(database, args, out, err)
    path = target
    blocker = non_directory_ancestor(path)
    if blocker is not None:
        print(f"trio-agents sessions: --store {path}: {blocker} is not a directory", file=err)
        return 2
    if not path.exists():
        print(f"trio-agents sessions: no store at {path}", file=err)
        return 1
    if not path.is_file():
        print(f"trio-agents sessions: --store {path} is not a file", file=err)
        return 2
    return _run_on(SqliteStore(path, readonly=True), args, out, err)


def _run_on(
    store: SqliteStore | PostgresStore, args: argparse.Namespace, out: TextIO, err: TextIO
) -> int:
    # A SQLite store is named by its file, a database by its URL without the password.
    path = store.path if isinstance(store, SqliteStore) else store.where
    try:
        if args.action == "list":
            infos: list[SessionInfo] = trio.run(_list, store)
            return _print_list(infos, path, out, err)
        sid: str = args.session_id
        try:
            stored: StoredSession = trio.run(_load, store, sid)
        except SessionNotFoundError:
            print(f"trio-agents sessions: no session {_printable(repr(sid))} in {path}", file=err)
            return 1
        for seq, record in enumerate(stored.records):
            line = format_record(seq, record.type, record.to_json()["data"], args.json)
            print(_printable(line), file=out)
        out.flush()  # here, where a closed pipe can still be answered
        return 0
    except BrokenPipeError:
        # The reader has gone: nothing more can be shown, and nothing is wrong with the
        # store. Point stdout at /dev/null so the interpreter's last flush is quiet too.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
        os.close(devnull)
        return EXIT_PIPE_CLOSED
    except (TrioAgentsError, sqlite3.Error) as exc:
        # Not a store, another format version, or corrupt records: say which file.
        print(_printable(f"trio-agents sessions: cannot read {path}: {exc}"), file=err)
        return 1


def format_info(info: SessionInfo) -> tuple[str, str, str, str, str, str]:
    """The columns of one `list` line (the title last: "-" before the first prompt)."""
    created = datetime.fromtimestamp(info.created_at, tz=UTC).isoformat(timespec="seconds")
    last = "damaged" if info.damage is not None else info.last_end or "-"
    return info.id, created, str(info.records), str(info.turns), last, info.title or "-"


def format_record(seq: int, type: str, data: Any, as_json: bool = False) -> str:
    """One `show` line: `seq  type  data` with the data as compact JSON, or a JSON object."""
    if as_json:
        return json.dumps({"seq": seq, "type": type, "data": data}, ensure_ascii=False)
    return f"{seq}  {type}  {json.dumps(data, separators=(',', ':'), ensure_ascii=False)}"


def _print_list(infos: Sequence[SessionInfo], path: Path | str, out: TextIO, err: TextIO) -> int:
    if not infos:
        # On stderr, so that a script reading stdout sees no sessions, not a message.
        print(f"trio-agents sessions: no sessions in {path}", file=err)
        return 0
    header = ("SESSION", "CREATED (UTC)", "RECORDS", "TURNS", "LAST END", "TITLE")
    rows = [header, *(format_info(info) for info in infos)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        print(_printable("  ".join([*cells, row[-1]])), file=out)
    out.flush()
    damaged = [info for info in infos if info.damage is not None]
    for info in damaged:
        print(_printable(f"trio-agents sessions: {info.damage}"), file=err)
    return 1 if damaged else 0


def _printable(text: str) -> str:
    """`text` with lone surrogates as `\\udXXX` escapes: they cannot be encoded to UTF-8,
    and in a JSON line the escape reads back as the same string."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


async def _list(store: SessionStore) -> list[SessionInfo]:
    return await _reading(store, lambda store: store.list_sessions())


async def _load(store: SessionStore, session_id: str) -> StoredSession:
    return await _reading(store, lambda store: store.load(session_id))


async def _reading(store: SessionStore, read: Callable[[SessionStore], Awaitable[T]]) -> T:
    """`await read(store)` on the store, which `run` opened read-only: looking never
    changes the file or the database."""
    async with store.running():
        return await read(store)
