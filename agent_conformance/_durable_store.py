"""The durable machine's checks of the SQLite store itself, on a file of their own beside the
example's (rules L3 and L11), so that what they store never mixes with the runtime's
sessions.

L11: a store is closed while another connection holds the file's write lock. It never
drops a record it accepted, and never reports one stored that is not: the file holds a
prefix of each session's records (those flushed before the lock, at least), and if any
record is missing, leaving `running()` raised StoreLockedError naming the file and how
many records were not stored. The store's `close_grace` is short: nobody lets the lock go.

L3: a session's detach only ever removes its exact entry. A session is entered, detached,
entered again under the same id (as a resume does, with its records), and the first
detach is called again: the second entry stays live, and its appends are stored.
"""

from __future__ import annotations

import itertools
import re
import sqlite3
from pathlib import Path

import trio
from hypothesis import strategies as st
from hypothesis.stateful import precondition

from trio_agents import Record, Session, SqliteStore, StoreLockedError

from ._durable_file import FileReads
from ._durable_properties import CLOSE_REPORTS_UNSTORED, STALE_DETACH_HARMLESS, show, shown
from ._machine import rule
from ._vocabulary import USER_MESSAGE

__all__ = ["LOCKED_CLOSE_GRACE", "StoreItself", "leaves"]

LOCKED_CLOSE_GRACE = 0.01  # seconds: the lock stays held, so any grace ends the same way


def leaves(exc: BaseException) -> list[BaseException]:
    """Every exception in `exc`, groups opened."""
    if isinstance(exc, BaseExceptionGroup):
        group: BaseExceptionGroup[BaseException] = exc  # pyright: ignore[reportUnknownVariableType]
        return [leaf for inner in group.exceptions for leaf in leaves(inner)]
    return [exc]


def _message(n: int) -> tuple[str, dict[str, object]]:
    return USER_MESSAGE, {"id": f"direct-m{n}", "content": f"direct {n}"}


class StoreItself(FileReads):
    """The durable machine's rules on the SQLite store alone. What they use of the machine:
    `host`, `path` (their file is beside it), `trace`."""

    path: Path
    trace: list[str]
    _direct_ids = itertools.count(1)
    _store_checks: set[str]
    """The rules of this kind this example ran: each runs once an example at most."""

    @property
    def _direct_path(self) -> Path:
        return self.path.with_name("direct.sqlite3")

    @precondition(lambda self: "locked" not in self._store_checks)
    @rule(flushed=st.integers(0, 2), locked=st.integers(1, 3))
    def store_closed_while_locked(self, flushed: int = 0, locked: int = 1) -> None:
        """A store appends `flushed` records it flushes, then, while another connection holds
        the write lock, `locked` more, and is closed (L11)."""
        self._store_checks.add("locked")
        sid = f"direct-{next(self._direct_ids)}"
        error, had = self.host.call(self._close_locked, sid, flushed, locked)
        self.trace.append(f"store closed locked {flushed}+{locked}")
        found = self.host.call(self._read_direct, sid)
        held = found if isinstance(found, tuple) else ()
        told = f"a store closed while another connection held the write lock, with {show(had)}"
        if isinstance(found, str) or had[: len(held)] != held or len(held) < flushed:
            CLOSE_REPORTS_UNSTORED.fail(
                f"{told} ({flushed} of them flushed before the lock): the file holds {shown(found)}"
            )
        missing = len(had) - len(held)
        if not missing:
            return
        raised = leaves(error) if error is not None else []
        named = [str(x) for x in raised if isinstance(x, StoreLockedError)]
        CLOSE_REPORTS_UNSTORED.check(
            bool(named),
            lambda: (
                f"{told}, {missing} of them not stored, raised "
                f"{[repr(x) for x in raised] or 'nothing'}, not StoreLockedError"
            ),
        )
        text = named[0]
        CLOSE_REPORTS_UNSTORED.check(
            str(self._direct_path) in text
            and bool(re.search(rf"(?<![\w.]){missing}(?![\w.])", text)),
            lambda: (
                f"{told}, {missing} of them not stored, raised StoreLockedError({text!r}): "
                f"it must name the file ({self._direct_path}) and how many were not stored"
            ),
        )

    async def _close_locked(
        self, sid: str, flushed: int, locked: int
    ) -> tuple[BaseException | None, tuple[Record, ...]]:
        store = SqliteStore(self._direct_path, close_grace=LOCKED_CLOSE_GRACE)
        session = Session(sid)
        keeper: sqlite3.Connection | None = None
        error: BaseException | None = None
        try:
            async with store.running():
                store.enter(session)
                for n in range(flushed):
                    session.append(*_message(n))
                await store.flush(session)
                keeper = await trio.to_thread.run_sync(self._take_lock)
                for n in range(flushed, flushed + locked):
                    session.append(*_message(n))
        except Exception as exc:  # what the close raised is what is checked
            error = exc
        finally:
            if keeper is not None:
                keeper.rollback()
                keeper.close()
        return error, tuple(session.records)

    def _take_lock(self) -> sqlite3.Connection:
        keeper = sqlite3.connect(self._direct_path, check_same_thread=False, timeout=5.0)
        keeper.execute("BEGIN IMMEDIATE")
        return keeper

    async def _read_direct(self, sid: str) -> tuple[Record, ...] | str | None:
        reader = SqliteStore(self._direct_path, readonly=True)
        async with reader.running():
            return (await self._read_with(reader, [sid]))[sid]

    @precondition(lambda self: "stale" not in self._store_checks)
    @rule()
    def stale_detach(self) -> None:
        """Enter a session, detach it, enter it again under the same id with its records,
        call the first detach again: the second entry stays live and stores (L3)."""
        self._store_checks.add("stale")
        sid = f"direct-{next(self._direct_ids)}"
        problem = self.host.call(self._stale_detach, sid)
        self.trace.append("stale detach")
        if problem is not None:
            STALE_DETACH_HARMLESS.fail(problem)

    async def _stale_detach(self, sid: str) -> str | None:
        store = SqliteStore(self._direct_path)
        async with store.running():
            first = Session(sid)
            detach = store.enter(first)
            first.append(*_message(0))
            await store.flush(first)
            detach()
            second = Session(sid, records=first.records)
            store.enter(second)
            detach()  # stale: the first entry is gone already
            if store.get(sid) is not second or sid not in store.live_ids:
                return (
                    f"session {sid!r} was entered again after its detach, and calling the "
                    f"first entry's detach again took the new entry out of the store "
                    f"(get: {store.get(sid)!r}, live: {sorted(store.live_ids)})"
                )
            second.append(*_message(1))
            await store.flush(second)
        found = await self._read_direct(sid)
        if found != tuple(second.records):
            return (
                f"session {sid!r}, entered again after its detach (whose stale detach was "
                f"called again), appended and flushed {show(second.records)}; the file holds "
                f"{shown(found)}"
            )
        return None
